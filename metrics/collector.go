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

// sourceOutbox is the scrape error source of the outbox backlog.
const sourceOutbox = "outbox_backlog"

// breakerStates are the states a breaker gauge has a sample for.
var breakerStates = []string{tool.BreakerClosed, tool.BreakerOpen, tool.BreakerHalfOpen}

var (
	breakerDesc = prometheus.NewDesc("agentrunner_tool_breaker_state",
		"Circuit breaker state of each tool: 1 for the current state (closed, open, half-open), 0 for the others; for tool=\"other\" the number of such tools in each state.",
		[]string{"tool", "state"}, nil)
	backlogDesc = prometheus.NewDesc("agentrunner_outbox_backlog",
		"Outbox messages (mailbox, webhooks) not delivered yet.", nil, nil)
)

// stateCollector reads the gauges that are states rather than events, at
// scrape time.
type stateCollector struct {
	tools   func() map[string]tool.Stats
	backlog func(ctx context.Context) (int, error)
	timeout time.Duration
	errors  *prometheus.CounterVec // agentrunner_scrape_errors_total
	log     *slog.Logger
}

var _ prometheus.Collector = (*stateCollector)(nil)

func newStateCollector(opts Options) *stateCollector {
	c := &stateCollector{
		tools:   opts.Tools,
		backlog: opts.OutboxBacklog,
		timeout: opts.BacklogTimeout,
		log:     opts.Logger,
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
	if c.backlog != nil {
		// Present from the start, so that rate() sees the first error.
		c.errors.WithLabelValues(sourceOutbox)
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
		c.errors.Describe(ch)
	}
}

// Collect implements prometheus.Collector.
func (c *stateCollector) Collect(ch chan<- prometheus.Metric) {
	if c.tools != nil {
		c.collectBreakers(ch)
	}
	if c.backlog != nil {
		n, err := c.readBacklog()
		if err != nil {
			// A made-up value would be worse than a gap: leave the sample
			// out and count the failure where an alert can see it.
			c.errors.WithLabelValues(sourceOutbox).Inc()
			c.log.Warn("metrics: leaving the outbox backlog out of a scrape", "error", err)
		} else {
			ch <- prometheus.MustNewConstMetric(backlogDesc, prometheus.GaugeValue, float64(n))
		}
		// Collected here, after the read, so that a scrape that lacks the
		// backlog also shows the error that made it lack it.
		c.errors.Collect(ch)
	}
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

// readBacklog calls the backlog function with a timeout, and stops waiting
// at the timeout even if the function does not: a scrape must not hang on a
// stuck store.
func (c *stateCollector) readBacklog() (int, error) {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeout)
	defer cancel()
	type result struct {
		n   int
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
		n, err := c.backlog(ctx)
		done <- result{n, err}
	}()
	select {
	case r := <-done:
		if r.err != nil {
			return 0, fmt.Errorf("outbox backlog: %w", r.err)
		}
		if r.n < 0 {
			return 0, fmt.Errorf("outbox backlog: negative count %d", r.n)
		}
		return r.n, nil
	case <-ctx.Done():
		return 0, errors.New("outbox backlog: no answer within " + c.timeout.String())
	}
}
