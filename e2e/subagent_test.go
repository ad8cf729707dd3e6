package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/syncbuf"
	"github.com/agentrunner/agentrunner/llm"
	"github.com/agentrunner/agentrunner/llm/fake"
	"github.com/agentrunner/agentrunner/sqlite"
)

// subagentConfig is a lead agent that runs sub-agents (spec 4): the
// pipeline research has one step, the lead, whose subagent_run starts
// runs of research-task, the researcher's pipeline.
const subagentConfig = `version: 1
name: subagents
artifacts_dir: ./artifacts

providers:
  openai: {kind: openai, model: gpt-4.1, base_url: "%s", api_key_env: OPENAI_API_KEY}

defaults: {provider: openai, timeout: 1m, retries: {max: 0}}

tools:
  subagent_run: {kind: subagent_run, pipeline: research-task, max_parallel: 3}
  parallel_tool_call: {kind: parallel_tool_call}
  todo_list_write: {kind: todo_list_write}
  filesystem_write: {kind: filesystem_write}

agents:
  lead:
    identity: lead.md
    tools: [subagent_run, parallel_tool_call, todo_list_write]
    output: {file: answer.md, template: answer.md}
  researcher:
    identity: researcher.md
    tools: [filesystem_write]
    output: {file: result.json, template: result.json, schema: result.schema.json}

pipelines:
  research:
    start: lead
    steps:
      lead: {agent: lead, next: end}
  research-task:
    start: research
    steps:
      research: {agent: researcher, next: end}
`

// subagentTasks are the lead's tasks, each with how long its researcher's
// model takes to answer: alpha ends at once, beta and gamma are still
// running when the first runner is killed.
var subagentTasks = map[string]time.Duration{"alpha": 300 * time.Millisecond, "beta": 4 * time.Second, "gamma": 4 * time.Second}

var taskNameInPrompt = regexp.MustCompile(`"task_name":"(\w+)"`)

// subagentModel plays the lead and the researchers. The lead's first turn
// runs the three tasks in one parallel_tool_call, its second reads the
// report of the first result's artifact_path with filesystem_read, its
// third writes the answer; a researcher's first turn writes a report on
// its task, read from its prompt, with filesystem_write, its second
// answers with a SubagentResult naming it. leadSaw gets the batch's
// result, leadRead the read's.
type subagentModel struct {
	t        *testing.T
	mu       sync.Mutex
	leadSaw  []string
	leadRead string
	// delay is how long a researcher's answer takes, by task.
	delay map[string]time.Duration
}

func (m *subagentModel) respond(req fake.OpenAIRequest) fake.OpenAIReply {
	system, _, results := openAIRequest(req)
	usage := llm.Usage{InputTokens: 400, OutputTokens: 60}
	match := agentLine.FindStringSubmatch(system)
	if match == nil {
		m.t.Errorf("the prompt does not say which agent:\n%.300s", system)
		return fake.OpenAIReply{Text: "?"}
	}
	switch agent := match[1]; {
	case agent == "lead" && len(results) == 0:
		var calls []map[string]any
		for _, name := range slices.Sorted(maps.Keys(subagentTasks)) {
			calls = append(calls, map[string]any{"name": "subagent_run", "arguments": map[string]any{"task": map[string]any{
				"task_name": name, "prompt": "Research " + name + " and summarise it.", "description": "the " + name + " question", "tool_budget": 2,
			}}})
		}
		args, _ := json.Marshal(map[string]any{"calls": calls})
		return fake.OpenAIReply{ToolCalls: []llm.ToolCall{{ID: "batch-1", Name: "parallel_tool_call", Arguments: args}}, Usage: usage}
	case agent == "lead" && len(results) == 1:
		m.mu.Lock()
		m.leadSaw = results
		m.mu.Unlock()
		path := firstArtifactPath(results[0])
		if path == "" {
			m.t.Errorf("the batch's first result names no artifact_path: %s", results[0])
			path = "memory/alpha.md"
		}
		args, _ := json.Marshal(map[string]any{"path": path})
		return fake.OpenAIReply{ToolCalls: []llm.ToolCall{{ID: "read-1", Name: "filesystem_read", Arguments: args}}, Usage: usage}
	case agent == "lead":
		m.mu.Lock()
		m.leadRead = results[len(results)-1]
		m.mu.Unlock()
		return fake.OpenAIReply{Text: "# Answer\n\n## Body\nalpha, beta and gamma are researched.\n", Usage: usage}
	case agent == "researcher":
		name := researcherTask(req)
		if name == "" {
			m.t.Errorf("the researcher's prompt has no task:\n%.600s", system)
			return fake.OpenAIReply{Text: "{}"}
		}
		if len(results) == 0 {
			// A sub-agent reads no files (spec 4): its tools are its
			// own, its files are in its prompt.
			var tools []string
			for _, tl := range req.Tools {
				tools = append(tools, tl.Name)
			}
			if !slices.Equal(tools, []string{"filesystem_write"}) {
				m.t.Errorf("the researcher of %s is offered %v, want only filesystem_write", name, tools)
			}
			if !strings.Contains(system, `"summary": "what you found"`) {
				m.t.Errorf("the researcher's prompt does not give its template inline:\n%.600s", system)
			}
			args, _ := json.Marshal(map[string]any{"path": name + ".md", "content": reportOf(name)})
			return fake.OpenAIReply{ToolCalls: []llm.ToolCall{{ID: "write-" + name, Name: "filesystem_write", Arguments: args}}, Usage: usage}
		}
		out, _ := json.Marshal(map[string]any{"summary": "found " + name, "detail": "the detail of " + name, "artifact_path": name + ".md"})
		delay := subagentTasks[name]
		if m.delay != nil {
			delay = m.delay[name]
		}
		return fake.OpenAIReply{Text: string(out), Usage: usage, Delay: delay}
	}
	m.t.Errorf("unexpected agent %q", match[1])
	return fake.OpenAIReply{Text: "?"}
}

// reportOf is the report a researcher writes on its task.
func reportOf(name string) string {
	return "# " + name + "\n\nThe report on " + name + ".\n"
}

// firstArtifactPath is the artifact_path of the first SubagentResult in
// a parallel_tool_call's result, "" if none.
func firstArtifactPath(result string) string {
	var outer struct{ Message string }
	var batch []struct{ Message string }
	if json.Unmarshal([]byte(result), &outer) != nil || json.Unmarshal([]byte(outer.Message), &batch) != nil || len(batch) == 0 {
		return ""
	}
	var r struct {
		ArtifactPath string `json:"artifact_path"`
	}
	json.Unmarshal([]byte(batch[0].Message), &r)
	return r.ArtifactPath
}

// researcherTask is the task name in a researcher's prompt, "" if none.
func researcherTask(req fake.OpenAIRequest) string {
	for _, msg := range req.Messages {
		if sm := taskNameInPrompt.FindStringSubmatch(msg.Content); sm != nil {
			return sm[1]
		}
	}
	return ""
}

// TestSubagentRunsAreDurableChildRuns: a lead agent runs three sub-agents
// at once with subagent_run in a parallel_tool_call. Each is a run of
// research-task whose parent is the lead's run. The runner is killed
// while two of them run: run again, the lead's attempt finds the children
// it started, the one that ended is not run again, the others are
// resumed, and the lead gets the three results and answers.
func TestSubagentRunsAreDurableChildRuns(t *testing.T) {
	model := &subagentModel{t: t}
	var replies []fake.OpenAIReply
	for range 40 {
		replies = append(replies, fake.OpenAIReply{Respond: model.respond})
	}
	srv := fake.NewOpenAI(t, testKey, replies...)
	dir := t.TempDir()
	files := map[string]string{
		"agentrunner.yaml":   fmt.Sprintf(subagentConfig, srv.URL()),
		"lead.md":            "# Lead\n\nPlan, run sub-agents, answer.\n",
		"researcher.md":      "# Researcher\n\nResearch your task and answer with a SubagentResult.\n",
		"answer.md":          "# Answer\n\n## Body\n<!-- the answer -->\n",
		"result.json":        `{"summary": "what you found", "detail": "how"}` + "\n",
		"result.schema.json": `{"type": "object", "properties": {"summary": {"type": "string", "minLength": 1}, "detail": {"type": "string"}, "artifact_path": {"type": "string"}}, "required": ["summary"], "additionalProperties": false}`,
		"tools.md": "# Tools\n\n## subagent_run\nRuns a sub-agent.\n\n## parallel_tool_call\nRuns calls at once.\n\n" +
			"## todo_list_write\nWrites the plan.\n\n## filesystem_write\nWrites a report.\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "agentrunner.yaml")
	start := func() (*exec.Cmd, *syncbuf.Buffer) {
		var out syncbuf.Buffer
		cmd := exec.Command(binary, "run", "--once", "--pipeline", "research", "-c", cfg)
		cmd.Env = append(os.Environ(), "OPENAI_API_KEY="+testKey)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		return cmd, &out
	}

	// The first runner: killed once alpha's child ended and beta's and
	// gamma's researchers are answering.
	first, out := start()
	exited := make(chan error, 1)
	go func() { exited <- first.Wait() }()
	store := waitForStore(t, srv, filepath.Join(dir, "artifacts", "state.db"), exited, out)
	defer store.Close()
	ctx := context.Background()
	var lead *agentrunner.Run
	for deadline := time.Now().Add(60 * time.Second); ; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(deadline) {
			first.Process.Kill()
			t.Fatalf("the children did not get going:\n%s", out)
		}
		select {
		case err := <-exited:
			t.Fatalf("the first runner exited (%v) before it was killed:\n%s", err, out)
		default:
		}
		leads, err := store.Runs(ctx, agentrunner.RunFilter{Pipeline: "research"})
		if err != nil || len(leads) == 0 {
			continue
		}
		lead = leads[0]
		children, err := store.Runs(ctx, agentrunner.RunFilter{Parent: lead.ID})
		if err != nil || len(children) < 3 {
			continue
		}
		done := 0
		for _, c := range children {
			if c.Status == agentrunner.RunCompleted {
				done++
			}
		}
		asked := requestsByTask(srv)
		if done == 1 && asked["beta"] == 2 && asked["gamma"] == 2 {
			break
		}
	}
	first.Process.Signal(syscall.SIGKILL)
	<-exited
	t.Logf("first runner, killed while two sub-agents ran:\n%s", out)

	again, out := start()
	done := make(chan error, 1)
	go func() { done <- again.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("the second run --once: %v\n%s", err, out)
		}
	case <-time.After(90 * time.Second):
		again.Process.Kill()
		t.Fatalf("the second runner did not finish:\n%s", out)
	}

	lead, err := store.Run(ctx, lead.ID)
	if err != nil || lead.Status != agentrunner.RunCompleted {
		t.Fatalf("the lead's run: %+v, %v", lead, err)
	}
	children, err := store.Runs(ctx, agentrunner.RunFilter{Parent: lead.ID})
	if err != nil || len(children) != 3 {
		t.Fatalf("children of %s: %d, %v; want 3", lead.ID, len(children), err)
	}
	var latestStart, earliestEnd time.Time
	for _, c := range children {
		if c.Pipeline != "research-task" || c.Status != agentrunner.RunCompleted || c.Parent != lead.ID {
			t.Errorf("child %s: pipeline %s, status %s, parent %s", c.ID, c.Pipeline, c.Status, c.Parent)
		}
		if latestStart.IsZero() || c.StartedAt.After(latestStart) {
			latestStart = c.StartedAt
		}
		if earliestEnd.IsZero() || c.EndedAt.Before(earliestEnd) {
			earliestEnd = c.EndedAt
		}
	}
	// The three ran at once: each started before any ended.
	if !latestStart.Before(earliestEnd) {
		t.Errorf("the children did not overlap: the last started at %v, the first ended at %v", latestStart, earliestEnd)
	}
	// alpha ended before the kill and was not run again; beta and gamma
	// were killed asking for their answer, after their write turn was
	// checkpointed: the second runner resumed them from it, and asked
	// only for the answer again.
	asked := requestsByTask(srv)
	if asked["alpha"] != 2 || asked["beta"] != 3 || asked["gamma"] != 3 {
		t.Errorf("researcher requests by task: %v; want alpha 2, beta 3, gamma 3", asked)
	}
	// The reports are in the lead's run's memory/, none in the children's.
	for name := range subagentTasks {
		if b, err := os.ReadFile(filepath.Join(lead.Dir, "memory", name+".md")); err != nil || string(b) != reportOf(name) {
			t.Errorf("the lead's memory/%s.md: %q, %v", name, b, err)
		}
	}
	for _, c := range children {
		if _, err := os.Stat(filepath.Join(c.Dir, "memory")); err == nil {
			t.Errorf("child %s has a memory/ of its own", c.ID)
		}
	}
	// The lead read alpha's report, by the artifact_path it was given.
	model.mu.Lock()
	read := model.leadRead
	model.mu.Unlock()
	var tr struct {
		IsError bool
		Message string
	}
	if json.Unmarshal([]byte(read), &tr) != nil || tr.IsError || tr.Message != reportOf("alpha") {
		t.Errorf("the lead's filesystem_read of memory/alpha.md: %s; want the report", read)
	}
	// The batch's result: one {name, isError, message} per call, each
	// message a SubagentResult.
	model.mu.Lock()
	saw := model.leadSaw
	model.mu.Unlock()
	var got []string
	for _, r := range saw {
		var outer struct{ Message string }
		var batch []struct {
			Name    string
			IsError bool
			Message string
		}
		if json.Unmarshal([]byte(r), &outer) != nil || json.Unmarshal([]byte(outer.Message), &batch) != nil {
			t.Errorf("the lead's tool result is not a batch's: %s", r)
			continue
		}
		for _, b := range batch {
			got = append(got, fmt.Sprintf("%s %v %s", b.Name, b.IsError, b.Message))
		}
	}
	want := []string{
		`subagent_run false {"summary":"found alpha","detail":"the detail of alpha","artifact_path":"memory/alpha.md"}`,
		`subagent_run false {"summary":"found beta","detail":"the detail of beta","artifact_path":"memory/beta.md"}`,
		`subagent_run false {"summary":"found gamma","detail":"the detail of gamma","artifact_path":"memory/gamma.md"}`,
	}
	if !slices.Equal(got, want) {
		t.Errorf("the lead's conversation has the results\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// requestsByTask counts the requests of the researchers by task.
func requestsByTask(srv *fake.OpenAIServer) map[string]int {
	n := map[string]int{}
	for _, req := range srv.Requests() {
		system, _, _ := openAIRequest(req)
		if m := agentLine.FindStringSubmatch(system); m != nil && m[1] == "researcher" {
			n[researcherTask(req)]++
		}
	}
	return n
}

// waitForStore opens the store once the runner made it: once its lead
// asked the model.
func waitForStore(t *testing.T, srv *fake.OpenAIServer, path string, exited <-chan error, out *syncbuf.Buffer) *sqlite.Store {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
		select {
		case err := <-exited:
			t.Fatalf("the runner exited (%v):\n%s", err, out)
		default:
		}
		if len(srv.Requests()) == 0 {
			continue
		}
		store, err := sqlite.Open(context.Background(), path)
		if err == nil {
			return store
		}
	}
	t.Fatalf("no store at %s:\n%s", path, out)
	return nil
}

// TestSubagentRunsSurviveRepeatedKills: the runner of a lead run with
// three sub-agents is SIGKILLed at random moments (the seed is logged)
// at least 20 times while the run is unfinished, then left to finish.
// The run completes with one child per task; a child's researcher is
// asked again only for its attempts that were interrupted, so a child
// that finished is never run twice; and the lead's answer.md is valid.
func TestSubagentRunsSurviveRepeatedKills(t *testing.T) {
	const kills = 20
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 0))

	// While killing, the lead's last turn is slow, so the run cannot end
	// between two kills; the researchers answer quickly and finish, or
	// not, as the kills fall.
	var killing atomic.Bool
	killing.Store(true)
	model := &subagentModel{t: t, delay: map[string]time.Duration{"alpha": 60 * time.Millisecond, "beta": 150 * time.Millisecond, "gamma": 250 * time.Millisecond}}
	respond := func(req fake.OpenAIRequest) fake.OpenAIReply {
		reply := model.respond(req)
		system, _, results := openAIRequest(req)
		if m := agentLine.FindStringSubmatch(system); m != nil && m[1] == "lead" && len(results) == 2 && killing.Load() {
			reply.Delay = 10 * time.Second
		}
		return reply
	}
	var replies []fake.OpenAIReply
	for range 600 {
		replies = append(replies, fake.OpenAIReply{Respond: respond})
	}
	srv := fake.NewOpenAI(t, testKey, replies...)
	dir := t.TempDir()
	files := map[string]string{
		// Each kill interrupts the lead's attempt: more than the default
		// bound of interruptions of one step run.
		"agentrunner.yaml":   fmt.Sprintf(subagentConfig, srv.URL()) + "\nscheduler: {max_interruptions: 50}\n",
		"lead.md":            "# Lead\n\nPlan, run sub-agents, answer.\n",
		"researcher.md":      "# Researcher\n\nResearch your task and answer with a SubagentResult.\n",
		"answer.md":          "# Answer\n\n## Body\n<!-- the answer -->\n",
		"result.json":        `{"summary": "what you found", "detail": "how"}` + "\n",
		"result.schema.json": `{"type": "object", "properties": {"summary": {"type": "string", "minLength": 1}, "detail": {"type": "string"}, "artifact_path": {"type": "string"}}, "required": ["summary"], "additionalProperties": false}`,
		"tools.md": "# Tools\n\n## subagent_run\nRuns a sub-agent.\n\n## parallel_tool_call\nRuns calls at once.\n\n" +
			"## todo_list_write\nWrites the plan.\n\n## filesystem_write\nWrites a report.\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	cfg := filepath.Join(dir, "agentrunner.yaml")
	start := func() (*exec.Cmd, *syncbuf.Buffer, chan error) {
		var out syncbuf.Buffer
		cmd := exec.Command(binary, "run", "--once", "--pipeline", "research", "-c", cfg)
		cmd.Env = append(os.Environ(), "OPENAI_API_KEY="+testKey)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		go func() { exited <- cmd.Wait() }()
		return cmd, &out, exited
	}

	for i := range kills {
		cmd, out, exited := start()
		after := time.Duration(30+rng.IntN(570)) * time.Millisecond
		select {
		case err := <-exited:
			t.Fatalf("runner %d exited (%v) before its kill at %v:\n%s", i+1, err, after, out)
		case <-time.After(after):
		}
		cmd.Process.Signal(syscall.SIGKILL)
		<-exited
	}
	killing.Store(false)
	_, out, exited := start()
	select {
	case err := <-exited:
		if err != nil {
			t.Fatalf("the last run --once: %v\n%s", err, out)
		}
	case <-time.After(60 * time.Second):
		t.Fatalf("the last runner did not finish:\n%s", out)
	}

	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "artifacts", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	ctx := context.Background()
	leads, err := store.Runs(ctx, agentrunner.RunFilter{Pipeline: "research"})
	if err != nil || len(leads) != 1 || leads[0].Status != agentrunner.RunCompleted {
		t.Fatalf("the lead's runs: %d, %v; want one, completed", len(leads), err)
	}
	lead := leads[0]
	children, err := store.Runs(ctx, agentrunner.RunFilter{Parent: lead.ID})
	if err != nil {
		t.Fatal(err)
	}
	if all, _ := store.Runs(ctx, agentrunner.RunFilter{Pipeline: "research-task"}); len(all) != len(children) {
		t.Errorf("%d runs of research-task, %d of them children of the lead", len(all), len(children))
	}
	asked := requestsByTask(srv)
	byTask := map[string]int{}
	for _, c := range children {
		task, _ := c.Inputs["task"].(map[string]any)
		name, _ := task["task_name"].(string)
		byTask[name]++
		if c.Status != agentrunner.RunCompleted {
			t.Errorf("child %s (%s): %s", c.ID, name, c.Status)
		}
		atts, err := store.Attempts(ctx, c.ID)
		if err != nil {
			t.Fatal(err)
		}
		succeeded, interrupted := 0, 0
		var seen []string
		for _, a := range atts {
			seen = append(seen, fmt.Sprintf("%d:%s", a.Number, a.Status))
			if a.Status == agentrunner.AttemptSucceeded {
				succeeded++
			} else {
				interrupted++
			}
		}
		// The attempt that succeeded asked twice (its write, its answer);
		// each interrupted one at most twice.
		if succeeded != 1 || asked[name] < 2 || asked[name] > 2+2*interrupted {
			t.Errorf("child %s (%s): attempts %v, %d requests of its researcher; want one success, 2 requests and at most 2 per interrupted attempt", c.ID, name, seen, asked[name])
		}
		t.Logf("child %s (%s): attempts %v, %d requests", c.ID, name, seen, asked[name])
	}
	if want := map[string]int{"alpha": 1, "beta": 1, "gamma": 1}; !maps.Equal(byTask, want) {
		t.Errorf("children by task: %v; want one each", byTask)
	}
	// The lead's conversation is checkpointed after every turn: an
	// attempt after a kill resumes from its last completed turn, so the
	// model is asked for each of the lead's 3 turns once, and once more
	// at most for the turn each interrupted attempt was in.
	atts, err := store.Attempts(ctx, lead.ID)
	if err != nil {
		t.Fatal(err)
	}
	var seen []string
	interrupted := 0
	for _, a := range atts {
		seen = append(seen, fmt.Sprintf("%d:%s", a.Number, a.Status))
		if a.Status != agentrunner.AttemptSucceeded {
			interrupted++
		}
	}
	leadAsked := 0
	for _, req := range srv.Requests() {
		system, _, _ := openAIRequest(req)
		if m := agentLine.FindStringSubmatch(system); m != nil && m[1] == "lead" {
			leadAsked++
		}
	}
	if leadAsked < 3 || leadAsked > 3+interrupted {
		t.Errorf("the lead's model was asked %d times over attempts %v; want its 3 turns and at most one more per interrupted attempt (%d)", leadAsked, seen, interrupted)
	}
	t.Logf("lead %s: attempts %v, %d requests", lead.ID, seen, leadAsked)
	answer, err := os.ReadFile(filepath.Join(lead.Dir, "answer.md"))
	if err != nil || !strings.HasPrefix(string(answer), "# Answer\n\n## Body\n") || !strings.Contains(string(answer), "researched") {
		t.Errorf("the lead's answer.md: %q, %v", answer, err)
	}
	for name := range subagentTasks {
		if b, err := os.ReadFile(filepath.Join(lead.Dir, "memory", name+".md")); err != nil || string(b) != reportOf(name) {
			t.Errorf("the lead's memory/%s.md: %q, %v", name, b, err)
		}
	}
}
