package model

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/examples/crypton"
	"github.com/agentrunner/agentrunner/internal/mailboxtest"
	"github.com/agentrunner/agentrunner/llm"
	"github.com/agentrunner/agentrunner/llm/fake"
	"github.com/agentrunner/agentrunner/llm/openai"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/runtime/mock"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/agentrunner/agentrunner/step/agent"
	"github.com/agentrunner/agentrunner/tool"
	"github.com/agentrunner/agentrunner/tool/fstool"
	"github.com/agentrunner/agentrunner/workspace"
	"github.com/google/go-cmp/cmp"
)

// scripted is an llm.Model that answers from a script and records requests.
type scripted struct {
	mu       sync.Mutex
	replies  []func(req *llm.Request) (*llm.Response, error)
	requests []*llm.Request
}

func (s *scripted) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	copied := *req
	copied.Messages = append([]llm.Message(nil), req.Messages...)
	s.requests = append(s.requests, &copied)
	if len(s.replies) == 0 {
		return nil, agentrunner.Fail(agentrunner.ClassUnavailable, "script ran out")
	}
	next := s.replies[0]
	s.replies = s.replies[1:]
	return next(req)
}

func answer(text string) func(*llm.Request) (*llm.Response, error) {
	return func(*llm.Request) (*llm.Response, error) {
		return &llm.Response{Text: text, StopReason: llm.StopEnd, Usage: llm.Usage{InputTokens: 100, OutputTokens: 50}}, nil
	}
}

func calls(cs ...llm.ToolCall) func(*llm.Request) (*llm.Response, error) {
	return func(*llm.Request) (*llm.Response, error) {
		return &llm.Response{ToolCalls: cs, StopReason: llm.StopToolUse, Usage: llm.Usage{InputTokens: 80, OutputTokens: 20, CachedTokens: 40}}, nil
	}
}

type env struct {
	exec  *tool.Executor
	inv   *agentrunner.Invocation
	valid string
}

// setup loads the example, puts the research agent on a model provider and
// returns an invocation of it with a registry holding one slow test tool.
func setup(t testing.TB, edit func(*config.Agent)) *env {
	t.Helper()
	dir := t.TempDir()
	if _, err := crypton.Write(dir, true, "openai"); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(filepath.Join(dir, config.FileName))
	if err != nil {
		t.Fatal(err)
	}
	if edit != nil {
		edit(cfg.Agents["research"])
	}
	ws, err := workspace.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	reg := tool.NewRegistry()
	err = reg.Register(tool.Spec{Name: "sleepy", Description: "sleeps", Parameters: []byte(`{"type":"object","properties":{"ms":{"type":"integer"}},"required":["ms"]}`), Timeout: 5 * time.Second},
		tool.HandlerFunc(func(ctx context.Context, args json.RawMessage) (string, error) {
			var a struct{ MS int }
			json.Unmarshal(args, &a)
			time.Sleep(time.Duration(a.MS) * time.Millisecond)
			return fmt.Sprintf("slept %dms", a.MS), nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	attempt := t.TempDir()
	plan := filepath.Join(t.TempDir(), "plan.md")
	os.WriteFile(plan, []byte("# Plan\n\nthe plan of this cycle\n"), 0o644)
	research := ws.Agents["research"]
	inv := &agentrunner.Invocation{
		CycleID: "20261122_140000", Step: "research", Agent: "research", Attempt: 1, Prompt: "you are the research agent",
		Dir: attempt, OutputPath: filepath.Join(attempt, "research.md"), MailboxPath: filepath.Join(t.TempDir(), "mailbox.research"),
		Inputs: []agentrunner.Input{{Name: "plan", Path: plan}}, TemplatePath: research.TemplatePath, Tools: []string{"sleepy"},
		Output: agent.Contract(research), Model: agent.ModelSettings(research.Agent),
	}
	tmpl, _ := os.ReadFile(research.TemplatePath)
	return &env{exec: tool.NewExecutor(reg, tool.Options{}), inv: inv,
		valid: string(mock.Generate(tmpl, ".md", inv.CycleID, "research", time.Now()))}
}

func TestToolCallsRunConcurrentlyAndResultsGoBack(t *testing.T) {
	e := setup(t, nil)
	m := &scripted{replies: []func(*llm.Request) (*llm.Response, error){
		calls(
			llm.ToolCall{ID: "c1", Name: "sleepy", Arguments: json.RawMessage(`{"ms":200}`)},
			llm.ToolCall{ID: "c2", Name: "sleepy", Arguments: json.RawMessage(`{"ms":200}`)},
			llm.ToolCall{ID: "c3", Name: "sleepy", Arguments: json.RawMessage(`{"ms":200}`)},
			llm.ToolCall{ID: "c4", Name: "sleepy", Arguments: json.RawMessage(`{"ms":200}`)},
			llm.ToolCall{ID: "c5", Name: "sleepy", Arguments: json.RawMessage(`{"ms":200}`)},
			llm.ToolCall{ID: "c6", Name: "filesystem_read", Arguments: json.RawMessage(`{"path":"plan.md"}`)},
			llm.ToolCall{ID: "c7", Name: "no_such_tool", Arguments: json.RawMessage(`{}`)},
			llm.ToolCall{ID: "c8", Name: "sleepy", Arguments: json.RawMessage(`{"ms":"soon"}`)},
			llm.ToolCall{ID: "c9", Name: "sleepy", Arguments: json.RawMessage(`{not json`)},
		),
		answer("```markdown\n" + e.valid + "```"),
	}}
	start := time.Now()
	res, err := New(m, e.exec).Run(context.Background(), e.inv)
	if err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed > 800*time.Millisecond {
		t.Errorf("5 calls of 200ms took %v: they did not run concurrently", elapsed)
	}
	results := m.requests[1].Messages[2].ToolResults
	if len(results) != 9 {
		t.Fatalf("%d tool results, want 9", len(results))
	}
	byID := map[string]agentrunner.ToolResult{}
	for _, r := range results {
		var tr agentrunner.ToolResult
		if err := json.Unmarshal([]byte(r.Content), &tr); err != nil {
			t.Fatalf("result %s is not {isError, message}: %v", r.CallID, err)
		}
		if tr.IsError != r.IsError {
			t.Errorf("%s: IsError flag differs from the content", r.CallID)
		}
		byID[r.CallID] = tr
	}
	for id, want := range map[string]string{"c1": "slept 200ms", "c6": "the plan of this cycle", "c7": "unknown tool", "c8": "/ms", "c9": "JSON"} {
		if !strings.Contains(byID[id].Message, want) {
			t.Errorf("%s: %q lacks %q", id, byID[id].Message, want)
		}
	}
	if byID["c1"].IsError || !byID["c7"].IsError || !byID["c8"].IsError || !byID["c9"].IsError {
		t.Errorf("error flags wrong: %+v", byID)
	}
	if string(res.Output) != e.valid {
		t.Errorf("the output is not the answer without its fence:\n%s", res.Output)
	}
	if _, err := os.Stat(e.inv.OutputPath); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the answer was written to %s (%v): a model agent returns it", e.inv.OutputPath, err)
	}
	want := agentrunner.Usage{InputTokens: 180, OutputTokens: 70, CachedTokens: 40, Turns: 2, ToolCalls: 9}
	if res.Usage != want {
		t.Errorf("usage = %+v, want %+v", res.Usage, want)
	}
	// The model is offered its tools and the file tools.
	var offered []string
	for _, s := range m.requests[0].Tools {
		offered = append(offered, s.Name)
	}
	if strings.Join(offered, ",") != "filesystem_read,filesystem_tree,sleepy" {
		t.Errorf("offered tools %v", offered)
	}
}

func TestRepairTurnsThenFailure(t *testing.T) {
	e := setup(t, nil) // repair_turns defaults to 1
	m := &scripted{replies: []func(*llm.Request) (*llm.Response, error){answer("not a report"), answer(e.valid)}}
	res, err := New(m, e.exec).Run(context.Background(), e.inv)
	if err != nil {
		t.Fatal(err)
	}
	repair := m.requests[1].Messages[2].Text
	if !strings.Contains(repair, "breaks the contract of research.md") || !strings.Contains(repair, "missing section") {
		t.Errorf("the repair message does not list the problems:\n%s", repair)
	}
	if string(res.Output) != e.valid {
		t.Error("the repaired answer was not returned")
	}

	e = setup(t, nil)
	m = &scripted{replies: []func(*llm.Request) (*llm.Response, error){answer("bad"), answer("still bad")}}
	res, err = New(m, e.exec).Run(context.Background(), e.inv)
	if err != nil {
		t.Fatal(err) // the engine rejects the invalid output it returns
	}
	if string(res.Output) != "still bad\n" || len(m.requests) != 2 {
		t.Errorf("after the repair turns: output %q, %d requests; want the last answer and 2 requests", res.Output, len(m.requests))
	}
}

// TestContractAndModelComeWithTheInvocation: one runtime, two
// invocations of the same agent with different contracts and model
// settings (as after a reload): each answer is checked against its own
// invocation's contract, and each request carries its own model settings.
func TestContractAndModelComeWithTheInvocation(t *testing.T) {
	e := setup(t, nil)
	stricter := filepath.Join(t.TempDir(), "research.md")
	tmpl, _ := os.ReadFile(e.inv.TemplatePath)
	os.WriteFile(stricter, append(tmpl, "\n## Risks\n\n{{risks}}\n"...), 0o644)
	c, err := artifact.Load(stricter, "")
	if err != nil {
		t.Fatal(err)
	}
	reloaded := *e.inv
	reloaded.Dir = t.TempDir()
	reloaded.OutputPath = filepath.Join(reloaded.Dir, "research.md")
	reloaded.TemplatePath = stricter
	reloaded.Output = agent.Contract(&workspace.Agent{Agent: &config.Agent{Output: config.Output{File: "research.md"}}, Contract: c})
	hot := 0.9
	reloaded.Model = agentrunner.ModelSettings{Name: "reloaded-model", Temperature: &hot, MaxTokens: 777, MaxTurns: 5, RepairTurns: 1}

	m := &scripted{replies: []func(*llm.Request) (*llm.Response, error){answer(e.valid), answer(e.valid), answer(e.valid)}}
	rt := New(m, e.exec)
	for _, inv := range []*agentrunner.Invocation{e.inv, &reloaded} {
		if _, err := rt.Run(context.Background(), inv); err != nil {
			t.Fatal(err)
		}
	}
	type request struct {
		Model     string
		MaxTokens int
		Repair    bool
	}
	var got []request
	for _, r := range m.requests {
		last := r.Messages[len(r.Messages)-1].Text
		got = append(got, request{r.Model, r.MaxTokens, strings.Contains(last, "breaks the contract") && strings.Contains(last, "Risks")})
	}
	first := e.inv.Model
	want := []request{
		{first.Name, first.MaxTokens, false}, // valid under the first contract
		{"reloaded-model", 777, false},       // the same answer, under the stricter one
		{"reloaded-model", 777, true},        // is sent back for its missing Risks section
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("requests (-want +got):\n%s", diff)
	}
	if t0 := m.requests[1].Temperature; t0 == nil || *t0 != hot {
		t.Errorf("temperature %v, want the invocation's %v", t0, hot)
	}
}

func TestMaxTurnsAndBudgets(t *testing.T) {
	loop := func(n int) []func(*llm.Request) (*llm.Response, error) {
		var rs []func(*llm.Request) (*llm.Response, error)
		for i := 0; i < n; i++ {
			rs = append(rs, calls(llm.ToolCall{ID: fmt.Sprint(i), Name: "sleepy", Arguments: json.RawMessage(`{"ms":0}`)}))
		}
		return rs
	}
	e := setup(t, func(a *config.Agent) { a.MaxTurns = 3 })
	_, err := New(&scripted{replies: loop(10)}, e.exec).Run(context.Background(), e.inv)
	if agentrunner.ClassOf(err) != agentrunner.ClassInvalidOutput || !strings.Contains(err.Error(), "max_turns (3)") {
		t.Errorf("max turns: %v", err)
	}

	e = setup(t, nil)
	e.inv.TokenBudget = agentrunner.TokenBudget{Limit: 250, Source: "the token_budget of agent research"}
	res, err := New(&scripted{replies: loop(10)}, e.exec).Run(context.Background(), e.inv)
	if agentrunner.ClassOf(err) != agentrunner.ClassBudget || agentrunner.ClassBudget.Retryable() {
		t.Fatalf("budget: %v, want a non-retryable budget error", err)
	}
	if !strings.Contains(err.Error(), "300 tokens used, the token_budget of agent research allows 250") || res.Usage.Turns != 3 {
		t.Errorf("budget error %q after %d turns", err, res.Usage.Turns)
	}
}

func TestInlineInputsAndRecording(t *testing.T) {
	e := setup(t, func(a *config.Agent) { a.InlineInputs = true })
	m := &scripted{replies: []func(*llm.Request) (*llm.Response, error){answer(e.valid)}}
	if _, err := New(m, e.exec, "sk-secret").Run(context.Background(), e.inv); err != nil {
		t.Fatal(err)
	}
	for _, s := range m.requests[0].Tools {
		if strings.HasPrefix(s.Name, "filesystem_") {
			t.Errorf("inline_inputs still offers %s", s.Name)
		}
	}
	if _, err := os.Stat(filepath.Join(e.inv.Dir, RecordingDir)); err != nil {
		t.Errorf("no recording folder: %v", err)
	}
}

func TestProviderErrorsPassThrough(t *testing.T) {
	e := setup(t, nil)
	m := &scripted{replies: []func(*llm.Request) (*llm.Response, error){func(*llm.Request) (*llm.Response, error) {
		return nil, agentrunner.Fail(agentrunner.ClassUnavailable, "HTTP 503")
	}}}
	_, err := New(m, e.exec).Run(context.Background(), e.inv)
	if agentrunner.ClassOf(err) != agentrunner.ClassUnavailable {
		t.Errorf("err = %v, want the provider's retryable class", err)
	}
}

func TestUnknownAllowedToolIsAConfigError(t *testing.T) {
	e := setup(t, nil)
	e.inv.Tools = []string{"sleepy", "missing_tool"}
	_, err := New(&scripted{}, e.exec).Run(context.Background(), e.inv)
	if agentrunner.ClassOf(err) != agentrunner.ClassConfig || !strings.Contains(err.Error(), "missing_tool") {
		t.Errorf("err = %v, want a config error naming the tool", err)
	}
}

// TestInjectedMessageReachesTheNextTurn: an operator's message put into the
// mailbox while the model works is given to it at its next turn, once;
// messages that were there before it started are not repeated.
func TestInjectedMessageReachesTheNextTurn(t *testing.T) {
	e := setup(t, nil)
	dir, file := filepath.Split(e.inv.MailboxPath)
	boxes, err := mailbox.New(dir, 5)
	if err != nil {
		t.Fatal(err)
	}
	agent := strings.TrimPrefix(file, "mailbox.")
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	deposit := func(id, body string) {
		t.Helper()
		mailboxtest.Deposit(t, store, boxes, agent, mailbox.Message{ID: id, Time: time.Date(2026, 11, 22, 14, 5, 0, 0, time.UTC), From: "operator:alice", Kind: mailbox.Inject, Body: body})
	}
	deposit("inject-1", "an old note")
	sleep := calls(llm.ToolCall{ID: "c1", Name: "sleepy", Arguments: json.RawMessage(`{"ms":1}`)})
	m := &scripted{replies: []func(*llm.Request) (*llm.Response, error){
		func(req *llm.Request) (*llm.Response, error) {
			deposit("inject-2", "Stop researching memecoins.")
			return sleep(req)
		},
		sleep,
		answer(e.valid),
	}}
	if _, err := New(m, e.exec).Run(context.Background(), e.inv); err != nil {
		t.Fatal(err)
	}
	second := m.requests[1].Messages[2]
	if len(second.ToolResults) != 1 || !strings.Contains(second.Text, "A message from the operator (operator:alice, 2026-11-22T14:05:00Z) arrived while you work:\nStop researching memecoins.") {
		t.Fatalf("the second turn's user message: %+v", second)
	}
	for i, r := range m.requests {
		for _, msg := range r.Messages {
			if strings.Contains(msg.Text, "an old note") {
				t.Errorf("request %d repeats a message the agent could read in its mailbox", i)
			}
		}
	}
	if third := m.requests[2].Messages[4]; strings.Contains(third.Text, "memecoins") {
		t.Error("the operator's message was given twice")
	}
}

// TestInjectedMessageCommittedReachesTheNextTurnOverHTTP: an operator's
// message committed to the store while the model works, its mailbox's
// file not written yet (the engine writes it in the background), is in
// the request of the model's second turn, sent to an OpenAI-compatible
// server over HTTP.
func TestInjectedMessageCommittedReachesTheNextTurnOverHTTP(t *testing.T) {
	e := setup(t, nil)
	boxes, err := mailbox.New(filepath.Dir(e.inv.MailboxPath), 5)
	if err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	e.inv.Mail = store
	const note = "Stop researching memecoins."
	srv := fake.NewOpenAI(t, "sk-test", fake.OpenAIReply{Respond: func(fake.OpenAIRequest) fake.OpenAIReply {
		d, err := boxes.Deposit("research", mailbox.Message{ID: "inject-7", Time: time.Date(2026, 11, 22, 14, 5, 0, 0, time.UTC), From: "operator:alice", Kind: mailbox.Inject, Body: note})
		if err == nil {
			err = store.Apply(context.Background(), &agentrunner.Change{Mail: []*agentrunner.MailDeposit{d}})
		}
		if err != nil {
			t.Error(err)
		}
		return fake.OpenAIReply{ToolCalls: []llm.ToolCall{{ID: "c1", Name: "sleepy", Arguments: json.RawMessage(`{"ms":1}`)}}}
	}}, fake.OpenAIReply{Text: e.valid})
	m, err := openai.New(openai.Config{BaseURL: srv.URL(), APIKey: "sk-test"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(m, e.exec).Run(context.Background(), e.inv); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(e.inv.MailboxPath); !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("the mailbox's file was written (%v): the test would not show the store is read", err)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	var found int
	for _, msg := range reqs[1].Messages {
		if msg.Role != "system" && strings.Contains(msg.Content, "A message from the operator (operator:alice, 2026-11-22T14:05:00Z) arrived while you work:\n"+note) {
			found++
		}
	}
	if found != 1 {
		t.Errorf("the second turn carries the injected message %d times, want once; its messages: %+v", found, reqs[1].Messages)
	}
}

func TestAToolBudgetSpentLeavesOneTurnToAnswer(t *testing.T) {
	sleepy := func(id string) llm.ToolCall {
		return llm.ToolCall{ID: id, Name: "sleepy", Arguments: json.RawMessage(`{"ms":0}`)}
	}
	e := setup(t, func(a *config.Agent) { a.ToolBudget = 2 })
	model := &scripted{replies: []func(*llm.Request) (*llm.Response, error){calls(sleepy("a"), sleepy("b"), sleepy("c")), answer(e.valid)}}
	res, err := New(model, e.exec).Run(context.Background(), e.inv)
	if err != nil || string(res.Output) != e.valid {
		t.Fatalf("run: %v; output %q", err, res.Output)
	}
	last := model.requests[1]
	if len(last.Tools) != 0 {
		t.Errorf("the last turn offered %d tools, want none", len(last.Tools))
	}
	turn := last.Messages[len(last.Messages)-1]
	if !strings.Contains(turn.Text, "tool budget of 2 calls is spent") || len(turn.ToolResults) != 3 {
		t.Fatalf("the message after the budget: %q with %d results", turn.Text, len(turn.ToolResults))
	}
	for i, want := range []bool{false, false, true} {
		if r := turn.ToolResults[i]; r.IsError != want || (want && !strings.Contains(r.Content, "not run")) {
			t.Errorf("result %d: %+v, want isError %v", i, r, want)
		}
	}

	e = setup(t, func(a *config.Agent) { a.ToolBudget = 1 })
	model = &scripted{replies: []func(*llm.Request) (*llm.Response, error){calls(sleepy("a")), calls(sleepy("b"))}}
	_, err = New(model, e.exec).Run(context.Background(), e.inv)
	if agentrunner.ClassOf(err) != agentrunner.ClassBudget || !strings.Contains(err.Error(), "tool budget (1 calls)") {
		t.Errorf("calls after the budget, in the last turn: %v, want a budget error", err)
	}
}

func TestTheLastTurnUnderMaxTurnsIsForTheAnswer(t *testing.T) {
	e := setup(t, func(a *config.Agent) { a.MaxTurns = 2 })
	model := &scripted{replies: []func(*llm.Request) (*llm.Response, error){
		calls(llm.ToolCall{ID: "a", Name: "sleepy", Arguments: json.RawMessage(`{"ms":0}`)}), answer(e.valid),
	}}
	res, err := New(model, e.exec).Run(context.Background(), e.inv)
	if err != nil || string(res.Output) != e.valid {
		t.Fatalf("run: %v; output %q", err, res.Output)
	}
	last := model.requests[1]
	if len(model.requests[0].Tools) == 0 || len(last.Tools) != 0 {
		t.Errorf("tools offered: %d in the first turn, %d in the last; want some, then none", len(model.requests[0].Tools), len(last.Tools))
	}
	if msg := last.Messages[len(last.Messages)-1]; !strings.Contains(msg.Text, "This is your last turn (max_turns 2)") {
		t.Errorf("the last turn's message: %q", msg.Text)
	}
}

// TestASubAgentWritesWhereItsLeadReads: a sub-agent's filesystem_write
// writes under memory/ of the run its invocation names (the lead's), not
// its own; the lead's filesystem_tree and filesystem_read reach the
// report there, written after its tools were made, by memory/….
func TestASubAgentWritesWhereItsLeadReads(t *testing.T) {
	e := setup(t, nil)
	reg := tool.NewRegistry()
	spec, h, err := fstool.NewWrite(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(spec, h); err != nil {
		t.Fatal(err)
	}
	exec := tool.NewExecutor(reg, tool.Options{})
	runs := t.TempDir()
	leadDir, childDir := filepath.Join(runs, "lead"), filepath.Join(runs, "child")
	for _, d := range []string{leadDir, childDir} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	results := func(m *scripted) map[string]agentrunner.ToolResult {
		byID := map[string]agentrunner.ToolResult{}
		for _, r := range m.requests[1].Messages[2].ToolResults {
			var tr agentrunner.ToolResult
			json.Unmarshal([]byte(r.Content), &tr)
			byID[r.CallID] = tr
		}
		return byID
	}

	child := *e.inv
	child.CycleDir, child.MemoryRunDir, child.Tools, child.SubAgent = childDir, leadDir, []string{fstool.WriteName}, true
	m := &scripted{replies: []func(*llm.Request) (*llm.Response, error){
		calls(llm.ToolCall{ID: "w", Name: fstool.WriteName, Arguments: json.RawMessage(`{"path":"alpha.md","content":"# Alpha\nfound\n"}`)}),
		answer(e.valid),
	}}
	if _, err := New(m, exec).Run(context.Background(), &child); err != nil {
		t.Fatal(err)
	}
	if got := results(m)["w"]; got.IsError || got.Message != "wrote memory/alpha.md (14 bytes)" {
		t.Errorf("the write: %+v", got)
	}
	if b, err := os.ReadFile(filepath.Join(leadDir, "memory", "alpha.md")); err != nil || string(b) != "# Alpha\nfound\n" {
		t.Errorf("the lead's memory/alpha.md = %q, %v", b, err)
	}
	if _, err := os.Stat(filepath.Join(childDir, "memory")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the child's own memory/ was made (%v)", err)
	}

	lead := *e.inv
	lead.CycleDir, lead.Tools = leadDir, nil
	m = &scripted{replies: []func(*llm.Request) (*llm.Response, error){
		calls(
			llm.ToolCall{ID: "tree", Name: fstool.TreeName, Arguments: json.RawMessage(`{}`)},
			llm.ToolCall{ID: "read", Name: fstool.ReadName, Arguments: json.RawMessage(`{"path":"memory/alpha.md"}`)},
			llm.ToolCall{ID: "other", Name: fstool.ReadName, Arguments: json.RawMessage(`{"path":"memory/../../child/x.md"}`)},
		),
		answer(e.valid),
	}}
	if _, err := New(m, exec).Run(context.Background(), &lead); err != nil {
		t.Fatal(err)
	}
	got := results(m)
	if !strings.Contains(got["tree"].Message, "alpha.md (14 bytes)") || !strings.Contains(got["tree"].Message, "plan.md") {
		t.Errorf("the lead's tree:\n%s", got["tree"].Message)
	}
	if got["read"].IsError || got["read"].Message != "# Alpha\nfound\n" {
		t.Errorf("the lead's read: %+v", got["read"])
	}
	if !got["other"].IsError {
		t.Errorf("a path out of memory/ was read: %+v", got["other"])
	}
}

// TestASubAgentReadsNoFiles: spec 4, artifacts are written by sub-agents
// and read by the lead. A sub-agent's attempt is offered its own tools
// but neither filesystem_read nor filesystem_tree, and a call of either,
// alone or in a parallel_tool_call, is refused with what to do instead.
func TestASubAgentReadsNoFiles(t *testing.T) {
	e := setup(t, nil)
	reg := tool.NewRegistry()
	spec, h, err := fstool.NewWrite(nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(spec, h); err != nil {
		t.Fatal(err)
	}
	pspec, ph, err := tool.NewParallel(nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Register(pspec, ph); err != nil {
		t.Fatal(err)
	}
	exec := tool.NewExecutor(reg, tool.Options{})
	runs := t.TempDir()
	lead, child := filepath.Join(runs, "lead"), filepath.Join(runs, "child")
	inv := *e.inv
	inv.CycleDir, inv.MemoryRunDir, inv.SubAgent = child, lead, true
	inv.Tools = []string{fstool.WriteName, pspec.Name}
	m := &scripted{replies: []func(*llm.Request) (*llm.Response, error){
		calls(
			llm.ToolCall{ID: "read", Name: fstool.ReadName, Arguments: json.RawMessage(`{"path":"plan.md"}`)},
			llm.ToolCall{ID: "tree", Name: fstool.TreeName, Arguments: json.RawMessage(`{}`)},
			llm.ToolCall{ID: "batch", Name: pspec.Name, Arguments: json.RawMessage(`{"calls":[{"name":"filesystem_read","arguments":{"path":"plan.md"}}]}`)},
		),
		answer(e.valid),
	}}
	if _, err := New(m, exec).Run(context.Background(), &inv); err != nil {
		t.Fatal(err)
	}
	var offered []string
	for _, s := range m.requests[0].Tools {
		offered = append(offered, s.Name)
	}
	if diff := cmp.Diff([]string{fstool.WriteName, pspec.Name}, offered); diff != "" {
		t.Errorf("a sub-agent's tools (-want +got):\n%s", diff)
	}
	for _, r := range m.requests[1].Messages[2].ToolResults {
		var tr agentrunner.ToolResult
		json.Unmarshal([]byte(r.Content), &tr)
		if r.CallID == "batch" {
			if !strings.Contains(tr.Message, "sub-agents do not read files") {
				t.Errorf("a read in a batch: %+v, want it refused", tr)
			}
			continue
		}
		if !r.IsError || !tr.IsError || tr.Message != SubAgentReadRefusal {
			t.Errorf("call %s: %+v, want the refusal", r.CallID, tr)
		}
	}
	if !strings.Contains(SubAgentReadRefusal, "filesystem_write") {
		t.Errorf("the refusal does not say to write the report with filesystem_write: %s", SubAgentReadRefusal)
	}

	// The same agent in a run of its own (no parent) reads its files.
	m = &scripted{replies: []func(*llm.Request) (*llm.Response, error){answer(e.valid)}}
	own := *e.inv
	own.Tools = []string{fstool.WriteName}
	if _, err := New(m, exec).Run(context.Background(), &own); err != nil {
		t.Fatal(err)
	}
	offered = nil
	for _, s := range m.requests[0].Tools {
		offered = append(offered, s.Name)
	}
	if diff := cmp.Diff([]string{fstool.ReadName, fstool.TreeName, fstool.WriteName}, offered); diff != "" {
		t.Errorf("an agent's tools (-want +got):\n%s", diff)
	}
}
