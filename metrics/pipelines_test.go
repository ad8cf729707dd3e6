package metrics

import (
	"context"
	"errors"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/google/go-cmp/cmp"
)

// failingPipelineStore fails every read, as a locked database does.
type failingPipelineStore struct{}

func (failingPipelineStore) Control(context.Context) (*agentrunner.Control, error) {
	return nil, errors.New("database is locked")
}
func (failingPipelineStore) RunCounts(context.Context) (agentrunner.RunCounts, error) {
	return agentrunner.RunCounts{}, errors.New("database is locked")
}
func (failingPipelineStore) RunTotals(context.Context) ([]agentrunner.RunCount, error) {
	return nil, errors.New("database is locked")
}
func (failingPipelineStore) Runs(context.Context, agentrunner.RunFilter) ([]*agentrunner.Run, error) {
	return nil, errors.New("database is locked")
}

// TestPipelineMetricsFromTheStore: each configured pipeline's state, the
// end of its newest completed run and its ended runs by status are read
// from the store at each scrape: right for a Metrics made after a restart
// (a new one on the reopened store), following a pause and a halt, and
// without the runs of pipelines not configured.
func TestPipelineMetricsFromTheStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "state.db")
	store, err := sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	t0 := time.Date(2026, 11, 24, 0, 0, 0, 0, time.UTC)
	run := func(id, pipeline string, status agentrunner.RunStatus, ended time.Duration) *agentrunner.Run {
		r := &agentrunner.Run{ID: id, Pipeline: pipeline, Status: status, Dir: t.TempDir(), StartedAt: t0}
		if status.Finished() {
			r.EndedAt = t0.Add(ended)
		}
		return r
	}
	apply := func(st *sqlite.Store, ch *agentrunner.Change) {
		t.Helper()
		if err := st.ApplyAll(t.Context(), ch); err != nil {
			t.Fatal(err)
		}
	}
	apply(store, &agentrunner.Change{Runs: []*agentrunner.Run{
		run("loop-000001", "loop", agentrunner.RunCompleted, time.Hour),
		run("loop-000002", "loop", agentrunner.RunFailed, 2*time.Hour),
		run("loop-000003", "loop", agentrunner.RunCompleted, 3*time.Hour),
		run("review-000001", "review", agentrunner.RunAborted, time.Minute),
		run("review-000002", "review", agentrunner.RunRunning, 0),
		run("gone-000001", "gone", agentrunner.RunCompleted, time.Minute),
	}})
	store.Close()

	// A restart: a new Metrics on the reopened store.
	store, err = sqlite.Open(t.Context(), path)
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	m := New(Options{Pipeline: "loop", Store: store, Pipelines: []string{"review", "loop"}})
	state := func(p, s string) string { return `agentrunner_pipeline_state{pipeline="` + p + `",state="` + s + `"}` }
	want := map[string]float64{
		state("loop", "idle"): 1, state("loop", "running"): 0, state("loop", "paused"): 0, state("loop", "halted"): 0,
		state("review", "idle"): 0, state("review", "running"): 1, state("review", "paused"): 0, state("review", "halted"): 0,
		`agentrunner_pipeline_last_success_timestamp_seconds{pipeline="loop"}`: float64(t0.Add(3 * time.Hour).Unix()),
		`agentrunner_pipeline_runs_total{pipeline="loop",status="completed"}`:  2,
		`agentrunner_pipeline_runs_total{pipeline="loop",status="failed"}`:     1,
		`agentrunner_pipeline_runs_total{pipeline="review",status="aborted"}`:  1,
		`agentrunner_scrape_errors_total{pipeline="loop",source="pipelines"}`:  0,
	}
	if diff := cmp.Diff(want, snapshot(t, m.Registry())); diff != "" {
		t.Errorf("after the restart (-want +got):\n%s", diff)
	}

	// A loop run halts and the workspace is paused: halted wins for the
	// loop, the review pipeline is paused though a run of it runs.
	halted := run("loop-000004", "loop", agentrunner.RunHalted, 0)
	apply(store, &agentrunner.Change{Runs: []*agentrunner.Run{halted}, Control: &agentrunner.Control{Paused: true, PausedBy: "alice", PausedAt: t0}})
	for _, s := range pipelineStates {
		want[state("loop", s)] = b2f(s == StateHalted)
		want[state("review", s)] = b2f(s == StatePaused)
	}
	if diff := cmp.Diff(want, snapshot(t, m.Registry())); diff != "" {
		t.Errorf("halted and paused (-want +got):\n%s", diff)
	}

	// A failing store: each scrape counts its failure. The registry
	// gathers its collectors at the same time, so a scrape may or may not
	// show its own failure; the third shows the first two at least.
	failing := New(Options{Pipeline: "loop", Store: failingPipelineStore{}, Pipelines: []string{"loop"}})
	snapshot(t, failing.Registry())
	snapshot(t, failing.Registry())
	got := snapshot(t, failing.Registry())
	const errs = `agentrunner_scrape_errors_total{pipeline="loop",source="pipelines"}`
	if n := got[errs]; len(got) != 1 || n < 2 || n > 3 {
		t.Errorf("a failing store: %v, want only %s at 2 or 3", got, errs)
	}
}

// TestPipelineMetricsFollowThePipelinesNamed: with PipelineNames, each
// scrape shows the pipelines named then: a reload that removes review
// and adds fresh takes review's series out and brings fresh's in.
func TestPipelineMetricsFollowThePipelinesNamed(t *testing.T) {
	store, err := sqlite.Open(t.Context(), filepath.Join(t.TempDir(), "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	defer store.Close()
	names := []string{"review"}
	m := New(Options{Pipeline: "loop", Store: store, Pipelines: []string{"review"}, PipelineNames: func() []string { return names }})
	idle := func(p string) string { return `agentrunner_pipeline_state{pipeline="` + p + `",state="idle"}` }
	if got := snapshot(t, m.Registry()); got[idle("review")] != 1 || got[idle("fresh")] != 0 {
		t.Fatalf("before the reload: %v", got)
	}
	names = []string{"fresh"}
	got := snapshot(t, m.Registry())
	if _, ok := got[idle("review")]; ok || got[idle("fresh")] != 1 {
		t.Errorf("after the reload: %v, want fresh's series and not review's", got)
	}
}

// TestBuildInfo: agentrunner_build_info names the binary, without the
// pipeline label; without a version there is no such metric.
func TestBuildInfo(t *testing.T) {
	m := New(Options{Pipeline: "loop", Build: BuildInfo{Version: "v1.2.3", Revision: "0123abc", GoVersion: "go1.26.0"}})
	want := map[string]float64{`agentrunner_build_info{go="go1.26.0",revision="0123abc",version="v1.2.3"}`: 1}
	if diff := cmp.Diff(want, snapshot(t, m.Registry())); diff != "" {
		t.Errorf("build info (-want +got):\n%s", diff)
	}
	if got := snapshot(t, New(Options{Pipeline: "loop"}).Registry()); len(got) != 0 {
		t.Errorf("without a build: %v", got)
	}
}
