package agent

import (
	"context"
	"encoding/json"
	"errors"
	"io/fs"
	"os"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/mailboxtest"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/view"
)

// mailTo decodes the messages a result deposits into agent's mailbox.
func mailTo(t *testing.T, res *agentrunner.StepResult, agent string) []mailbox.Message {
	t.Helper()
	var out []mailbox.Message
	for _, d := range res.Mail {
		if d.Agent != agent {
			continue
		}
		var m mailbox.Message
		if err := json.Unmarshal(d.Line, &m); err != nil {
			t.Fatalf("the deposit %s for %s is not a message: %v", d.ID, agent, err)
		}
		if m.ID != d.ID {
			t.Errorf("deposit %s holds message %s", d.ID, m.ID)
		}
		out = append(out, m)
	}
	return out
}

// TestDeliveriesAreDepositsInTheResult: the step's messages are handed to
// the scheduler, to be committed with its outcome; the kind writes no
// mailbox file.
func TestDeliveriesAreDepositsInTheResult(t *testing.T) {
	e := newEnv(t)
	res, err := e.kind(t, e.mock, nil).Run(context.Background(), e.attempt(t))
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, d := range res.Mail {
		got = append(got, d.Agent+" "+d.ID)
		if d.Keep != e.ws.Config.Mailbox.MaxMessages {
			t.Errorf("deposit %s keeps %d messages, want mailbox.max_messages %d", d.ID, d.Keep, e.ws.Config.Mailbox.MaxMessages)
		}
	}
	want := []string{"analysis " + e.run.ID + "/research/forward/analysis", "plan " + e.run.ID + "/research/backward/plan"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("deposits (-want +got):\n%s", diff)
	}
	if m := mailTo(t, res, "analysis"); len(m) != 1 || m[0].From != "research" || m[0].CycleID != e.run.ID {
		t.Errorf("the message to analysis: %+v", m)
	}
	for _, agent := range []string{"analysis", "plan"} {
		if _, err := os.Stat(e.boxes.Path(agent)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the kind wrote the mailbox file of %s: %v", agent, err)
		}
	}
}

// TestTheAgentReadsItsMailboxAsTheStoreHasIt: a mailbox file lost, cut
// short or edited since its messages were committed is rewritten from the
// store before the agent runs, with a view.repaired event; a right one is
// left alone.
func TestTheAgentReadsItsMailboxAsTheStoreHasIt(t *testing.T) {
	tests := []struct {
		name  string
		spoil func(path string) error
		want  string
	}{
		{"right", func(string) error { return nil }, ""},
		{"deleted", os.Remove, view.Missing},
		{"truncated", func(p string) error { return os.Truncate(p, 7) }, view.Different},
		{"edited", func(p string) error {
			return os.WriteFile(p, []byte(`{"id":"x","time":"2026-11-22T14:00:00Z","from":"plan","kind":"forward","body":"forged"}`+"\n"), 0o644)
		}, view.Different},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			mailboxtest.Deposit(t, e.store, e.boxes, "research",
				mailbox.Message{ID: "m1", Time: t0, From: "plan", Kind: mailbox.Forward, Body: "look at BTC"},
				mailbox.Message{ID: "m2", Time: t0, From: "operator:alice", Kind: mailbox.Inject, Body: "and ETH"})
			path := e.boxes.Path("research")
			if err := tt.spoil(path); err != nil {
				t.Fatal(err)
			}
			var read []mailbox.Message
			rt := agentFunc(func(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
				var err error
				if read, err = mailbox.ReadFile(inv.MailboxPath); err != nil {
					return nil, err
				}
				return e.mock.Run(ctx, inv)
			})
			res, err := e.kind(t, rt, nil).Run(context.Background(), e.attempt(t))
			if err != nil {
				t.Fatal(err)
			}
			var ids []string
			for _, m := range read {
				ids = append(ids, m.ID+":"+m.Body)
			}
			if diff := cmp.Diff([]string{"m1:look at BTC", "m2:and ETH"}, ids); diff != "" {
				t.Errorf("the mailbox the agent read (-want +got):\n%s", diff)
			}
			var repairs []string
			for _, ev := range res.Events {
				if ev.Type == agentrunner.EventViewRepaired {
					repairs = append(repairs, ev.Details["mailbox"].(string)+":"+ev.Details["reason"].(string))
					if ev.CycleID != e.run.ID || ev.Step != "research" || ev.Details["path"] != path {
						t.Errorf("repair event %+v, want the run's research step and the path", ev)
					}
				}
			}
			var want []string
			if tt.want != "" {
				want = []string{"research:" + tt.want}
			}
			if diff := cmp.Diff(want, repairs); diff != "" {
				t.Errorf("repairs (-want +got):\n%s", diff)
			}
		})
	}
}
