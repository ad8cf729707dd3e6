package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/llm"
	"github.com/agentrunner/agentrunner/llm/fake"
	"github.com/agentrunner/agentrunner/runtime/mock"
	"github.com/agentrunner/agentrunner/sqlite"
)

const testKey = "sk-test-key-0123456789"

var (
	agentLine    = regexp.MustCompile(`You are the (\S+) agent, running step "[^"]+" of cycle (\S+) `)
	templateLine = regexp.MustCompile(`(?m)^Template: (\S+)$`)
)

// brain plays a model for a learning-loop agent: on its first turn it
// calls its tools (reading its template, and its domain tools); on its
// second it checks the results and answers with an output that satisfies
// the template.
type brain struct {
	t *testing.T
}

func (b brain) turn(system string, offered []string, results []string) ([]llm.ToolCall, string) {
	m := agentLine.FindStringSubmatch(system)
	tm := templateLine.FindStringSubmatch(system)
	if m == nil || tm == nil {
		b.t.Errorf("the system prompt does not say which agent, cycle and template:\n%.400s", system)
		return nil, "?"
	}
	agent, cycle, template := m[1], m[2], tm[1]
	if len(results) == 0 {
		calls := []llm.ToolCall{{ID: "read-1", Name: "filesystem_read", Arguments: json.RawMessage(fmt.Sprintf(`{"path":%q}`, template))}}
		if slices.Contains(offered, "technical_indicators") {
			calls = append(calls, llm.ToolCall{ID: "ti-1", Name: "technical_indicators", Arguments: json.RawMessage(`{"asset":"BTC","timeframe":"1d","indicators":["rsi","macd"]}`)})
		}
		if slices.Contains(offered, "current_position") {
			calls = append(calls, llm.ToolCall{ID: "pos-1", Name: "current_position", Arguments: json.RawMessage(`{}`)})
		}
		if slices.Contains(offered, "memory_append") {
			note := fmt.Sprintf(`{"text":"cycle %s: %s kept its levels; lesson %s-%s"}`, cycle, agent, agent, cycle)
			calls = append(calls, llm.ToolCall{ID: "mem-1", Name: "memory_append", Arguments: json.RawMessage(note)})
		}
		return calls, ""
	}
	for _, r := range results {
		var res agentrunner.ToolResult
		if err := json.Unmarshal([]byte(r), &res); err != nil || res.IsError {
			b.t.Errorf("%s got a failed tool result: %s", agent, r)
		}
	}
	tmpl, err := os.ReadFile(template)
	if err != nil {
		b.t.Errorf("read template: %v", err)
	}
	firstLine, _, _ := strings.Cut(string(tmpl), "\n")
	if !strings.Contains(strings.Join(results, "\n"), strings.ReplaceAll(firstLine, `"`, `\"`)) {
		b.t.Errorf("%s: filesystem_read did not return the template (its first line %q)", agent, firstLine)
	}
	return nil, string(mock.Generate(tmpl, filepath.Ext(template), cycle, agent, time.Now().UTC()))
}

// openAIRequest is what a turn of an OpenAI chat request says, in the
// order brain.turn takes it: the system prompt, the tools offered, and
// the results of the tools called so far.
func openAIRequest(req fake.OpenAIRequest) (system string, offered, results []string) {
	for _, m := range req.Messages {
		switch m.Role {
		case "system":
			system = m.Content
		case "tool":
			results = append(results, m.Content)
		}
	}
	for _, tl := range req.Tools {
		offered = append(offered, tl.Name)
	}
	return system, offered, results
}

// openAIReply is the brain's turn as an OpenAI reply.
func (b brain) openAIReply(req fake.OpenAIRequest) fake.OpenAIReply {
	calls, text := b.turn(openAIRequest(req))
	usage := llm.Usage{InputTokens: 1200, OutputTokens: 300, CachedTokens: 200}
	if len(calls) > 0 {
		return fake.OpenAIReply{ToolCalls: calls, FinishReason: "tool_calls", Usage: usage}
	}
	return fake.OpenAIReply{Text: text, FinishReason: "stop", Usage: usage}
}

// writeCandles writes daily BTC candles for the csv market-data provider.
func writeCandles(t *testing.T, dir string) {
	var b strings.Builder
	b.WriteString("open_time,open,high,low,close,volume\n")
	start := time.Now().UTC().Truncate(24*time.Hour).AddDate(0, 0, -300)
	price := 60000.0
	for i := 0; i < 300; i++ {
		open := price
		price *= 1 + 0.01*float64((i*7)%11-5)/5
		high, low := max(open, price)*1.01, min(open, price)*0.99
		fmt.Fprintf(&b, "%s,%.2f,%.2f,%.2f,%.2f,%d\n", start.AddDate(0, 0, i).Format(time.RFC3339), open, high, low, price, 1000+i*3)
	}
	if err := os.WriteFile(filepath.Join(dir, "BTC_1d.csv"), []byte(b.String()), 0o644); err != nil {
		t.Fatal(err)
	}
}

// modelWorkspace writes the example with every agent on the given provider
// pointed at baseURL ("": the provider keeps its default, the vendor's or
// OPENAI_BASE_URL's), with tools that work offline.
func modelWorkspace(t *testing.T, provider, baseURL string) string {
	dir := t.TempDir()
	if out, err := exec.Command(binary, "init", "--provider", provider, dir).CombinedOutput(); err != nil {
		t.Fatalf("init: %v\n%s", err, out)
	}
	data := filepath.Join(dir, "market-data")
	os.Mkdir(data, 0o755)
	writeCandles(t, data)
	cfgPath := filepath.Join(dir, "agentrunner.yaml")
	raw, _ := os.ReadFile(cfgPath)
	s := string(raw)
	edits := map[string]string{
		"tools: [web_search, web_fetch, bird, technical_indicators, memory_append, memory_search]": "tools: [technical_indicators, memory_append, memory_search]",
		"    provider: binance\n": "    provider: csv\n    data_dir: " + data + "\n",
	}
	if baseURL != "" {
		edits["    model: gpt-4.1\n"] = "    model: gpt-4.1\n    base_url: " + baseURL + "\n"
		edits["    model: claude-sonnet-4-5\n"] = "    model: claude-sonnet-4-5\n    base_url: " + baseURL + "\n"
	}
	for old, repl := range edits {
		if !strings.Contains(s, old) {
			t.Fatalf("the example has no %q to edit", old)
		}
		s = strings.ReplaceAll(s, old, repl)
	}
	os.WriteFile(cfgPath, []byte(s), 0o644)
	return cfgPath
}

// runModelCycle runs one cycle with the binary and checks what a model
// cycle must leave: a completed cycle, two turns and the tool calls per
// agent step, tool.call events, recorded exchanges without the key.
// keyEnv "" sets no key: the runner gets the test's environment as it is.
func runModelCycle(t *testing.T, cfgPath, keyEnv string, es *execsvc.Mock) {
	url, err := es.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	cmd := exec.Command(binary, "run", "--once", "-c", cfgPath)
	cmd.Env = append(os.Environ(), "AGENTRUNNER_EXECUTION_SERVICE_URL="+url, "AGENTRUNNER_EXECUTION_SERVICE_POLL_INTERVAL=20ms")
	if keyEnv != "" {
		cmd.Env = append(cmd.Env, keyEnv+"="+testKey)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run --once: %v\n%s", err, out)
	}
	dir := filepath.Dir(cfgPath)
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "artifacts", "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	cycles, _ := store.Cycles(context.Background(), agentrunner.CycleFilter{})
	if len(cycles) != 1 || cycles[0].Status != agentrunner.CycleCompleted {
		t.Fatalf("cycles: %+v\n%s", cycles, out)
	}
	atts, _ := store.Attempts(context.Background(), cycles[0].ID)
	for _, a := range atts {
		if a.Step == "execute" {
			continue
		}
		if a.Usage.Turns != 2 || a.Usage.ToolCalls < 2 || a.Usage.InputTokens == 0 || a.Usage.OutputTokens == 0 {
			t.Errorf("%s: usage %+v, want 2 turns, tool calls and tokens", a.Step, a.Usage)
		}
		if _, err := os.Stat(filepath.Join(a.Dir, "exchanges", "001-request.json")); err != nil {
			t.Errorf("%s: no recorded exchange: %v", a.Step, err)
		}
	}
	evs, _ := store.Events(context.Background(), agentrunner.EventFilter{})
	toolCalls := map[string]int{}
	for _, e := range evs {
		if e.Type == "tool.call" {
			toolCalls[e.Details["tool"].(string)]++
			if e.Details["is_error"] == true {
				t.Errorf("a tool call failed: %+v", e.Details)
			}
		}
	}
	if toolCalls["filesystem_read"] != 5 || toolCalls["technical_indicators"] != 3 || toolCalls["current_position"] != 3 || toolCalls["memory_append"] != 3 {
		t.Errorf("tool.call events per tool: %v, want filesystem_read 5, technical_indicators 3, current_position 3, memory_append 3", toolCalls)
	}
	filepath.WalkDir(filepath.Join(dir, "artifacts"), func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() && !strings.HasSuffix(path, ".db") && !strings.Contains(path, "state.db") {
			if data, _ := os.ReadFile(path); strings.Contains(string(data), testKey) {
				t.Errorf("%s contains the API key", path)
			}
		}
		return nil
	})
	if len(es.Strategies()) != 1 {
		t.Errorf("the Execution Service received %d strategies, want 1", len(es.Strategies()))
	}
}

func esWithAccount() *execsvc.Mock {
	return execsvc.NewMock(execsvc.MockOptions{CompletedAfter: 1})
}

// TestLearningLoopOnOpenAICompatibleServer runs a full cycle with every
// agent talking to a fake OpenAI-compatible server over HTTP, its tool
// calls executed by the runner and the results fed back.
func TestLearningLoopOnOpenAICompatibleServer(t *testing.T) {
	b := brain{t: t}
	srv := fake.NewOpenAI(t, testKey, func() []fake.OpenAIReply {
		var replies []fake.OpenAIReply
		for i := 0; i < 10; i++ {
			replies = append(replies, fake.OpenAIReply{Respond: func(req fake.OpenAIRequest) fake.OpenAIReply {
				return b.openAIReply(req)
			}})
		}
		return replies
	}()...)
	runModelCycle(t, modelWorkspace(t, "openai", srv.URL()), "OPENAI_API_KEY", esWithAccount())
	for _, req := range srv.Requests() {
		if got := req.Header.Get("Authorization"); got != "Bearer "+testKey {
			t.Errorf("Authorization %q", got)
		}
	}
}

// TestLearningLoopOnLocalServerWithoutKey: OPENAI_BASE_URL pointing at a
// local OpenAI-compatible server that takes no key (Ollama, llama.cpp) is
// enough: no OPENAI_API_KEY is demanded, and none is sent.
func TestLearningLoopOnLocalServerWithoutKey(t *testing.T) {
	b := brain{t: t}
	var replies []fake.OpenAIReply
	for range 10 {
		replies = append(replies, fake.OpenAIReply{Respond: b.openAIReply})
	}
	srv := fake.NewOpenAI(t, "", replies...)
	t.Setenv("OPENAI_API_KEY", "")
	t.Setenv("OPENAI_BASE_URL", srv.URL())
	cfgPath := modelWorkspace(t, "openai", "")
	if out, err := exec.Command(binary, "validate", "-c", cfgPath).CombinedOutput(); err != nil {
		t.Fatalf("validate: %v\n%s", err, out)
	}
	runModelCycle(t, cfgPath, "", esWithAccount())
	if len(srv.Requests()) == 0 {
		t.Fatal("the local server got no request")
	}
	for _, req := range srv.Requests() {
		if got := req.Header.Get("Authorization"); got != "" {
			t.Errorf("Authorization %q sent to a server configured without a key", got)
		}
	}
}

// TestLearningLoopOnAnthropicServer is the same cycle against a fake
// Anthropic Messages server.
func TestLearningLoopOnAnthropicServer(t *testing.T) {
	b := brain{t: t}
	var replies []fake.AnthropicReply
	for i := 0; i < 10; i++ {
		replies = append(replies, fake.AnthropicReply{Respond: func(req fake.AnthropicRequest) fake.AnthropicReply {
			var results []string
			for _, m := range req.Messages {
				for _, blk := range m.Content {
					if blk.Type == "tool_result" {
						results = append(results, blk.Content)
					}
				}
			}
			var offered []string
			for _, tl := range req.Tools {
				offered = append(offered, tl.Name)
			}
			calls, text := b.turn(req.System, offered, results)
			usage := llm.Usage{InputTokens: 1500, OutputTokens: 400, CachedTokens: 300}
			if len(calls) > 0 {
				return fake.AnthropicReply{ToolCalls: calls, StopReason: "tool_use", Usage: usage}
			}
			return fake.AnthropicReply{Text: text, StopReason: "end_turn", Usage: usage}
		}})
	}
	srv := fake.NewAnthropic(t, testKey, replies...)
	runModelCycle(t, modelWorkspace(t, "anthropic", srv.URL()), "ANTHROPIC_API_KEY", esWithAccount())
	for _, req := range srv.Requests() {
		if got := req.Header.Get("X-Api-Key"); got != testKey {
			t.Errorf("x-api-key %q", got)
		}
	}
}

// TestLearningLoopMemoryGrowsFromCycleToCycle runs two cycles on the fake
// OpenAI-compatible server: the plan agent appends to its memory in each,
// so plan/memory.md grows by an entry per cycle, and `agentrunner memory
// search` finds both.
func TestLearningLoopMemoryGrowsFromCycleToCycle(t *testing.T) {
	b := brain{t: t}
	respond := b.openAIReply
	var replies []fake.OpenAIReply
	for range 20 {
		replies = append(replies, fake.OpenAIReply{Respond: respond})
	}
	srv := fake.NewOpenAI(t, testKey, replies...)
	cfgPath := modelWorkspace(t, "openai", srv.URL())
	es := esWithAccount()
	url, err := es.Start("127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer es.Close()
	env := append(os.Environ(), "OPENAI_API_KEY="+testKey, "AGENTRUNNER_EXECUTION_SERVICE_URL="+url, "AGENTRUNNER_EXECUTION_SERVICE_POLL_INTERVAL=20ms")
	memPath := filepath.Join(filepath.Dir(cfgPath), "artifacts", "plan", "memory.md")
	var sizes []int
	for cycle := range 2 {
		cmd := exec.Command(binary, "run", "--once", "-c", cfgPath)
		cmd.Env = env
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("cycle %d: run --once: %v\n%s", cycle+1, err, out)
		}
		mem, err := os.ReadFile(memPath)
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(mem), "<!-- memory:"); n != cycle+1 {
			t.Errorf("after cycle %d, plan/memory.md has %d entries, want %d:\n%s", cycle+1, n, cycle+1, mem)
		}
		sizes = append(sizes, len(mem))
	}
	if sizes[1] <= sizes[0] {
		t.Errorf("plan/memory.md did not grow: %v bytes", sizes)
	}
	out, err := exec.Command(binary, "memory", "search", "lesson", "--agent", "plan", "-c", cfgPath).CombinedOutput()
	if err != nil || strings.Count(string(out), "«lesson»") != 2 {
		t.Errorf("memory search lesson --agent plan: %v\n%s\nwant both cycles' entries", err, out)
	}
}
