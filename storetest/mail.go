package storetest

import (
	"context"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// deposit is a message for agent's mailbox whose line is its text.
func deposit(agent, id, line string, keep int) *agentrunner.MailDeposit {
	return &agentrunner.MailDeposit{Agent: agent, ID: id, Line: []byte(line), Keep: keep}
}

// mailbox reads agent's mailbox as strings.
func mailbox(t *testing.T, s agentrunner.Store, agent string) []string {
	t.Helper()
	lines, err := s.Mailbox(context.Background(), agent)
	if err != nil {
		t.Fatalf("mailbox of %s: %v", agent, err)
	}
	var out []string
	for _, l := range lines {
		out = append(out, string(l))
	}
	return out
}

func testMail(t *testing.T, s agentrunner.Store) {
	tests := []struct {
		name  string
		mail  []*agentrunner.MailDeposit
		agent string
		want  []string
	}{
		{"appended in order", []*agentrunner.MailDeposit{deposit("research", "a", "A", 3), deposit("plan", "a", "plan A", 3), deposit("research", "b", "B", 3)},
			"research", []string{"A", "B"}},
		{"another agent's mailbox is its own", nil, "plan", []string{"plan A"}},
		{"a deposit with an id there replaces it in place", []*agentrunner.MailDeposit{deposit("research", "a", "A2", 3)},
			"research", []string{"A2", "B"}},
		{"the mailbox is full", []*agentrunner.MailDeposit{deposit("research", "c", "C", 3)},
			"research", []string{"A2", "B", "C"}},
		{"the oldest beyond keep is dropped", []*agentrunner.MailDeposit{deposit("research", "d", "D", 3)},
			"research", []string{"B", "C", "D"}},
		{"a replacement in a full mailbox drops nothing", []*agentrunner.MailDeposit{deposit("research", "b", "B2", 3)},
			"research", []string{"B2", "C", "D"}},
		{"a dropped id comes back as a new message", []*agentrunner.MailDeposit{deposit("research", "a", "A3", 3)},
			"research", []string{"C", "D", "A3"}},
		{"each deposit of a change is capped in turn", []*agentrunner.MailDeposit{deposit("research", "e", "E", 3), deposit("research", "c", "C2", 3)},
			"research", []string{"A3", "E", "C2"}},
		{"a smaller keep drops more", []*agentrunner.MailDeposit{deposit("research", "f", "F", 2)},
			"research", []string{"C2", "F"}},
		{"a mailbox never deposited into is empty", nil, "nobody", nil},
	}
	for _, tt := range tests {
		if tt.mail != nil {
			mustApply(t, s, &agentrunner.Change{Mail: tt.mail})
		}
		if diff := cmp.Diff(tt.want, mailbox(t, s, tt.agent), cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tt.name, diff)
		}
	}
}

// testMailBatch: changes committed together (parallel branches of one
// batch) that deposit into one mailbox each keep their message.
func testMailBatch(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	err := s.ApplyAll(ctx,
		&agentrunner.Change{Mail: []*agentrunner.MailDeposit{deposit("judge", "r1/left/forward/judge", "left", 5)}},
		&agentrunner.Change{Mail: []*agentrunner.MailDeposit{deposit("judge", "r1/right/forward/judge", "right", 5)}})
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"left", "right"}, mailbox(t, s, "judge")); diff != "" {
		t.Errorf("mailbox after one batch (-want +got):\n%s", diff)
	}
}

// testMailAtomic: a change's deposits are committed with the rest of it,
// or not at all, and a deposit the store cannot keep is refused.
func testMailAtomic(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	mustApply(t, s, &agentrunner.Change{Mail: []*agentrunner.MailDeposit{deposit("research", "a", "A", 5)}})
	// The change fails on its command, which does not exist: its deposits
	// must not be written, the replacement neither.
	missing := &agentrunner.Command{ID: 999, ConsumedAt: t0, Result: "done"}
	err := s.Apply(ctx, &agentrunner.Change{
		Mail:     []*agentrunner.MailDeposit{deposit("research", "a", "A2", 5), deposit("research", "b", "B", 5)},
		Consumed: []*agentrunner.Command{missing},
	})
	if err == nil {
		t.Fatal("a change consuming a missing command succeeded")
	}
	if diff := cmp.Diff([]string{"A"}, mailbox(t, s, "research")); diff != "" {
		t.Errorf("mailbox after a failed change (-want +got):\n%s", diff)
	}
	for name, d := range map[string]*agentrunner.MailDeposit{
		"no agent":      deposit("", "a", "A", 5),
		"no id":         deposit("research", "", "A", 5),
		"an empty line": deposit("research", "c", "", 5),
		"two lines":     deposit("research", "c", "C\nD", 5),
		"keep 0":        deposit("research", "c", "C", 0),
	} {
		err := s.Apply(ctx, &agentrunner.Change{Mail: []*agentrunner.MailDeposit{deposit("research", "z", "Z", 5), d}})
		if agentrunner.ErrorCode(err) != agentrunner.EINVALID {
			t.Errorf("a deposit with %s: %v, want EINVALID", name, err)
		}
	}
	if diff := cmp.Diff([]string{"A"}, mailbox(t, s, "research")); diff != "" {
		t.Errorf("mailbox after refused deposits (-want +got):\n%s", diff)
	}
}

// testMailGroup: in a group commit, the deposits of a change whose guard
// fails are refused with it, and the others' are kept.
func testMailGroup(t *testing.T, s agentrunner.Store) {
	ctx := context.Background()
	seedGroup(t, s, "", []string{"b"}) // b's attempt moved on: its guard fails
	chs := []*agentrunner.Change{closing("a", 1), closing("b", 1), closing("c", 1)}
	for _, ch := range chs {
		id := ch.Guards[0].RunID
		ch.Mail = []*agentrunner.MailDeposit{deposit("judge", id+"/review/forward/judge", "from "+id, 5)}
	}
	errs, err := s.ApplyGroup(ctx, chs...)
	if err != nil || len(errs) != 3 || errs[0] != nil || agentrunner.ErrorCode(errs[1]) != agentrunner.ECONFLICT || errs[2] != nil {
		t.Fatalf("ApplyGroup: %v, %v; want b's change refused alone", errs, err)
	}
	if diff := cmp.Diff([]string{"from a", "from c"}, mailbox(t, s, "judge")); diff != "" {
		t.Errorf("mailbox after the group (-want +got):\n%s", diff)
	}
}
