package mailbox

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/agentrunner/agentrunner/sqlite"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2025, 3, 1, 12, 0, 0, 0, time.UTC)

func msg(id string, minute int) Message {
	return Message{
		ID:      id,
		Time:    t0.Add(time.Duration(minute) * time.Minute),
		From:    "evaluation",
		Kind:    Broadcast,
		CycleID: "20250301_120000",
		Body:    "lesson " + id + ": keep <plans> & notes short",
	}
}

func newBoxes(t *testing.T, max int) *Mailboxes {
	t.Helper()
	m, err := New(filepath.Join(t.TempDir(), "mailboxes"), max)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

// testStore is a real store whose mailboxes the views are of.
var stores sync.Map // *Mailboxes -> *sqlite.Store

func storeOf(t *testing.T, m *Mailboxes) *sqlite.Store {
	t.Helper()
	if s, ok := stores.Load(m); ok {
		return s.(*sqlite.Store)
	}
	s, err := sqlite.Open(context.Background(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close(); stores.Delete(m) })
	stores.Store(m, s)
	return s
}

// deposit commits each message in its own change, as a step does, and
// writes the view after the commit.
func deposit(t *testing.T, m *Mailboxes, agent string, msgs ...Message) {
	t.Helper()
	if err := depositE(m, storeOf(t, m), agent, msgs...); err != nil {
		t.Fatal(err)
	}
}

func depositE(m *Mailboxes, s *sqlite.Store, agent string, msgs ...Message) error {
	ctx := context.Background()
	for _, ms := range msgs {
		d, err := m.Deposit(agent, ms)
		if err != nil {
			return fmt.Errorf("Deposit(%s, %s): %w", agent, ms.ID, err)
		}
		if err := s.Apply(ctx, &agentrunner.Change{Mail: []*agentrunner.MailDeposit{d}}); err != nil {
			return err
		}
		if err := m.Sync(ctx, s, agent); err != nil {
			return fmt.Errorf("Sync(%s): %w", agent, err)
		}
	}
	return nil
}

func ids(msgs []Message) []string {
	out := []string{}
	for _, m := range msgs {
		out = append(out, m.ID)
	}
	return out
}

func TestNew(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "a", "b")
	m, err := New(dir, 5)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
		t.Fatalf("directory not created: %v", err)
	}
	if got, want := m.Path("plan"), filepath.Join(dir, "mailbox.plan"); got != want {
		t.Errorf("Path = %q, want %q", got, want)
	}
	if !filepath.IsAbs(m.Dir()) {
		t.Errorf("Dir %q is not absolute", m.Dir())
	}

	for _, max := range []int{0, -1} {
		if _, err := New(t.TempDir(), max); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
			t.Errorf("New(max %d) error = %v, want an invalid error", max, err)
		}
	}
	if _, err := New("", 5); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
		t.Errorf("New(\"\") error = %v, want an invalid error", err)
	}
	file := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(file, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := New(file, 5); err == nil {
		t.Errorf("New on a regular file succeeded")
	}
}

func TestDepositReadRoundTrip(t *testing.T) {
	m := newBoxes(t, 5)
	paris := time.FixedZone("Paris", 3600)
	in := []Message{
		msg("a", 0),
		{ID: "b", Time: t0.In(paris).Add(time.Second), From: "operator", Kind: Inject, Body: "line one\nline two \"quoted\""},
		{ID: "c", Time: t0.Add(2 * time.Second), From: "runner", Kind: Status, CycleID: "x", Body: "execution done ✓"},
	}
	deposit(t, m, "plan", in...)
	got, err := m.Read("plan", 0)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	want := append([]Message(nil), in...)
	want[1].Time = want[1].Time.UTC() // stored in UTC
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Read (-want +got):\n%s", diff)
	}
	if got[1].Time.Location() != time.UTC {
		t.Errorf("time location = %v, want UTC", got[1].Time.Location())
	}

	// Other agents' mailboxes are separate files.
	if other, err := m.Read("research", 0); err != nil || len(other) != 0 {
		t.Errorf("Read(research) = %v, %v; want empty", other, err)
	}
}

func TestFileFormat(t *testing.T) {
	m := newBoxes(t, 5)
	deposit(t, m, "plan", msg("a", 0), Message{ID: "b", Time: t0, From: "op", Kind: Inject, Body: "x"})
	data, err := os.ReadFile(m.Path("plan"))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"a","time":"2025-03-01T12:00:00Z","from":"evaluation","kind":"broadcast","cycle_id":"20250301_120000","body":"lesson a: keep <plans> & notes short"}
{"id":"b","time":"2025-03-01T12:00:00Z","from":"op","kind":"inject","body":"x"}
`
	if diff := cmp.Diff(want, string(data)); diff != "" {
		t.Errorf("file (-want +got):\n%s", diff)
	}
	fi, err := os.Stat(m.Path("plan"))
	if err != nil {
		t.Fatal(err)
	}
	if perm := fi.Mode().Perm(); perm != 0o644 {
		t.Errorf("file mode = %v, want 0644 so agents can read it", perm)
	}
}

func TestRetentionKeepsNewest(t *testing.T) {
	m := newBoxes(t, 5)
	for i := range 8 {
		deposit(t, m, "plan", msg(fmt.Sprintf("m%d", i), i))
	}
	got, err := m.Read("plan", 0)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if diff := cmp.Diff([]string{"m3", "m4", "m5", "m6", "m7"}, ids(got)); diff != "" {
		t.Errorf("kept ids (-want +got):\n%s", diff)
	}
}

func TestReplaceByIDKeepsPositionAndCount(t *testing.T) {
	m := newBoxes(t, 5)
	deposit(t, m, "plan", msg("a", 0), msg("b", 1), msg("c", 2))
	update := msg("b", 9)
	update.Body = "updated"
	deposit(t, m, "plan", update)
	got, err := m.Read("plan", 0)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	want := []Message{msg("a", 0), update, msg("c", 2)}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Read (-want +got):\n%s", diff)
	}

	// Replaying the same delivery is idempotent: nothing is appended.
	deposit(t, m, "plan", update)
	got, err = m.Read("plan", 0)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("after replay (-want +got):\n%s", diff)
	}
}

func TestReplaceInFullMailboxPrunesNothing(t *testing.T) {
	m := newBoxes(t, 3)
	deposit(t, m, "plan", msg("a", 0), msg("b", 1), msg("c", 2))
	deposit(t, m, "plan", msg("a", 5))
	got, err := m.Read("plan", 0)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, ids(got)); diff != "" {
		t.Errorf("ids (-want +got):\n%s", diff)
	}
}

func TestReadLastN(t *testing.T) {
	m := newBoxes(t, 5)
	deposit(t, m, "plan", msg("a", 0), msg("b", 1), msg("c", 2), msg("d", 3))
	tests := []struct {
		n    int
		want []string
	}{
		{n: -1, want: []string{"a", "b", "c", "d"}},
		{n: 0, want: []string{"a", "b", "c", "d"}},
		{n: 1, want: []string{"d"}},
		{n: 2, want: []string{"c", "d"}},
		{n: 4, want: []string{"a", "b", "c", "d"}},
		{n: 10, want: []string{"a", "b", "c", "d"}},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.n), func(t *testing.T) {
			got, err := m.Read("plan", tt.n)
			if err != nil {
				t.Fatalf("Read: %v", err)
			}
			if diff := cmp.Diff(tt.want, ids(got)); diff != "" {
				t.Errorf("Read(%d) ids (-want +got):\n%s", tt.n, diff)
			}
		})
	}
}

func TestReadMissingMailboxIsEmpty(t *testing.T) {
	m := newBoxes(t, 5)
	got, err := m.Read("plan", 3)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if len(got) != 0 {
		t.Errorf("Read = %v, want empty", got)
	}
	if _, err := os.Stat(m.Path("plan")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Read created the mailbox file: %v", err)
	}
}

func TestInvalidAgentNames(t *testing.T) {
	m := newBoxes(t, 5)
	bad := []string{"", ".hidden", "..", "a..b", "a/b", "../x", `a\b`, "a b", "plan\n", "é", "a:b", strings.Repeat("a", 129)}
	for _, agent := range bad {
		t.Run(agent, func(t *testing.T) {
			if err := ValidateAgent(agent); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
				t.Errorf("ValidateAgent(%q) = %v, want an invalid error", agent, err)
			}
			if _, err := m.Deposit(agent, msg("a", 0)); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
				t.Errorf("Deposit(%q) = %v, want an invalid error", agent, err)
			}
			if _, err := m.Read(agent, 0); agentrunner.ErrorCode(err) != agentrunner.EINVALID {
				t.Errorf("Read(%q) = %v, want an invalid error", agent, err)
			}
		})
	}
	entries, err := os.ReadDir(m.Dir())
	if err != nil {
		t.Fatal(err)
	}
	if len(entries) != 0 {
		t.Errorf("invalid deposits wrote %d files", len(entries))
	}

	for _, agent := range []string{"plan", "Research_2", "a.b-c", "x", strings.Repeat("a", 128)} {
		if err := ValidateAgent(agent); err != nil {
			t.Errorf("ValidateAgent(%q) = %v, want nil", agent, err)
		}
	}
}

func TestInvalidMessages(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Message)
		want   string
	}{
		{"no id", func(m *Message) { m.ID = "" }, "id is empty"},
		{"no from", func(m *Message) { m.From = "" }, "from is empty"},
		{"no kind", func(m *Message) { m.Kind = "" }, "kind is empty"},
		{"unknown kind", func(m *Message) { m.Kind = "shout" }, `kind "shout"`},
		{"no body", func(m *Message) { m.Body = "" }, "body is empty"},
		{"zero time", func(m *Message) { m.Time = time.Time{} }, "time is zero"},
		{"year out of range", func(m *Message) { m.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "outside the years"},
		{"bad utf-8", func(m *Message) { m.Body = "a\xffb" }, "body is not valid UTF-8"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newBoxes(t, 5)
			ms := msg("a", 0)
			tt.change(&ms)
			_, err := m.Deposit("plan", ms)
			if agentrunner.ErrorCode(err) != agentrunner.EINVALID {
				t.Fatalf("Deposit error = %v, want an invalid error", err)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "plan") {
				t.Errorf("error %q does not say %q for agent plan", err, tt.want)
			}
			if _, err := os.Stat(m.Path("plan")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("invalid message wrote the mailbox: %v", err)
			}
		})
	}
}

func TestCorruptFileRefusedAndUnchanged(t *testing.T) {
	good := `{"id":"a","time":"2025-03-01T12:00:00Z","from":"op","kind":"inject","body":"x"}`
	tests := []struct {
		name     string
		content  string
		wantLine string
	}{
		{"not json", good + "\nhello there\n", "line 2"},
		{"truncated", good + "\n" + good[:30] + "\n", "line 2"},
		{"invalid message", `{"id":"","time":"2025-03-01T12:00:00Z","from":"op","kind":"inject","body":"x"}` + "\n", "line 1"},
		{"unknown kind", strings.Replace(good, "inject", "yell", 1) + "\n", "line 1"},
		{"unknown field", strings.Replace(good, `"body"`, `"priority":1,"body"`, 1) + "\n", "line 1"},
		{"two objects on a line", good + good + "\n", "line 1"},
		{"duplicate id", good + "\n" + good + "\n", "line 2"},
		{"bad time", strings.Replace(good, "2025-03-01T12:00:00Z", "yesterday", 1) + "\n", "line 1"},
		{"null", "null\n", "line 1"},
		{"array", "[]\n", "line 1"},
		{"invalid utf-8", good + "\n" + strings.Replace(good, `"x"`, "\"\xff\"", 1) + "\n", "line 2"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := newBoxes(t, 5)
			path := m.Path("plan")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			check := func(op string, err error) {
				t.Helper()
				if !errors.Is(err, ErrCorrupt) {
					t.Fatalf("%s error = %v, want ErrCorrupt", op, err)
				}
				if !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), tt.wantLine) {
					t.Errorf("%s error %q does not name %s %s", op, err, path, tt.wantLine)
				}
			}
			_, err := m.Read("plan", 0)
			check("Read", err)
			_, err = m.Legacy("plan")
			check("Legacy", err)

			data, err := os.ReadFile(path)
			if err != nil {
				t.Fatal(err)
			}
			if string(data) != tt.content {
				t.Errorf("corrupt file changed to %q", data)
			}
			entries, err := os.ReadDir(m.Dir())
			if err != nil {
				t.Fatal(err)
			}
			if len(entries) != 1 {
				t.Errorf("directory holds %d entries, want only the mailbox", len(entries))
			}
		})
	}
}

func TestHandEditedFileIsAccepted(t *testing.T) {
	m := newBoxes(t, 5)
	// Blank lines, CRLF endings, another time zone and no final newline,
	// as an operator's editor may leave them.
	content := "\n" +
		`{"id":"a","time":"2025-03-01T13:00:00+01:00","from":"op","kind":"inject","body":"x"}` + "\r\n" +
		"   \n" +
		`{"id":"b","time":"2025-03-01T12:01:00Z","from":"op","kind":"inject","body":"y"}`
	if err := os.WriteFile(m.Path("plan"), []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := m.Read("plan", 0)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	want := []Message{
		{ID: "a", Time: t0, From: "op", Kind: Inject, Body: "x"},
		{ID: "b", Time: t0.Add(time.Minute), From: "op", Kind: Inject, Body: "y"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Read (-want +got):\n%s", diff)
	}
	// Imported into the store, it is rendered in the runner's own format.
	ds, err := m.Legacy("plan")
	if err != nil {
		t.Fatalf("Legacy: %v", err)
	}
	s := storeOf(t, m)
	if err := s.Apply(context.Background(), &agentrunner.Change{Mail: ds}); err != nil {
		t.Fatal(err)
	}
	deposit(t, m, "plan", msg("c", 2))
	got, err = m.Read("plan", 0)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if diff := cmp.Diff([]string{"a", "b", "c"}, ids(got)); diff != "" {
		t.Errorf("ids after deposit (-want +got):\n%s", diff)
	}
}

// TestConcurrentReadersNeverSeeTornFile deposits many messages while other
// goroutines read the file, both through Read and as another process would,
// with a plain file read. Every read must parse completely.
func TestConcurrentReadersNeverSeeTornFile(t *testing.T) {
	const deposits = 100
	m := newBoxes(t, 5)
	// A long body makes a torn write far likelier to be seen if writes were
	// not atomic.
	body := strings.Repeat("lorem ipsum ", 500)

	done := make(chan struct{})
	var wg sync.WaitGroup
	errs := make(chan error, 16)
	for range 4 {
		wg.Go(func() {
			for reads := 0; ; reads++ {
				select {
				case <-done:
					if reads == 0 {
						errs <- errors.New("reader never ran")
					}
					return
				default:
				}
				got, err := m.Read("plan", 0)
				if err != nil {
					errs <- fmt.Errorf("Read: %w", err)
					return
				}
				if len(got) > 5 {
					errs <- fmt.Errorf("Read returned %d messages, max is 5", len(got))
					return
				}
				data, err := os.ReadFile(m.Path("plan"))
				if errors.Is(err, os.ErrNotExist) {
					continue
				}
				if err != nil {
					errs <- err
					return
				}
				if _, err := parse("raw", data); err != nil {
					errs <- fmt.Errorf("raw read: %w", err)
					return
				}
				if !bytes.HasSuffix(data, []byte("\n")) {
					errs <- errors.New("raw read: file does not end in a newline")
					return
				}
			}
		})
	}

	// Two writers, so deposits also race each other while readers read.
	st := storeOf(t, m)
	var writers sync.WaitGroup
	for w := range 2 {
		writers.Go(func() {
			for i := range deposits / 2 {
				ms := msg(fmt.Sprintf("w%d-%03d", w, i), i)
				ms.Body = body
				if err := depositE(m, st, "plan", ms); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	writers.Wait()
	close(done)
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}

	got, err := m.Read("plan", 0)
	if err != nil {
		t.Fatalf("final Read: %v", err)
	}
	if len(got) != 5 {
		t.Errorf("final mailbox holds %d messages, want 5", len(got))
	}
}

func TestConcurrentDepositsLoseNothing(t *testing.T) {
	const n = 40
	m := newBoxes(t, n)
	st := storeOf(t, m)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			// Each view is written after its commit: the last one written
			// must hold every message, never an older view written late.
			if err := depositE(m, st, "plan", msg(fmt.Sprintf("m%02d", i), i)); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	got, err := m.Read("plan", 0)
	if err != nil {
		t.Fatalf("Read: %v", err)
	}
	if len(got) != n {
		t.Errorf("mailbox holds %d messages, want %d", len(got), n)
	}
}
