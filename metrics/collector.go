package metrics

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sort"
	"time"

	"github.com/agentrunner/agentrunner/tool"
	"github.com/prometheus/client_golang/prometheus"
)

// Scrape error sources: the values read from the store at scrape time.
const (
	sourceOutbox       = "outbox_backlog"
	sourceWaitingGates = "waiting_gates"
)

// breakerStates are the states a breaker gauge has a sample for.
var breakerStates = []string{tool.BreakerClosed, tool.BreakerOpen, tool.BreakerHalfOpen}

var (
	breakerDesc = prometheus.NewDesc("agentrunner_tool_breaker_state",
		"Circuit breaker state of each tool: 1 for the current state (closed, open, half-open), 0 for the others; for tool=\"other\" the number of such tools in each state.",
		[]string{"tool", "state"}, nil)
	backlogDesc = prometheus.NewDesc("agentrunner_outbox_backlog",
		"Outbox messages (mailbox, webhooks) not delivered yet.", nil, nil)
	waitingGatesDesc = prometheus.NewDesc("agentrunner_gates_waiting",
		"Gates of runs that wait for a decision now.", nil, nil)
)

// stateCollector reads the gauges that are states rather than events, at
// scrape time.
type stateCollector struct {
	tools   func() map[string]tool.Stats
	backlog func(ctx context.Context) (int, error)
	gates   func(ctx context.Context) (int, error)
	timeout time.Duration
	// pipelines: the pipeline collector counts its errors here too.
	pipelines bool
	errors    *prometheus.CounterVec // agentrunner_scrape_errors_total
	log       *slog.Logger
}

var _ prometheus.Collector = (*stateCollector)(nil)

func newStateCollector(opts Options) *stateCollector {
	c := &stateCollector{
		tools:     opts.Tools,
		backlog:   opts.OutboxBacklog,
		gates:     opts.WaitingGates,
		timeout:   opts.BacklogTimeout,
		pipelines: opts.Store != nil,
		log:       opts.Logger,
		errors: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "agentrunner_scrape_errors_total",
			Help: "Scrapes that could not read a value, by source; the value's sample is left out of that scrape.",
		}, []string{"source"}),
	}
	if c.timeout <= 0 {
		c.timeout = DefaultBacklogTimeout
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	// Present from the start, so that rate() sees the first error.
	if c.backlog != nil {
		c.errors.WithLabelValues(sourceOutbox)
	}
	if c.gates != nil {
		c.errors.WithLabelValues(sourceWaitingGates)
	}
	if opts.Store != nil {
		c.errors.WithLabelValues(sourcePipelines)
	}
	return c
}

// Describe implements prometheus.Collector.
func (c *stateCollector) Describe(ch chan<- *prometheus.Desc) {
	if c.tools != nil {
		ch <- breakerDesc
	}
	if c.backlog != nil {
		ch <- backlogDesc
	}
	if c.gates != nil {
		ch <- waitingGatesDesc
	}
	if c.countsErrors() {
		c.errors.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	if c.tools != nil {
		c.collectBreakers(ch)
	}
	if c.backlog != nil {
		c.collectCount(ch, backlogDesc, sourceOutbox, "outbox backlog", c.backlog)
	}
	if c.gates != nil {
		c.collectCount(ch, waitingGatesDesc, sourceWaitingGates, "waiting gates", c.gates)
	}
	if c.countsErrors() {
		// Collected here, after the reads, so that a scrape that lacks a
		// value also shows the error that made it lack it.
		c.errors.Collect(ch)
	}
}

// countsErrors reports whether a read of the store can fail a scrape.
func (c *stateCollector) countsErrors() bool {
	return c.backlog != nil || c.gates != nil || c.pipelines
}

// collectCount sends the gauge desc of what read counts, or, when the
// read fails, counts the failure under source instead.
func (c *stateCollector) collectCount(ch chan<- prometheus.Metric, desc *prometheus.Desc, source, what string, read func(context.Context) (int, error)) {
	n, err := c.readCount(what, read)
	if err != nil {
		// A made-up value would be worse than a gap: leave the sample
		// out and count the failure where an alert can see it.
		c.errors.WithLabelValues(source).Inc()
		c.log.Warn("metrics: leaving the "+what+" out of a scrape", "error", err)
		return
	}
	ch <- prometheus.MustNewConstMetric(desc, prometheus.GaugeValue, float64(n))
}

// collectBreakers sends a sample per tool and state. Tool names are bounded
// as event labels are, except for the number of them (the executor knows
// only its configured tools and the ones agents called); tools that become
// "other" are added up, as two samples of one series would fail the scrape.
func (c *stateCollector) collectBreakers(ch chan<- prometheus.Metric) {
	counts := map[string]map[string]float64{}
	for name, s := range c.tools() {
		label := name
		if !names.valid(name) {
			label = Other
		}
		if counts[label] == nil {
			counts[label] = map[string]float64{}
		}
		counts[label][s.BreakerState]++
	}
	tools := make([]string, 0, len(counts))
	for name := range counts {
		tools = append(tools, name)
	}
	sort.Strings(tools)
	for _, name := range tools {
		for _, state := range breakerStates {
			ch <- prometheus.MustNewConstMetric(breakerDesc, prometheus.GaugeValue, counts[name][state], name, state)
		}
	}
}

// readCount calls read (what it counts) within the timeout, refusing a
// negative count.
func (c *stateCollector) readCount(what string, read func(context.Context) (int, error)) (int, error) {
	n, err := readWithin(c.timeout, what, read)
	if err == nil && n < 0 {
		return 0, fmt.Errorf("%s: negative count %d", what, n)
	}
	return n, err
}

// readWithin calls read (of what) with a timeout, and stops waiting at the
// timeout even if read does not: a scrape must not hang on a stuck store.
func readWithin[T any](timeout time.Duration, what string, read func(context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	type result struct {
		v   T
		err error
	}
	done := make(chan result, 1) // buffered: a late answer must not block
	go func() {
		// A panic here would end the process: nothing up the stack of
		// this goroutine could recover it.
		defer func() {
			if p := recover(); p != nil {
				done <- result{err: fmt.Errorf("panic: %v", p)}
			}
		}()
		v, err := read(ctx)
		done <- result{v, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			var zero T
			return zero, fmt.Errorf("%s: %w", what, r.err)
		}
		return r.v, nil
	case <-ctx.Done():
		var zero T
		return zero, errors.New(what + ": no answer within " + timeout.String())
	}
}
