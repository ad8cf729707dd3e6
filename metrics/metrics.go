// Package metrics exposes agentrunner's Prometheus metrics (FR-066..069).
//
// Nearly everything is derived from the events the runner already records:
// feed each one to [Metrics.Observe] (the engine's OnEvent hook, the
// dispatcher's OnEvent, the graph scheduler's OnEvent and the tool
// executor's Record hook). What is a state rather than a happening, the
// circuit breakers, the outbox backlog and the waiting gates, is read when
// Prometheus scrapes.
//
// All metrics are named agentrunner_* and carry the constant label
// pipeline=<name>. They are on their own registry, with the Go runtime and
// process collectors, and served by [Metrics.Handler] in the Prometheus text
// format.
//
// Label values come from events, which come from agents and models that may
// misbehave, so they are bounded: a tool, agent, step, model, error_class,
// policy, run_pipeline or action value longer than 64 bytes or with a
// character outside [A-Za-z0-9_.:-] (models may also have "/") is reported
// as "other", and so is every new value of a label after its first 256
// distinct ones.
package metrics

import (
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"net/http"
	"slices"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/tool"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// eventEscalation is engine.EventEscalation: importing the engine for one
// string would tie this package to all of it.
const eventEscalation = "escalation"

// The graph scheduler's event types (scheduler.EventRunCompleted...),
// copied for the same reason.
const (
	eventRunCompleted  = "run.completed"
	eventRunFailed     = "run.failed"
	eventRunAborted    = "run.aborted"
	eventRunHalted     = "run.halted"
	eventRunIncomplete = "run.incomplete"
	eventGateDecided   = "gate.decided"
)

// DefaultBacklogTimeout bounds how long a scrape waits for the outbox
// backlog when Options does not say: Prometheus's own scrape timeout is 10s
// by default, and the other metrics must not be lost to a slow store.
const DefaultBacklogTimeout = 2 * time.Second

// Histogram buckets, in seconds.
var (
	// A cycle runs its whole pipeline: minutes to a day.
	cycleBuckets = []float64{30, 60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 28800, 43200, 86400}
	// One attempt of one step: seconds to hours.
	stepBuckets = []float64{1, 5, 10, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200, 14400}
	// One tool call: milliseconds to a minute.
	toolBuckets = []float64{.005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30, 60}
)

// Options configure Metrics.
type Options struct {
	// Pipeline is the value of the constant label pipeline on every
	// agentrunner_* metric; empty: no such label.
	Pipeline string
	// Tools returns the tool executor's statistics (tool.Executor.Stats),
	// for agentrunner_tool_breaker_state. Nil: no such metric.
	Tools func() map[string]tool.Stats
	// OutboxBacklog counts the outbox messages not delivered yet, for
	// agentrunner_outbox_backlog. Nil: no such metric.
	OutboxBacklog func(ctx context.Context) (int, error)
	// WaitingGates counts the gates of runs that wait for a decision, for
	// agentrunner_gates_waiting (read from the store rather than derived
	// from gate events: a gate of a run that is aborted ends without a
	// decision, and a restart would start the count at 0). Nil: no such
	// metric.
	WaitingGates func(ctx context.Context) (int, error)
	// BacklogTimeout bounds each OutboxBacklog and WaitingGates call;
	// default DefaultBacklogTimeout.
	BacklogTimeout time.Duration
	// Logger says why a scrape left a value out; default discards.
	Logger *slog.Logger
	// Store and Pipelines: the state, last success and ended runs of each
	// pipeline named are read from Store at each scrape
	// (agentrunner_pipeline_*), so they survive a restart. Nil Store: no
	// such metrics.
	Store     PipelineStore
	Pipelines []string
	// PipelineNames, if set, names the pipelines at each scrape instead
	// of Pipelines, so that the metrics follow a reload that adds or
	// removes one.
	PipelineNames func() []string
	// Build names the binary in agentrunner_build_info; zero: no such
	// metric.
	Build BuildInfo
}

// Metrics holds agentrunner's collectors on their own registry, so that
// they can be served and tested without the process-wide default registry.
// It is safe for concurrent use.
type Metrics struct {
	reg     *prometheus.Registry
	handler http.Handler
	labels  *limiter
	// own registers agentrunner's collectors, with the pipeline label.
	own prometheus.Registerer

	cycles        *prometheus.CounterVec
	cycleDuration *prometheus.HistogramVec
	stepOutcomes  *prometheus.CounterVec
	stepDuration  *prometheus.HistogramVec
	tokens        *prometheus.CounterVec
	retries       *prometheus.CounterVec
	toolCalls     *prometheus.CounterVec
	toolDuration  *prometheus.HistogramVec
	escalations   *prometheus.CounterVec
	resources     *prometheus.CounterVec
	backups       *prometheus.CounterVec
	runs          *prometheus.CounterVec
	transitions   *prometheus.CounterVec
	gateDecisions *prometheus.CounterVec
	signals       *prometheus.CounterVec
	confidence    *prometheus.HistogramVec
	// lastBackup has no labels; a vector so that it is absent until the
	// first backup, rather than a misleading 0.
	lastBackup *prometheus.GaugeVec
}

// New returns the metrics, registered. Each Metrics has its own registry:
// several may exist, in tests for one.
func New(opts Options) *Metrics {
	m := &Metrics{reg: prometheus.NewRegistry(), labels: newLimiter()}
	m.cycles = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrunner_cycles_total",
		Help: "Cycles that ended, by outcome (completed, failed, aborted).",
	}, []string{"outcome"})
	m.cycleDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentrunner_cycle_duration_seconds",
		Help:    "How long cycles ran, from start to end, by outcome.",
		Buckets: cycleBuckets,
	}, []string{"outcome"})
	m.stepOutcomes = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrunner_step_outcomes_total",
		Help: "Step attempts that ended, by outcome (succeeded, failed) and error class.",
	}, []string{"step", "agent", "outcome", "error_class"})
	m.stepDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentrunner_step_duration_seconds",
		Help:    "How long step attempts ran, by outcome (succeeded, failed).",
		Buckets: stepBuckets,
	}, []string{"step", "agent", "outcome"})
	m.tokens = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrunner_tokens_total",
		Help: "LLM tokens used by model agents, by direction (input, output).",
	}, []string{"agent", "model", "direction"})
	m.retries = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrunner_retries_total",
		Help: "Retries of step attempts scheduled after a retryable failure.",
	}, []string{"step", "agent"})
	m.toolCalls = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrunner_tool_calls_total",
		Help: "Tool calls by agents, by result (ok, error).",
	}, []string{"tool", "agent", "result"})
	m.toolDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentrunner_tool_call_duration_seconds",
		Help:    "How long tool calls took, retries included.",
		Buckets: toolBuckets,
	}, []string{"tool"})
	m.escalations = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrunner_escalations_total",
		Help: "Steps that failed for good and were escalated, by the policy applied (skip, halt, fail).",
	}, []string{"step", "policy"})
	m.resources = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrunner_resource_exhausted_total",
		Help: "Operations of the runner that failed because it ran out of a resource (file descriptors, disk space, memory, processes), and were tried again.",
	}, []string{"resource"})
	m.backups = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrunner_backups_total",
		Help: "Scheduled backups of the state database, by outcome (completed, failed).",
	}, []string{"outcome"})
	m.lastBackup = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "agentrunner_last_backup_timestamp_seconds",
		Help: "When the last scheduled backup of the state database that succeeded was taken (Unix time); absent before the first. Alert on its age.",
	}, nil)
	m.runs = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrunner_runs_ended_total",
		Help: "Runs of the graph scheduler that ended or halted, by their pipeline and status (completed, failed, aborted, halted).",
	}, []string{"run_pipeline", "status"})
	m.transitions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrunner_step_transitions_total",
		Help: "Step attempts of the graph scheduler's runs that ended, by the run's pipeline and outcome (succeeded, failed).",
	}, []string{"run_pipeline", "outcome"})
	m.gateDecisions = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrunner_gate_decisions_total",
		Help: "Decisions on gates of runs, by the run's pipeline and action (approve, reject, route).",
	}, []string{"run_pipeline", "action"})
	m.signals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "agentrunner_signals_total",
		Help: "SIGNAL BLOCKs of steps that route on them (spec 2), by the agent that signed them and their risk (low, medium, high).",
	}, []string{"agent", "risk"})
	m.confidence = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "agentrunner_signal_confidence",
		Help:    "The Confidence (1 to 5) of SIGNAL BLOCKs, by the agent that signed them.",
		Buckets: []float64{1, 2, 3, 4, 5},
	}, []string{"agent"})
	var own prometheus.Registerer = m.reg
	if opts.Pipeline != "" {
		// A label value must be UTF-8, or registration fails.
		own = prometheus.WrapRegistererWith(prometheus.Labels{"pipeline": strings.ToValidUTF8(opts.Pipeline, "\uFFFD")}, m.reg)
	}
	m.own = own
	own.MustRegister(m.cycles, m.cycleDuration, m.stepOutcomes, m.stepDuration, m.tokens,
		m.retries, m.toolCalls, m.toolDuration, m.escalations, m.resources, m.backups, m.lastBackup,
		m.runs, m.transitions, m.gateDecisions, m.signals, m.confidence)
	if opts.Tools != nil || opts.OutboxBacklog != nil || opts.WaitingGates != nil || opts.Store != nil {
		state := newStateCollector(opts)
		own.MustRegister(state)
		if opts.Store != nil {
			// Its samples name each pipeline, so not under the constant
			// label.
			m.reg.MustRegister(&pipelineCollector{store: opts.Store, pipelines: slices.Sorted(slices.Values(opts.Pipelines)), names: opts.PipelineNames, state: state})
		}
	}
	if opts.Build != (BuildInfo{}) {
		m.reg.MustRegister(buildCollector(opts.Build))
	}
	m.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))

	m.handler = promhttp.InstrumentMetricHandler(m.reg, promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		// One collector's failure must not hide every other metric; the
		// failures are counted in promhttp_metric_handler_errors_total.
		ErrorHandling: promhttp.ContinueOnError,
		Registry:      m.reg,
	}))
	return m
}

// Handler serves the metrics in the Prometheus text format, for /metrics.
func (m *Metrics) Handler() http.Handler { return m.handler }

// Registry is the registry the metrics are on, for tests and for adding
// collectors.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// Observe updates the metrics an event bears on. Events of other types are
// ignored, and so is every detail that is missing or of the wrong type (the
// event is still counted where it can be): events may come from a store
// written by an older version, or through JSON, where numbers are float64.
// It is safe for concurrent use and never panics.
func (m *Metrics) Observe(ev *agentrunner.Event) {
	if ev == nil {
		return
	}
	d := ev.Details
	switch ev.Type {
	case agentrunner.EventCycleCompleted:
		m.cycle("completed", d)
	case agentrunner.EventCycleFailed:
		m.cycle("failed", d)
	case agentrunner.EventCycleAborted:
		m.cycle("aborted", d)
	case agentrunner.EventAttemptSucceeded:
		m.attempt(ev, "succeeded", "")
		m.transition(d, "succeeded")
	case agentrunner.EventAttemptFailed, agentrunner.EventAttemptInterrupted:
		class, _ := d["error_class"].(string)
		m.attempt(ev, "failed", m.labels.value("error_class", class, names))
		m.transition(d, "failed")
	case eventRunCompleted, eventRunFailed, eventRunAborted, eventRunHalted, eventRunIncomplete:
		if p, ok := m.runPipeline(d); ok {
			m.runs.WithLabelValues(p, strings.TrimPrefix(ev.Type, "run.")).Inc()
		}
	case eventGateDecided:
		if p, ok := m.runPipeline(d); ok {
			action, _ := d["action"].(string)
			m.gateDecisions.WithLabelValues(p, m.labels.value("action", action, names)).Inc()
		}
	case agentrunner.EventSignal:
		m.signal(ev)
	case agentrunner.EventRetryScheduled:
		m.retries.WithLabelValues(m.step(ev), m.agent(ev)).Inc()
	case tool.EventToolCall:
		m.toolCall(ev)
	case eventEscalation:
		step := ev.Step
		if step == "" {
			step, _ = d["step"].(string)
		}
		policy, _ := d["policy"].(string)
		m.escalations.WithLabelValues(m.labels.value("step", step, names), m.labels.value("policy", policy, names)).Inc()
	case agentrunner.EventResourceExhausted:
		// Events name the resource for people ("disk space"); the label
		// is an identifier (disk_space).
		r, _ := d["resource"].(string)
		m.resources.WithLabelValues(m.labels.value("resource", strings.ReplaceAll(r, " ", "_"), names)).Inc()
	case agentrunner.EventBackupCompleted:
		m.backups.WithLabelValues("completed").Inc()
		m.lastBackup.WithLabelValues().Set(float64(ev.Timestamp.UnixNano()) / 1e9)
	case agentrunner.EventBackupFailed:
		m.backups.WithLabelValues("failed").Inc()
	}
}

func (m *Metrics) cycle(outcome string, d map[string]any) {
	m.cycles.WithLabelValues(outcome).Inc()
	if s, ok := seconds(d["duration_ms"]); ok {
		m.cycleDuration.WithLabelValues(outcome).Observe(s)
	}
}

func (m *Metrics) attempt(ev *agentrunner.Event, outcome, class string) {
	step, agent := m.step(ev), m.agent(ev)
	m.stepOutcomes.WithLabelValues(step, agent, outcome, class).Inc()
	if s, ok := seconds(ev.Details["duration_ms"]); ok {
		m.stepDuration.WithLabelValues(step, agent, outcome).Observe(s)
	}
	in, hasIn := count(ev.Details["input_tokens"])
	out, hasOut := count(ev.Details["output_tokens"])
	if !hasIn && !hasOut {
		return
	}
	name, _ := ev.Details["model"].(string)
	model := m.labels.value("model", name, modelNames)
	if hasIn {
		m.tokens.WithLabelValues(agent, model, "input").Add(in)
	}
	if hasOut {
		m.tokens.WithLabelValues(agent, model, "output").Add(out)
	}
}

func (m *Metrics) toolCall(ev *agentrunner.Event) {
	name, _ := ev.Details["tool"].(string)
	t := m.labels.value("tool", name, names)
	result := "ok"
	if isError, _ := ev.Details["is_error"].(bool); isError {
		result = "error"
	}
	m.toolCalls.WithLabelValues(t, m.agent(ev), result).Inc()
	if s, ok := seconds(ev.Details["duration_ms"]); ok {
		m.toolDuration.WithLabelValues(t).Observe(s)
	}
}

// transition counts an attempt of a run of the graph scheduler, whose
// events name the run's pipeline; the loop's do not.
func (m *Metrics) transition(d map[string]any, outcome string) {
	if p, ok := m.runPipeline(d); ok {
		m.transitions.WithLabelValues(p, outcome).Inc()
	}
}

// runPipeline is the pipeline a scheduler's event names, as a label
// value; false when the event names none.
func (m *Metrics) runPipeline(d map[string]any) (string, bool) {
	p, ok := d["pipeline"].(string)
	if !ok || p == "" {
		return "", false
	}
	return m.labels.value("run_pipeline", p, names), true
}

func (m *Metrics) step(ev *agentrunner.Event) string {
	return m.labels.value("step", ev.Step, names)
}

// signal counts a SIGNAL BLOCK by its agent and risk, and its confidence.
func (m *Metrics) signal(ev *agentrunner.Event) {
	risk, _ := ev.Details["risk"].(string)
	agent := m.agent(ev)
	m.signals.WithLabelValues(agent, m.labels.value("risk", risk, names)).Inc()
	if c, ok := count(ev.Details["confidence"]); ok {
		m.confidence.WithLabelValues(agent).Observe(c)
	}
}

func (m *Metrics) agent(ev *agentrunner.Event) string {
	return m.labels.value("agent", ev.Agent, names)
}

// seconds reads a duration in milliseconds as seconds.
func seconds(v any) (float64, bool) {
	ms, ok := count(v)
	return ms / 1000, ok
}

// count reads a non-negative number as the event carried it: int or int64
// as written, float64 after a JSON round trip. A negative, NaN or infinite
// one is refused: a counter cannot go down, and a histogram of it would lie.
func count(v any) (float64, bool) {
	var f float64
	switch n := v.(type) {
	case int:
		f = float64(n)
	case int64:
		f = float64(n)
	case int32:
		f = float64(n)
	case uint:
		f = float64(n)
	case uint64:
		f = float64(n)
	case uint32:
		f = float64(n)
	case float64:
		f = n
	case float32:
		f = float64(n)
	case json.Number:
		var err error
		if f, err = n.Float64(); err != nil {
			return 0, false
		}
	default:
		return 0, false
	}
	if f < 0 || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, false
	}
	return f, true
}
