package metrics

import (
	"context"
	"slices"

	"github.com/agentrunner/agentrunner"
	"github.com/prometheus/client_golang/prometheus"
)

// PipelineStore is what the pipeline metrics read from the store at each
// scrape (sqlite.Store has it all).
type PipelineStore interface {
	Control(ctx context.Context) (*agentrunner.Control, error)
	RunCounts(ctx context.Context) (agentrunner.RunCounts, error)
	RunTotals(ctx context.Context) ([]agentrunner.RunCount, error)
	Runs(ctx context.Context, f agentrunner.RunFilter) ([]*agentrunner.Run, error)
}

// The states of agentrunner_pipeline_state, from the most urgent: a
// halted run waits for an operator whatever else holds.
const (
	StateHalted  = "halted"
	StatePaused  = "paused"
	StateRunning = "running"
	StateIdle    = "idle"
)

// pipelineStates are the state label's values, each pipeline having a
// sample of every one (1 for its state, 0 for the others), so an alert on
// state="halted" == 1 sees the 0 before it turns 1.
var pipelineStates = []string{StateIdle, StateRunning, StatePaused, StateHalted}

// sourcePipelines is the scrape error source of the pipeline metrics.
const sourcePipelines = "pipelines"

var (
	pipelineStateDesc = prometheus.NewDesc("agentrunner_pipeline_state",
		"State of each configured pipeline, read from the store: 1 for its state (idle, running, paused, halted), 0 for the others. halted: a run waits for an operator; paused: an operator paused the workspace.",
		[]string{"pipeline", "state"}, nil)
	lastSuccessDesc = prometheus.NewDesc("agentrunner_pipeline_last_success_timestamp_seconds",
		"When the newest completed run (cycle) of each pipeline ended (Unix time), read from the store; absent before the first. Alert on its age.",
		[]string{"pipeline"}, nil)
	runTotalsDesc = prometheus.NewDesc("agentrunner_pipeline_runs_total",
		"Runs (cycles) of each pipeline that ended, by status (completed, failed, aborted, incomplete), counted in the store: it survives restarts.",
		[]string{"pipeline", "status"}, nil)
	buildInfoDesc = prometheus.NewDesc("agentrunner_build_info",
		"The running binary: its version, VCS revision and Go version; always 1.",
		[]string{"version", "revision", "go"}, nil)
)

// BuildInfo names the running binary for agentrunner_build_info.
type BuildInfo struct {
	Version, Revision, GoVersion string
}

// pipelineSnapshot is what one scrape read of the pipelines.
type pipelineSnapshot struct {
	pipelines []string
	states    map[string]string
	success   map[string]float64
	totals    []agentrunner.RunCount
}

// pipelineCollector reads the pipelines' state, last success and run
// totals from the store at scrape time, so they are right from the first
// scrape after a restart. Its samples name each pipeline in the label
// pipeline, so it is registered without the constant pipeline label.
type pipelineCollector struct {
	store     PipelineStore
	pipelines []string
	names     func() []string // if set, the pipelines now
	state     *stateCollector // counts the scrape errors
}

// current names the pipelines a scrape shows, sorted.
func (c *pipelineCollector) current() []string {
	if c.names == nil {
		return c.pipelines
	}
	return slices.Sorted(slices.Values(c.names()))
}

var _ prometheus.Collector = (*pipelineCollector)(nil)

// Describe implements prometheus.Collector.
func (c *pipelineCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- pipelineStateDesc
	ch <- lastSuccessDesc
	ch <- runTotalsDesc
}

// Collect implements prometheus.Collector. A failed read leaves every
// pipeline sample out of the scrape and counts the failure.
func (c *pipelineCollector) Collect(ch chan<- prometheus.Metric) {
	snap, err := readWithin(c.state.timeout, "pipelines", c.read)
	if err != nil {
		c.state.errors.WithLabelValues(sourcePipelines).Inc()
		c.state.log.Warn("metrics: leaving the pipelines out of a scrape", "error", err)
		return
	}
	for _, p := range snap.pipelines {
		for _, s := range pipelineStates {
			ch <- prometheus.MustNewConstMetric(pipelineStateDesc, prometheus.GaugeValue, b2f(snap.states[p] == s), p, s)
		}
		if at, ok := snap.success[p]; ok {
			ch <- prometheus.MustNewConstMetric(lastSuccessDesc, prometheus.GaugeValue, at, p)
		}
	}
	for _, t := range snap.totals {
		ch <- prometheus.MustNewConstMetric(runTotalsDesc, prometheus.CounterValue, float64(t.N), t.Pipeline, string(t.Status))
	}
}

// read reads everything one scrape shows of the pipelines.
func (c *pipelineCollector) read(ctx context.Context) (*pipelineSnapshot, error) {
	ctl, err := c.store.Control(ctx)
	if err != nil {
		return nil, err
	}
	counts, err := c.store.RunCounts(ctx)
	if err != nil {
		return nil, err
	}
	names := c.current()
	snap := &pipelineSnapshot{pipelines: names, states: states(names, ctl.Paused, counts.Unfinished), success: map[string]float64{}}
	if snap.totals, err = c.totals(ctx, names); err != nil {
		return nil, err
	}
	for _, p := range names {
		done, err := c.store.Runs(ctx, agentrunner.RunFilter{Pipeline: p, Status: agentrunner.RunCompleted, Limit: 1})
		if err != nil {
			return nil, err
		}
		if len(done) == 1 && !done[0].EndedAt.IsZero() {
			snap.success[p] = float64(done[0].EndedAt.UnixNano()) / 1e9
		}
	}
	return snap, nil
}

// totals are the ended runs of the configured pipelines: other pipeline
// names in the store (of a removed pipeline) would be series without end.
func (c *pipelineCollector) totals(ctx context.Context, names []string) ([]agentrunner.RunCount, error) {
	all, err := c.store.RunTotals(ctx)
	if err != nil {
		return nil, err
	}
	var out []agentrunner.RunCount
	for _, t := range all {
		if t.Status.Finished() && slices.Contains(names, t.Pipeline) {
			out = append(out, t)
		}
	}
	return out, nil
}

// states is each pipeline's state: halted when a run of it is halted,
// else paused when the workspace is, else running when a run of it is
// running or queued, else idle.
func states(pipelines []string, paused bool, unfinished []agentrunner.RunCount) map[string]string {
	out := map[string]string{}
	for _, p := range pipelines {
		out[p] = StateIdle
		if paused {
			out[p] = StatePaused
		}
	}
	for _, u := range unfinished {
		switch cur, ok := out[u.Pipeline]; {
		case !ok || u.N == 0:
		case u.Status == agentrunner.RunHalted:
			out[u.Pipeline] = StateHalted
		case cur == StateIdle:
			out[u.Pipeline] = StateRunning
		}
	}
	return out
}

// buildCollector is agentrunner_build_info.
type buildCollector BuildInfo

// Describe implements prometheus.Collector.
func (b buildCollector) Describe(ch chan<- *prometheus.Desc) { ch <- buildInfoDesc }

// Collect implements prometheus.Collector.
func (b buildCollector) Collect(ch chan<- prometheus.Metric) {
	ch <- prometheus.MustNewConstMetric(buildInfoDesc, prometheus.GaugeValue, 1, b.Version, b.Revision, b.GoVersion)
}

func b2f(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
