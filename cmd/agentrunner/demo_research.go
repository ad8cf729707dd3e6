package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	researchlead "github.com/agentrunner/agentrunner/examples/research-lead"
	"github.com/agentrunner/agentrunner/llm"
	"github.com/agentrunner/agentrunner/llm/fake"
	"github.com/agentrunner/agentrunner/scheduler"
	"github.com/agentrunner/agentrunner/todo"
	"github.com/agentrunner/agentrunner/workspace"
	"github.com/spf13/cobra"
)

// demoResearchQuery is the question the research-lead demo's lead answers.
const demoResearchQuery = "Which open-source vector databases scale past a billion vectors, and what does it take to run one?"

// demoResearchTask is one task the demo's lead gives a sub-agent, with
// what its researcher finds.
type demoResearchTask struct {
	name, title, prompt, finding string
}

var demoResearchTasks = []demoResearchTask{
	{"candidates", "Which open-source vector databases claim billion-vector scale?",
		"List the open-source vector databases that document deployments past one billion vectors, with the index types they use.",
		"Milvus, Qdrant and Vespa document billion-vector deployments; all three shard the index across nodes."},
	{"benchmarks", "What do public benchmarks show at a billion vectors?",
		"Find public benchmarks at or near one billion vectors: recall, queries per second and the hardware used.",
		"Published runs at 1B vectors report recall above 0.9 on multi-node clusters, or on one large machine with a disk-based index."},
	{"operations", "What does running one at that scale take?",
		"Find what operating a billion-vector deployment takes: memory per vector, disk-based indexes, replication and rebuild times.",
		"1B 768-dimension float32 vectors alone take about 3 TB; an in-memory index needs that much RAM and more, a disk-based one a fraction of it at some latency."},
}

// demoEnvKey is the variable the example's openai provider reads its key
// from.
const demoEnvKey = "OPENAI_API_KEY"

// demoResearchLead writes the research-lead example into dir and runs one
// run of its lead offline: a scripted model (researchBrain) plays the lead
// and its researchers over the OpenAI wire format, on a server on
// loopback. It prints the lead's to-do list as it changes, each
// sub-agent's start and end, and the answer's path.
func demoResearchLead(cmd *cobra.Command, dir string) error {
	out := cmd.OutOrStdout()
	if _, err := researchlead.Write(dir, true, "openai"); err != nil {
		return err
	}
	key, err := demoKey()
	if err != nil {
		return failureError(err)
	}
	srv, err := fake.StartOpenAI(key, researchBrain{}.respond)
	if err != nil {
		return failureError(fmt.Errorf("start the scripted model: %w", err))
	}
	defer srv.Close()
	// The demo's key, for this process only: a real key set in the
	// environment is never sent, not even to loopback.
	defer setEnvFor(demoEnvKey, key)()

	cfg, err := loadConfig(filepath.Join(dir, config.FileName))
	if err != nil {
		return err
	}
	cfg.Providers["openai"].BaseURL = srv.URL()
	for _, a := range cfg.Agents {
		a.Provider = "openai"
		// Offline there is no search: the scripted researchers do not
		// search, and web_search is not offered (it needs its key).
		a.Tools = slices.DeleteFunc(slices.Clone(a.Tools), func(t string) bool { return t == "web_search" })
	}
	ws, err := workspace.Load(cfg)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "demo workspace: %s (spec 4's lead and three sub-agents; a scripted model on the OpenAI wire format at %s, web_search left out)\n", dir, srv.URL())
	fmt.Fprintf(out, "query: %s\n", demoResearchQuery)
	p := &researchProgress{progress: progress{w: out}, children: map[string]string{}}
	log := cmdLogger(cmd, logText, slog.LevelWarn)
	r, err := openRunner(cmd.Context(), ws, agentrunner.SystemClock{}, log, p.onEvent)
	if err != nil {
		return err
	}
	defer r.Close()
	p.setStore(r.store)
	c, err := r.engine.RunPipelineOnce(cmd.Context(), "research", map[string]any{"query": demoResearchQuery})
	if err != nil {
		return failureError(err)
	}
	if err := report(out, r, c); err != nil {
		return err
	}
	fmt.Fprintf(out, "answer:    %s\n", filepath.Join(c.Dir, "answer.md"))
	fmt.Fprintf(out, "reports:   %s\n", filepath.Join(c.Dir, "memory"))
	fmt.Fprintf(out, "the scripted model answered %d request(s)\n", len(srv.Requests()))
	path := filepath.Join(dir, config.FileName)
	fmt.Fprintf(out, "next: agentrunner run-status %s -c %s; agentrunner todos %s --history -c %s\n", c.ID, path, c.ID, path)
	return nil
}

// demoKey is a fresh key for the scripted model.
func demoKey() (string, error) {
	b := make([]byte, 16)
	if _, err := rand.Read(b); err != nil {
		return "", err
	}
	return "sk-demo-" + hex.EncodeToString(b), nil
}

// setEnvFor sets a variable of the process and returns what puts it back.
func setEnvFor(name, value string) func() {
	old, had := os.LookupEnv(name)
	os.Setenv(name, value)
	return func() {
		if had {
			os.Setenv(name, old)
		} else {
			os.Unsetenv(name)
		}
	}
}

// researchStore is what researchProgress reads: the lead's to-do lists
// and the sub-agents' attempts.
type researchStore interface {
	TodoHistory(ctx context.Context, runID string) ([]*agentrunner.TodoList, error)
	Attempts(ctx context.Context, runID string) ([]*agentrunner.Attempt, error)
}

// researchProgress prints a lead's run as it happens: each version of its
// to-do list once written, each sub-agent's run as it starts and ends
// (its task, then its attempts, tokens and tool calls), and the steps'
// outcomes as progress does.
type researchProgress struct {
	progress progress

	mu    sync.Mutex
	store researchStore
	// todos counts the versions printed, by run.
	todos map[string]int
	// children are the sub-agents' runs seen starting: their task names.
	children map[string]string
}

func (p *researchProgress) setStore(s researchStore) {
	p.mu.Lock()
	p.store = s
	p.mu.Unlock()
}

func (p *researchProgress) onEvent(ev *agentrunner.Event) {
	d := ev.Details
	switch ev.Type {
	case agentrunner.EventToolCall:
		if d["tool"] == todo.ToolWrite && d["is_error"] != true {
			p.printTodos(ev.CycleID)
		}
	case scheduler.EventRunStarted:
		inputs, _ := d["inputs"].(map[string]any)
		p.mu.Lock()
		defer p.mu.Unlock()
		if task, ok := inputs["task"].(map[string]any); ok {
			p.children[ev.CycleID] = fmt.Sprint(task["task_name"])
			fmt.Fprintf(p.progress.w, "  sub-agent %s started: %s (tool budget %v)\n", ev.CycleID, task["task_name"], task["tool_budget"])
			return
		}
		fmt.Fprintf(p.progress.w, "run %s started (%s)\n", ev.CycleID, d["pipeline"])
	case scheduler.EventRunCompleted, scheduler.EventRunFailed, scheduler.EventRunAborted, scheduler.EventRunIncomplete:
		p.mu.Lock()
		defer p.mu.Unlock()
		name, child := p.children[ev.CycleID]
		verb := strings.TrimPrefix(ev.Type, "run.")
		if !child {
			fmt.Fprintf(p.progress.w, "run %s %s\n", ev.CycleID, verb)
			return
		}
		var u agentrunner.Usage
		attempts := 0
		if p.store != nil {
			atts, err := p.store.Attempts(context.Background(), ev.CycleID)
			if err != nil {
				fmt.Fprintf(p.progress.w, "  sub-agent %s %s: %s (its attempts: %v)\n", ev.CycleID, verb, name, err)
				return
			}
			for _, a := range atts {
				attempts++
				u.InputTokens += a.Usage.InputTokens
				u.OutputTokens += a.Usage.OutputTokens
				u.ToolCalls += a.Usage.ToolCalls
			}
		}
		fmt.Fprintf(p.progress.w, "  sub-agent %s %s: %s, %d attempt(s), %d/%d tokens in/out, %d tool call(s)\n",
			ev.CycleID, verb, name, attempts, u.InputTokens, u.OutputTokens, u.ToolCalls)
	default:
		p.progress.onEvent(ev)
	}
}

// printTodos prints the versions of run's to-do list not printed yet.
func (p *researchProgress) printTodos(run string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.store == nil {
		return
	}
	ls, err := p.store.TodoHistory(context.Background(), run)
	if err != nil {
		fmt.Fprintf(p.progress.w, "  (the to-do list of %s: %v)\n", run, err)
		return
	}
	if p.todos == nil {
		p.todos = map[string]int{}
	}
	for _, l := range ls {
		if l.Version <= p.todos[run] {
			continue
		}
		p.todos[run] = l.Version
		var b strings.Builder
		printTodos(&b, l)
		io.WriteString(p.progress.w, indent(b.String(), "  | "))
	}
}

// indent puts prefix before each line of s.
func indent(s, prefix string) string {
	lines := strings.SplitAfter(strings.TrimRight(s, "\n"), "\n")
	for i, l := range lines {
		lines[i] = prefix + l
	}
	return strings.Join(lines, "") + "\n"
}

var (
	// demoAgentLine names the agent in its system prompt.
	demoAgentLine = regexp.MustCompile(`You are the (\S+) agent, running step`)
	// demoTaskName is a sub-agent's task name in its run inputs.
	demoTaskName = regexp.MustCompile(`"task_name":"([^"]+)"`)
)

// researchBrain plays the example's two roles deterministically, reading
// the role from the system prompt and its turn from the conversation.
// The lead writes three to-dos, runs three sub-agents in one
// parallel_tool_call, reads their reports and updates the to-dos, then
// answers answer.md from its template; a researcher writes a report on its
// task with filesystem_write, then answers a SubagentResult naming it.
type researchBrain struct{}

func (b researchBrain) respond(req fake.OpenAIRequest) fake.OpenAIReply {
	var system string
	turns := 0
	results := map[string]string{} // by tool call id
	for _, m := range req.Messages {
		switch m.Role {
		case "system":
			system = m.Content
		case "assistant":
			turns++
		case "tool":
			results[m.ToolCallID] = m.Content
		}
	}
	m := demoAgentLine.FindStringSubmatch(system)
	if m == nil {
		return fake.OpenAIReply{Status: 400, ErrorBody: `{"error":{"message":"the scripted model cannot tell the agent from the system prompt","type":"invalid_request_error"}}`}
	}
	switch m[1] {
	case "lead":
		return b.lead(turns, results)
	case "researcher":
		return b.researcher(req, turns)
	}
	return fake.OpenAIReply{Text: "The scripted model plays only the lead and the researcher, not " + m[1] + "."}
}

// demoCall is a tool call with its arguments as JSON.
func demoCall(id, name string, args any) llm.ToolCall {
	data, _ := json.Marshal(args)
	return llm.ToolCall{ID: id, Name: name, Arguments: data}
}

// toolMessage is the message of a tool's {isError, message} result.
func toolMessage(result string) (string, bool) {
	var r struct {
		IsError bool   `json:"isError"`
		Message string `json:"message"`
	}
	if json.Unmarshal([]byte(result), &r) != nil {
		return result, false
	}
	return r.Message, !r.IsError
}

func (researchBrain) lead(turns int, results map[string]string) fake.OpenAIReply {
	usage := llm.Usage{InputTokens: 1800 + 700*turns, OutputTokens: 260}
	todos := func(status, note string) []map[string]any {
		var ts []map[string]any
		for i, t := range demoResearchTasks {
			item := map[string]any{"id": fmt.Sprintf("t%d", i+1), "title": t.title, "status": status}
			if note != "" {
				item["note"] = note + t.name + ".md"
			}
			ts = append(ts, item)
		}
		return ts
	}
	switch turns {
	case 0:
		return fake.OpenAIReply{ToolCalls: []llm.ToolCall{demoCall("todo-1", todo.ToolWrite, map[string]any{"todos": todos("pending", "")})}, Usage: usage}
	case 1:
		var calls []map[string]any
		for _, t := range demoResearchTasks {
			calls = append(calls, map[string]any{"name": "subagent_run", "arguments": map[string]any{"task": map[string]any{
				"task_name": t.name, "prompt": t.prompt + " Context: " + demoResearchQuery + " Write your report to memory/" + t.name + ".md.",
				"description": t.title, "tool_budget": 6, "expected_output": "a short report with sources, and a SubagentResult naming it",
			}}})
		}
		return fake.OpenAIReply{ToolCalls: []llm.ToolCall{demoCall("batch-1", "parallel_tool_call", map[string]any{"calls": calls})}, Usage: usage}
	case 2:
		var calls []llm.ToolCall
		for i, path := range batchPaths(results["batch-1"]) {
			calls = append(calls, demoCall(fmt.Sprintf("read-%d", i+1), "filesystem_read", map[string]any{"path": path}))
		}
		version := 0
		if msg, ok := toolMessage(results["todo-1"]); ok {
			var v struct{ Version int }
			json.Unmarshal([]byte(msg), &v)
			version = v.Version
		}
		calls = append(calls, demoCall("todo-2", todo.ToolWrite, map[string]any{"todos": todos("done", "answered: memory/"), "version": version}))
		return fake.OpenAIReply{ToolCalls: calls, Usage: usage}
	}
	var reports []string
	for i := 1; ; i++ {
		r, ok := results[fmt.Sprintf("read-%d", i)]
		if !ok {
			break
		}
		if msg, ok := toolMessage(r); ok {
			reports = append(reports, msg)
		}
	}
	return fake.OpenAIReply{Text: demoAnswer(reports), Usage: usage}
}

// batchPaths are the artifact_paths of the SubagentResults in a
// parallel_tool_call's result.
func batchPaths(result string) []string {
	msg, _ := toolMessage(result)
	var batch []struct {
		IsError bool   `json:"isError"`
		Message string `json:"message"`
	}
	json.Unmarshal([]byte(msg), &batch)
	var paths []string
	for _, b := range batch {
		var r struct {
			ArtifactPath string `json:"artifact_path"`
		}
		if !b.IsError && json.Unmarshal([]byte(b.Message), &r) == nil && r.ArtifactPath != "" {
			paths = append(paths, r.ArtifactPath)
		}
	}
	return paths
}

// demoAnswer is the lead's answer.md, in its template's sections, from the
// reports it read.
func demoAnswer(reports []string) string {
	var b strings.Builder
	b.WriteString("# Research Answer\n\n## Answer\n\n")
	b.WriteString("Several open-source vector databases scale past a billion vectors when the index is sharded across nodes. " +
		"At that size the choice is less about the engine than about memory: an in-memory index needs terabytes of RAM, " +
		"a disk-based one a fraction of it at some latency. (This answer was written by the demo's scripted model.)\n\n## Key Findings\n\n")
	for _, t := range demoResearchTasks {
		fmt.Fprintf(&b, "- %s (memory/%s.md)\n", t.finding, t.name)
	}
	b.WriteString("\n## Evidence\n\n")
	fmt.Fprintf(&b, "The lead read %d report(s) its sub-agents wrote:\n\n", len(reports))
	for _, r := range reports {
		first, _, _ := strings.Cut(strings.TrimSpace(r), "\n")
		fmt.Fprintf(&b, "- %s: %s\n", strings.TrimPrefix(first, "# "), reportFinding(r))
	}
	b.WriteString("\n## Open Questions\n\n- Costs on managed offerings were not researched; a follow-up task would compare them.\n\n## Sources\n\n")
	for _, t := range demoResearchTasks {
		fmt.Fprintf(&b, "- memory/%s.md (the demo's sub-agents cite no web sources: they run offline)\n", t.name)
	}
	return b.String()
}

// reportFinding is the finding line of a report the researcher wrote.
func reportFinding(report string) string {
	for _, l := range strings.Split(report, "\n") {
		if f, ok := strings.CutPrefix(l, "Finding: "); ok {
			return f
		}
	}
	return "no finding"
}

func (researchBrain) researcher(req fake.OpenAIRequest, turns int) fake.OpenAIReply {
	usage := llm.Usage{InputTokens: 900 + 500*turns, OutputTokens: 320}
	var task *demoResearchTask
	for _, m := range req.Messages {
		if sm := demoTaskName.FindStringSubmatch(m.Content); sm != nil {
			for i := range demoResearchTasks {
				if demoResearchTasks[i].name == sm[1] {
					task = &demoResearchTasks[i]
				}
			}
		}
	}
	if task == nil {
		return fake.OpenAIReply{Text: `{"summary": "the scripted model found no task it knows in the run's inputs"}`, Usage: usage}
	}
	path := "memory/" + task.name + ".md"
	if turns == 0 {
		report := fmt.Sprintf("# %s\n\n%s\n\nFinding: %s\n\nSources: none (the demo runs offline).\n", task.title, task.prompt, task.finding)
		// A little time, so the three sub-agents are seen running at once.
		return fake.OpenAIReply{ToolCalls: []llm.ToolCall{demoCall("write-1", "filesystem_write", map[string]any{"path": path, "content": report})},
			Usage: usage, Delay: 150 * time.Millisecond}
	}
	out, _ := json.Marshal(map[string]any{"summary": task.finding, "detail": "From the task's report; the demo's researcher does not search.", "artifact_path": path})
	return fake.OpenAIReply{Text: string(out), Usage: usage}
}
