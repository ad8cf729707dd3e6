package agent

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
)

// storeRun records a run of the env's pipeline whose directory holds
// research.md with data (none when data is nil).
func (e *env) storeRun(t *testing.T, id string, data []byte) *agentrunner.Run {
	t.Helper()
	r := &agentrunner.Run{ID: id, Pipeline: e.run.Pipeline, Status: agentrunner.RunCompleted, Dir: e.ws.Layout.Cycle(id), StartedAt: t0, EndedAt: t0}
	if err := os.MkdirAll(r.Dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if data != nil {
		if err := os.WriteFile(filepath.Join(r.Dir, "research.md"), data, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.store.Apply(context.Background(), &agentrunner.Change{Runs: []*agentrunner.Run{r}}); err != nil {
		t.Fatal(err)
	}
	return r
}

// TestFallback: a skipped research step stands in with the newest valid
// research.md of an earlier run (not a later run's, not an invalid one),
// published into this run's directory and delivered with a note; with no
// earlier valid one there is none.
func TestFallback(t *testing.T) {
	e := newEnv(t)
	k := e.kind(t, e.mock, nil)
	// A real attempt of the step makes a valid artifact for the runs below.
	good, err := k.Run(context.Background(), e.attempt(t))
	if err != nil {
		t.Fatal(err)
	}
	os.Remove(good.Path)
	if res, err := k.Fallback(context.Background(), e.attempt(t)); res != nil || err != nil {
		t.Fatalf("with no earlier run: %+v, %v; want none", res, err)
	}
	old := e.storeRun(t, "20261122_110000", good.Output)
	e.storeRun(t, "20261122_120000", []byte("no sections at all\n"))
	e.storeRun(t, "20261122_130000", nil)
	e.storeRun(t, "20261122_150000", append([]byte(nil), good.Output...)) // after this run: not an earlier output

	res, err := k.Fallback(context.Background(), e.attempt(t))
	if err != nil || res == nil {
		t.Fatalf("Fallback: %+v, %v", res, err)
	}
	want := outcome{Events: []string{"artifact.fallback", "mailbox.delivered:analysis", "mailbox.delivered:plan"}, Published: "research.md"}
	if d := cmp.Diff(want, summarize(res, nil)); d != "" {
		t.Errorf("outcome (-want +got):\n%s", d)
	}
	if src := filepath.Join(old.Dir, "research.md"); res.Path != src || string(res.Output) != string(good.Output) {
		t.Errorf("Path %s (%d bytes), want %s", res.Path, len(res.Output), src)
	}
	if f := storedFile(res, agentrunner.FileArtifact); f == nil || f.Name != "research.md" || string(f.Data) != string(good.Output) || f.From != "" {
		t.Errorf("this run's stored research.md is %+v, want the fallback's %d bytes", f, len(good.Output))
	}
	msgs := mailTo(t, res, "plan")
	if len(msgs) == 0 || !strings.Contains(msgs[len(msgs)-1].Body, "research failed; research.md of run 20261122_110000 stands in for it") {
		t.Errorf("the message to plan: %+v", msgs)
	}
}
