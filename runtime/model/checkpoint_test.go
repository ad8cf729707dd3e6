package model

import (
	"context"
	"encoding/json"
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/llm"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/agentrunner/agentrunner/tool"
	"github.com/google/go-cmp/cmp"
)

// countingTools is an executor whose sleepy tool counts its runs.
func countingTools(t *testing.T) (*tool.Executor, *atomic.Int64) {
	t.Helper()
	var ran atomic.Int64
	reg := tool.NewRegistry()
	err := reg.Register(tool.Spec{Name: "sleepy", Description: "counts", Parameters: []byte(`{"type":"object"}`), Timeout: 5 * time.Second},
		tool.HandlerFunc(func(ctx context.Context, args json.RawMessage) (string, error) {
			return "ran <" + string(rune('0'+ran.Add(1))) + "> & \"done\"", nil
		}))
	if err != nil {
		t.Fatal(err)
	}
	return tool.NewExecutor(reg, tool.Options{}), &ran
}

func openStore(t *testing.T) *sqlite.Store {
	t.Helper()
	store, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	return store
}

func TestAnAttemptThatDiesIsResumedFromItsLastTurn(t *testing.T) {
	e := setup(t, nil)
	exec, ran := countingTools(t)
	store := openStore(t)
	e.inv.Visit = 1

	// Attempt 1 answers two turns of tool calls and dies asking for the
	// third.
	ctx, cancel := context.WithCancel(context.Background())
	first := &scripted{replies: []func(*llm.Request) (*llm.Response, error){
		calls(llm.ToolCall{ID: "call_1", Name: "sleepy", Arguments: json.RawMessage(`{ "ms": 0,  "q": "a <b> & \u00e9" }`)}),
		calls(llm.ToolCall{ID: "call_2", Name: "sleepy", Arguments: json.RawMessage(`{"ms":0}`)},
			llm.ToolCall{ID: "call_3", Name: "sleepy", Arguments: json.RawMessage(`{not json`)}),
		func(*llm.Request) (*llm.Response, error) {
			cancel()
			return nil, agentrunner.Fail(agentrunner.ClassInterrupted, "the runner was stopped")
		},
	}}
	if _, err := New(first, exec).Checkpoint(store).Run(ctx, e.inv); err == nil {
		t.Fatal("attempt 1 succeeded; it was to die in its third turn")
	}
	// call_3's arguments are not JSON: it is refused, not run.
	if n := ran.Load(); n != 2 {
		t.Fatalf("attempt 1 ran %d tool calls, want 2", n)
	}

	// Attempt 2 is asked only for the third turn, with the conversation
	// the third turn of attempt 1 had, exactly.
	second := &scripted{replies: []func(*llm.Request) (*llm.Response, error){answer(e.valid)}}
	inv := *e.inv
	inv.Attempt = 2
	inv.Dir = t.TempDir()
	res, err := New(second, exec).Checkpoint(store).Run(context.Background(), &inv)
	if err != nil {
		t.Fatal(err)
	}
	if string(res.Output) != e.valid {
		t.Errorf("attempt 2 output %q", res.Output)
	}
	if len(second.requests) != 1 {
		t.Fatalf("attempt 2 asked the model %d times, want once (turn 3)", len(second.requests))
	}
	if d := cmp.Diff(first.requests[2].Messages, second.requests[0].Messages); d != "" {
		t.Errorf("attempt 2 resumed another conversation (-attempt 1's turn 3 +attempt 2's):\n%s", d)
	}
	if n := ran.Load(); n != 2 {
		t.Errorf("the tools ran %d times over both attempts, want 2: a resumed attempt ran them again", n)
	}
	if res.Usage.Turns != 1 {
		t.Errorf("attempt 2 counts %d turns, want its own 1", res.Usage.Turns)
	}
	saved, err := store.Conversation(context.Background(), inv.CycleID, inv.Step, 1)
	if err != nil || saved.Turns != 3 || saved.Attempt != 2 {
		t.Fatalf("the conversation after the answer: %+v, %v; want 3 turns saved by attempt 2", saved, err)
	}

	// Attempt 3 (attempt 2 died before the engine took its answer) takes
	// the answer without asking the model.
	inv.Attempt, inv.Dir = 3, t.TempDir()
	res, err = New(&scripted{}, exec).Checkpoint(store).Run(context.Background(), &inv)
	if err != nil || string(res.Output) != e.valid {
		t.Errorf("attempt 3: %v, output %q; want the answer of attempt 2", err, res.Output)
	}

	// Another visit of the step starts over.
	other := &scripted{replies: []func(*llm.Request) (*llm.Response, error){answer(e.valid)}}
	inv.Visit, inv.Attempt, inv.Dir = 2, 2, t.TempDir()
	if _, err := New(other, exec).Checkpoint(store).Run(context.Background(), &inv); err != nil {
		t.Fatal(err)
	}
	if n := len(other.requests[0].Messages); n != 1 {
		t.Errorf("visit 2 began with %d messages, want its first", n)
	}
}

func TestAToolBudgetIsCountedAcrossAResume(t *testing.T) {
	e := setup(t, func(a *config.Agent) { a.ToolBudget = 2 })
	exec, ran := countingTools(t)
	store := openStore(t)
	first := &scripted{replies: []func(*llm.Request) (*llm.Response, error){
		calls(llm.ToolCall{ID: "a", Name: "sleepy", Arguments: json.RawMessage(`{}`)}),
	}}
	New(first, exec).Checkpoint(store).Run(context.Background(), e.inv)
	second := &scripted{replies: []func(*llm.Request) (*llm.Response, error){
		calls(llm.ToolCall{ID: "b", Name: "sleepy", Arguments: json.RawMessage(`{}`)}, llm.ToolCall{ID: "c", Name: "sleepy", Arguments: json.RawMessage(`{}`)}),
		answer(e.valid),
	}}
	inv := *e.inv
	inv.Attempt, inv.Dir = 2, t.TempDir()
	if _, err := New(second, exec).Checkpoint(store).Run(context.Background(), &inv); err != nil {
		t.Fatal(err)
	}
	if n := ran.Load(); n != 2 {
		t.Errorf("%d tool calls ran under a budget of 2 over a resume", n)
	}
	if len(second.requests[1].Tools) != 0 {
		t.Error("the turn after the budget was spent offered tools")
	}
}

type failingConversations struct{ agentrunner.ConversationStore }

func (failingConversations) SaveConversation(context.Context, *agentrunner.Conversation) error {
	return errors.New("disk I/O error")
}

func TestACheckpointThatFailsFailsTheAttempt(t *testing.T) {
	e := setup(t, nil)
	exec, ran := countingTools(t)
	m := &scripted{replies: []func(*llm.Request) (*llm.Response, error){
		calls(llm.ToolCall{ID: "a", Name: "sleepy", Arguments: json.RawMessage(`{}`)}),
		answer(e.valid),
	}}
	_, err := New(m, exec).Checkpoint(failingConversations{}).Run(context.Background(), e.inv)
	if agentrunner.ClassOf(err) != agentrunner.ClassInternal {
		t.Errorf("a failed checkpoint: %v, want an internal error", err)
	}
	if len(m.requests) != 1 || ran.Load() != 1 {
		t.Errorf("after the failed checkpoint the model was asked %d times, the tool ran %d: want it stopped after turn 1", len(m.requests), ran.Load())
	}
}
