package execution

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/webhook"
)

// WatchStore is what the watcher reads of the store: the newest strategy
// handed over and whether its expiry was flagged.
type WatchStore interface {
	Outbox(ctx context.Context, f agentrunner.OutboxFilter) ([]*agentrunner.OutboxMessage, error)
	Run(ctx context.Context, id string) (*agentrunner.Run, error)
	OutboxMessage(ctx context.Context, key string) (*agentrunner.OutboxMessage, error)
	Apply(ctx context.Context, ch *agentrunner.Change) error
}

// WatcherOptions wires a Watcher.
type WatcherOptions struct {
	Store WatchStore
	// Clock defaults to the system clock.
	Clock agentrunner.Clock
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Commit, if set, commits the watcher's changes in place of
	// Store.Apply.
	Commit func(ctx context.Context, ch *agentrunner.Change) error
	// Alert, if set, adds an operators' notification to a change (the
	// webhook, through the outbox); nil: operators are not notified.
	Alert func(ch *agentrunner.Change, ev webhook.Event)
}

// Watcher watches, beside the pipeline, what the Execution Service trades:
// the validity of the newest strategy (CheckStrategy) and the runner's
// liveness (Heartbeats).
type Watcher struct {
	opts  WatcherOptions
	clock agentrunner.Clock
	log   *slog.Logger
}

// NewWatcher returns the watcher for opts. Heartbeats need no store;
// CheckStrategy does.
func NewWatcher(opts WatcherOptions) *Watcher {
	w := &Watcher{opts: opts, clock: opts.Clock, log: opts.Logger}
	if w.clock == nil {
		w.clock = agentrunner.SystemClock{}
	}
	if w.log == nil {
		w.log = slog.New(slog.DiscardHandler)
	}
	return w
}

// CheckStrategy watches the validity window of the strategy the Execution
// Service trades: the newest one handed over (FR-052), by the window that
// cfg gives its step. When the window has ended, it flags the strategy
// once, with an event, a webhook and a safe-mode order to the Execution
// Service (FR-053/054), all through the outbox so each happens exactly
// once. It returns when the current strategy expires, zero when there is
// nothing left to watch.
func (w *Watcher) CheckStrategy(ctx context.Context, cfg *config.Config) (time.Time, error) {
	if w.opts.Store == nil {
		return time.Time{}, errors.New("strategy watcher: no store to read the strategy from")
	}
	latest, err := w.opts.Store.Outbox(ctx, agentrunner.OutboxFilter{Kind: OutboxStrategy, Delivered: true, Limit: 1})
	if err != nil || len(latest) == 0 {
		return time.Time{}, err
	}
	m := latest[0]
	sub, err := execsvc.ParseSubmission(m.Payload)
	if err != nil {
		return time.Time{}, fmt.Errorf("stored strategy %s: %w", m.Key, err)
	}
	parts := strings.SplitN(m.Key, "/", 3) // run/step/sha256
	pipeline, step, err := w.strategyStep(ctx, cfg, parts[0], parts[min(1, len(parts)-1)])
	if err != nil {
		return time.Time{}, err
	}
	if step == nil || step.Validity.Until == "" {
		return time.Time{}, nil // no validity window configured: nothing expires
	}
	until, err := validUntil(sub.Strategy, step.Validity)
	if err != nil {
		return time.Time{}, fmt.Errorf("stored strategy %s: %w", m.Key, err)
	}
	if w.clock.Now().Before(until) {
		return until, nil
	}
	return time.Time{}, w.flag(ctx, pipeline, step, sub, until)
}

// strategyStep finds the execution step that handed a strategy over: a
// step of the pipeline of its run (the learning loop's when the store no
// longer has the run).
func (w *Watcher) strategyStep(ctx context.Context, cfg *config.Config, runID, stepID string) (string, *config.Step, error) {
	pipeline := cfg.Name
	r, err := w.opts.Store.Run(ctx, runID)
	switch {
	case err == nil:
		pipeline = r.Pipeline
	case agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND:
		return "", nil, err
	}
	if p := cfg.Pipelines[pipeline]; p != nil {
		return pipeline, p.Steps[stepID], nil
	}
	return pipeline, cfg.Pipeline.Steps[stepID], nil
}

// flag records the expiry of the strategy sub, unless it is flagged
// already, and orders safe mode.
func (w *Watcher) flag(ctx context.Context, pipeline string, step *config.Step, sub execsvc.Submission, until time.Time) error {
	key := "safe-mode/" + execsvc.ReasonStrategyExpired + "/" + sub.SHA256
	if _, err := w.opts.Store.OutboxMessage(ctx, key); err == nil {
		return nil // already flagged
	} else if agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		return err
	}
	order, err := execsvc.SafeModeRequest{
		Reason: execsvc.ReasonStrategyExpired, StrategySHA256: sub.SHA256, ExpiredAt: until,
		Detail: fmt.Sprintf("the strategy of cycle %s was valid until %s and no newer strategy was handed over", sub.CycleID, until.Format(time.RFC3339)),
	}.Body()
	if err != nil {
		return err
	}
	now := w.clock.Now()
	ch := &agentrunner.Change{Outbox: []*agentrunner.OutboxMessage{{Key: key, Kind: OutboxSafeMode, CycleID: sub.CycleID, Payload: order, CreatedAt: now}}}
	ch.Events = append(ch.Events, &agentrunner.Event{Timestamp: now, Type: EventStrategyExpired, Step: step.ID, Agent: step.Agent, CycleID: sub.CycleID, Level: agentrunner.LevelError,
		Details: map[string]any{"strategy_sha256": sub.SHA256, "valid_until": until.Format(time.RFC3339), "safe_mode": true}})
	if w.opts.Alert != nil {
		w.opts.Alert(ch, webhook.Event{Kind: webhook.KindStrategyExpired, ID: "strategy_expired/" + sub.SHA256, Time: now, Pipeline: pipeline,
			CycleID: sub.CycleID, Step: step.ID, Details: map[string]any{"valid_until": until.Format(time.RFC3339), "strategy_sha256": sub.SHA256}})
	}
	if w.opts.Commit != nil {
		return w.opts.Commit(ctx, ch)
	}
	return w.opts.Store.Apply(ctx, ch)
}

// HeartbeatSender is the Execution Service as the dead man's switch sees it.
type HeartbeatSender interface {
	Heartbeat(ctx context.Context, runner string, interval time.Duration) (safeMode bool, err error)
}

var _ HeartbeatSender = (*execsvc.Client)(nil)

// Heartbeats tells the Execution Service the runner is alive every
// interval until ctx ends (FR-055/056): if the beats stop, the service
// enters safe mode by itself. A failed beat is logged and the next one
// goes out on time; the service's safe mode is logged when it changes.
func (w *Watcher) Heartbeats(ctx context.Context, s HeartbeatSender, runner string, interval time.Duration) {
	safe := false
	for {
		on, err := s.Heartbeat(ctx, runner, interval)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			w.log.Warn("heartbeat to the Execution Service failed", "error", err)
		case on != safe:
			safe = on
			if on {
				w.log.Error("the Execution Service is in safe mode", "runner", runner)
			} else {
				w.log.Info("the Execution Service left safe mode", "runner", runner)
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-w.clock.After(interval):
		}
	}
}
