package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/agentrunner/agentrunner/workspace"
)

// viewConfig is a cycle of two mock agents: the second reads the first's
// artifact.
const viewConfig = `version: 1
name: views
defaults: {provider: mock}
agents:
  first: {identity: identity.md, output: {file: first.md, template: template.md}}
  second:
    identity: identity.md
    inputs: [{artifact: first.md}]
    output: {file: second.md, template: template.md}
pipeline:
  start: one
  steps:
    one: {agent: first, next: two}
    two: {agent: second, next: end}
`

// viewWorkspace writes the views workspace into dir.
func viewWorkspace(t *testing.T, dir string) {
	t.Helper()
	files := map[string]string{
		config.FileName: viewConfig,
		"identity.md":   "You write notes.\n",
		"template.md":   "# Note\n\n## Summary\n\n<!-- one line -->\n",
	}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// noteAgent writes a note naming its step and the cycle, and records what
// each input, and its mailbox, held when it ran.
type noteAgent struct {
	mu     sync.Mutex
	inputs map[string]string // "step input-path" → content; "step mailbox" too
	runs   map[string]int    // by step
}

func newNoteAgent() *noteAgent {
	return &noteAgent{inputs: map[string]string{}, runs: map[string]int{}}
}

func (a *noteAgent) Run(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
	a.mu.Lock()
	a.runs[inv.Step]++
	for _, in := range inv.Inputs {
		data, _ := os.ReadFile(in.Path)
		a.inputs[inv.Step+" "+filepath.Base(in.Path)] = string(data)
	}
	if box, err := os.ReadFile(inv.MailboxPath); err == nil {
		a.inputs[inv.Step+" mailbox"] = string(box)
	}
	a.mu.Unlock()
	body := fmt.Sprintf("# Note\n\n## Summary\n\nStep %s of cycle %s.\n", inv.Step, inv.CycleID)
	return &agentrunner.RunResult{}, os.WriteFile(inv.OutputPath, []byte(body), 0o644)
}

// viewEngine opens the views workspace in dir as a (re)started runner
// would: its store, and an engine with edit applied to its options.
func viewEngine(t *testing.T, dir string, agent *noteAgent, edit func(*Options)) (*Engine, *sqlite.Store) {
	t.Helper()
	cfg, err := config.Load(filepath.Join(dir, config.FileName))
	if err != nil {
		t.Fatal(err)
	}
	ws, err := workspace.Load(cfg)
	if err != nil {
		t.Fatal(err)
	}
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	opts := Options{Workspace: ws, Store: store, Clock: clocktest.New(t0), Runtimes: map[string]agentrunner.Runtime{"mock": agent}}
	if edit != nil {
		edit(&opts)
	}
	e, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return e, store
}

// storedArtifact is the store's newest copy of a run's artifact.
func storedArtifact(t *testing.T, store *sqlite.Store, run, name string) string {
	t.Helper()
	fs, err := store.Files(context.Background(), agentrunner.FileFilter{RunID: run, Kind: agentrunner.FileArtifact, Name: name, Latest: true})
	if err != nil || len(fs) != 1 {
		t.Fatalf("stored %s of %s: %v, %d copies", name, run, err, len(fs))
	}
	return string(fs[0].Data)
}

// repairs lists the view.repaired events as "artifact reason".
func repairs(t *testing.T, store *sqlite.Store) []string {
	t.Helper()
	evs, err := store.Events(context.Background(), agentrunner.EventFilter{Type: agentrunner.EventViewRepaired})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, ev := range evs {
		out = append(out, fmt.Sprintf("%s %s", ev.Details["artifact"], ev.Details["reason"]))
	}
	return out
}

// TestEditedViewIsRepairedAtStart: an artifact in a cycle directory
// truncated or edited by hand after its cycle ended is found at the next
// start, compared with the store's copy, rewritten from it, and the
// repair is recorded.
func TestEditedViewIsRepairedAtStart(t *testing.T) {
	for _, tt := range []struct {
		name, reason string
		damage       func(path string)
	}{
		{"truncated", "different", func(path string) { os.Truncate(path, 5) }},
		{"edited", "different", func(path string) { os.WriteFile(path, []byte("# Note\n\nedited by hand\n"), 0o644) }},
		{"deleted", "missing", func(path string) { os.Remove(path) }},
		{"deleted, a write cut short beside it", "missing", func(path string) {
			os.Remove(path)
			os.WriteFile(filepath.Join(filepath.Dir(path), ".second.md.tmp-1x2y"), []byte("# No"), 0o644)
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			viewWorkspace(t, dir)
			agent := newNoteAgent()
			e, store := viewEngine(t, dir, agent, nil)
			c, err := e.RunOnce(context.Background())
			if err != nil || c.Status != agentrunner.CycleCompleted {
				t.Fatalf("cycle: %v %+v", err, c)
			}
			path := filepath.Join(c.Dir, "second.md")
			tt.damage(path)
			store.Close()

			e, store = viewEngine(t, dir, agent, nil)
			if _, err := e.RunOnce(context.Background()); err != nil {
				t.Fatal(err)
			}
			got, _ := os.ReadFile(path)
			if want := storedArtifact(t, store, c.ID, "second.md"); string(got) != want {
				t.Errorf("second.md after the start: %q, want the stored %q", got, want)
			}
			if got := repairs(t, store); len(got) != 1 || got[0] != "second.md "+tt.reason {
				t.Errorf("repairs %v, want [second.md %s]", got, tt.reason)
			}
			if temps, _ := filepath.Glob(filepath.Join(c.Dir, ".*.tmp-*")); len(temps) > 0 {
				t.Errorf("temporary files left beside the views: %v", temps)
			}
		})
	}
}
