package storetest

import (
	"context"
	"encoding/json"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

// conversationTests are the cases of the model agents' conversations.
var conversationTests = []struct {
	name string
	fn   func(t *testing.T, s agentrunner.Store)
}{
	{"ConversationSaveReplacesTheVisitsOne", testConversationReplace},
	{"ConversationsOfVisitsStepsAndRunsAreApart", testConversationsApart},
	{"ConversationWithoutASaveIsNotFound", testConversationNotFound},
	{"ConversationNeedsItsRunStepAndTime", testConversationInvalid},
}

var conversationTime = time.Date(2026, 11, 29, 9, 0, 0, 123456789, time.UTC)

func conversation(run, step string, visit, attempt, turns int) *agentrunner.Conversation {
	return &agentrunner.Conversation{
		RunID: run, Step: step, Visit: visit, Attempt: attempt, Turns: turns,
		Messages: json.RawMessage(`[{"Role":"user","Text":"Produce report.md now."},` +
			`{"Role":"assistant","ToolCalls":[{"ID":"call_1","Name":"web_search","Arguments":{"q":"a \u003c b"}}]}]`),
		SavedAt: conversationTime.Add(time.Duration(turns) * time.Minute),
	}
}

func saveConversation(t *testing.T, s agentrunner.Store, c *agentrunner.Conversation) {
	t.Helper()
	if err := s.SaveConversation(context.Background(), c); err != nil {
		t.Fatalf("SaveConversation(%s, %s, %d): %v", c.RunID, c.Step, c.Visit, err)
	}
}

// equalJSON compares messages as JSON values: a store may keep them in
// another spacing.
var equalJSON = cmp.Comparer(func(a, b json.RawMessage) bool {
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return false
	}
	return cmp.Equal(x, y)
})

func testConversationReplace(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	first := conversation("run-1", "lead", 1, 1, 1)
	saveConversation(t, s, first)
	got, err := s.Conversation(ctx, "run-1", "lead", 1)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(first, got, equalJSON); d != "" {
		t.Errorf("the saved conversation (-want +got):\n%s", d)
	}
	second := conversation("run-1", "lead", 1, 2, 3)
	second.Messages = json.RawMessage(`[]`)
	saveConversation(t, s, second)
	got, err = s.Conversation(ctx, "run-1", "lead", 1)
	if err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff(second, got, equalJSON); d != "" {
		t.Errorf("the conversation saved again (-want +got):\n%s", d)
	}
}

func testConversationsApart(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	saved := []*agentrunner.Conversation{
		conversation("run-1", "lead", 1, 1, 1),
		conversation("run-1", "lead", 2, 1, 2),
		conversation("run-1", "review", 1, 1, 3),
		conversation("run-2", "lead", 1, 1, 4),
	}
	for _, c := range saved {
		saveConversation(t, s, c)
	}
	for _, want := range saved {
		got, err := s.Conversation(ctx, want.RunID, want.Step, want.Visit)
		if err != nil {
			t.Fatalf("Conversation(%s, %s, %d): %v", want.RunID, want.Step, want.Visit, err)
		}
		if got.Turns != want.Turns {
			t.Errorf("Conversation(%s, %s, %d) has %d turns, want %d: another's", want.RunID, want.Step, want.Visit, got.Turns, want.Turns)
		}
	}
}

func testConversationNotFound(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	saveConversation(t, s, conversation("run-1", "lead", 1, 1, 1))
	for _, k := range []struct {
		run, step string
		visit     int
	}{{"run-2", "lead", 1}, {"run-1", "review", 1}, {"run-1", "lead", 2}} {
		if _, err := s.Conversation(ctx, k.run, k.step, k.visit); agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
			t.Errorf("Conversation(%s, %s, %d): %v, want ENOTFOUND", k.run, k.step, k.visit, err)
		}
	}
}

func testConversationInvalid(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	noRun := conversation("", "lead", 1, 1, 1)
	noTime := conversation("run-1", "lead", 1, 1, 1)
	noTime.SavedAt = time.Time{}
	notArray := conversation("run-1", "lead", 1, 1, 1)
	notArray.Messages = json.RawMessage(`{"Role":"user"}`)
	for name, c := range map[string]*agentrunner.Conversation{"no run": noRun, "no time": noTime, "not an array": notArray} {
		if err := s.SaveConversation(ctx, c); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
			t.Errorf("%s: SaveConversation: %v, want EINVALID", name, err)
		}
	}
	if _, err := s.Conversation(ctx, "run-1", "lead", 1); agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		t.Errorf("an invalid save stored a conversation: %v", err)
	}
}
