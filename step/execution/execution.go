// Package execution is the execution step kind: one attempt of an
// execution step checks the strategy the pipeline produced, hands it to
// the Execution Service through the outbox with an idempotency key, and
// follows its status (callbacks and polls) until it is final or the
// step's time is up. Its Watcher watches the validity of the strategy the
// service trades (safe mode) and sends the runner's heartbeats. All that
// is particular to trading lives here, and the names it gives the outbox
// messages, events and commands it writes.
package execution

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/view"
	"github.com/agentrunner/agentrunner/workspace"
)

// Outbox message kinds of the Execution Service; their values are stored.
const (
	// OutboxStrategy hands a strategy to the Execution Service; the
	// execution step delivers it itself, the dispatcher leaves it alone.
	OutboxStrategy = "execution.strategy"
	// OutboxSafeMode tells the Execution Service to enter safe mode.
	OutboxSafeMode = "execution.safe_mode"
)

// Event types the kind and its watcher write; their values are stored.
const (
	// EventExecutionNotified: the service took the strategy (details: key,
	// strategy_id, status, sha256, replayed).
	EventExecutionNotified = "execution.notified"
	// EventExecutionStatus: the strategy's status changed (details:
	// strategy_id, status, source or final, detail).
	EventExecutionStatus = "execution.status"
	// EventStrategyExpired flags a strategy whose validity window ended
	// with no newer strategy (FR-053).
	EventStrategyExpired = "strategy.expired"
)

// CommandExecutionStatus is the command kind of the Execution Service's
// status callback about a strategy (args: strategy_id, status, error),
// which the execution step following that strategy consumes.
const CommandExecutionStatus = "execution.status"

// Service is what the kind needs of the Execution Service.
type Service interface {
	Submit(ctx context.Context, key string, s execsvc.Submission) (*execsvc.Receipt, error)
	Status(ctx context.Context, strategyID string) (*execsvc.Receipt, error)
}

var _ Service = (*execsvc.Client)(nil)

// Store is what the kind needs of the store: the step's earlier attempts
// (its deadline counts from the first), the outbox message of the hand-off
// and the pending status callbacks.
type Store interface {
	Attempts(ctx context.Context, cycleID string) ([]*agentrunner.Attempt, error)
	OutboxMessage(ctx context.Context, key string) (*agentrunner.OutboxMessage, error)
	RecordOutboxFailure(ctx context.Context, key, reason string, next time.Time) error
	// Files gives the committed copy of the artifact handed over.
	Files(ctx context.Context, f agentrunner.FileFilter) ([]*agentrunner.StoredFile, error)
	PendingCommands(ctx context.Context) ([]*agentrunner.Command, error)
	Apply(ctx context.Context, ch *agentrunner.Change) error
}

// Options wires the kind. A reload builds a new Kind with the new
// workspace; a Kind never changes.
type Options struct {
	// Workspace holds the pipeline, its contracts and the Execution
	// Service's settings.
	Workspace *workspace.Workspace
	Store     Store
	Service   Service
	// Clock defaults to the system clock.
	Clock agentrunner.Clock
	// Logger defaults to discarding.
	Logger *slog.Logger
	// Commit, if set, commits the kind's own changes (the hand-off, the
	// status changes) in place of Store.Apply.
	Commit func(ctx context.Context, ch *agentrunner.Change) error
	// Sleep, if set, waits between polls in place of the clock; it may end
	// early (to look at a callback) and fails when ctx ends.
	Sleep func(ctx context.Context, d time.Duration) error
	// Busy, if set, is told before each poll how long it may take, for a
	// watchdog.
	Busy func(d time.Duration)
	// Deliver, if set, adds the step's mailbox messages, with the outcome
	// as note, to the result: committed with the step's outcome, with
	// their events.
	Deliver func(res *agentrunner.StepResult, run *agentrunner.Run, step *config.Step, data []byte, note string) error
	// Views, if set, writes views in the background: the kind settles
	// the strategy's view before it reads it (view.Writer.Settle).
	Views *view.Writer
}

// Kind runs the attempts of execution steps.
type Kind struct {
	opts  Options
	ws    *workspace.Workspace
	cfg   *config.Config
	clock agentrunner.Clock
	log   *slog.Logger
}

var _ agentrunner.StepKind = (*Kind)(nil)

// New returns the kind for opts; Workspace, Store and Service are
// required.
func New(opts Options) (*Kind, error) {
	if opts.Workspace == nil || opts.Store == nil || opts.Service == nil {
		return nil, errors.New("execution step kind: a workspace, a store and the Execution Service are required")
	}
	k := &Kind{opts: opts, ws: opts.Workspace, cfg: opts.Workspace.Config, clock: opts.Clock, log: opts.Logger}
	if k.clock == nil {
		k.clock = agentrunner.SystemClock{}
	}
	if k.log == nil {
		k.log = slog.New(slog.DiscardHandler)
	}
	return k, nil
}

// Run hands the step's artifact, whose Config is its *config.Step, to the
// Execution Service and follows its status until it completes, fails, or
// the step's time runs out (FR-079..085): the step's timeout counted from
// its first attempt, across restarts, and never past a.Timeout from now.
// Whichever happens, the step succeeds with the outcome recorded, so the
// pipeline goes on to its evaluation; only a strategy that cannot be
// handed over at all fails it.
func (k *Kind) Run(ctx context.Context, a *agentrunner.StepAttempt) (*agentrunner.StepResult, error) {
	res := &agentrunner.StepResult{}
	begun := k.clock.Now()
	step, ok := a.Step.Config.(*config.Step)
	if !ok || step == nil {
		return res, agentrunner.Fail(agentrunner.ClassConfig, "step %s: an execution step's configuration is a *config.Step, not %T", a.Step.ID, a.Step.Config)
	}
	sub, err := k.submission(ctx, a, step, res)
	if err != nil {
		return res, err
	}
	key := fmt.Sprintf("%s/%s/%s", a.Run.ID, step.ID, sub.SHA256)
	receipt, err := k.notify(ctx, a.Run, step, key, sub)
	if err != nil {
		return res, err
	}
	started, err := k.stepStart(ctx, a.Run, step.ID)
	if err != nil {
		return res, err
	}
	deadline := started.Add(k.cfg.StepTimeout(step))
	if a.Timeout > 0 && begun.Add(a.Timeout).Before(deadline) {
		deadline = begun.Add(a.Timeout)
	}
	status, detail := k.follow(ctx, a.Run, step, receipt, deadline)
	if ctx.Err() != nil {
		return res, ctx.Err()
	}
	return res, k.finish(a.Run, step, receipt, status, detail, res)
}

// submission reads and checks the step's artifact and its validity
// window. It reads the store's copy, the committed bytes, and repairs the
// file in the run directory if it went stale (the repair's event goes
// into res).
func (k *Kind) submission(ctx context.Context, a *agentrunner.StepAttempt, step *config.Step, res *agentrunner.StepResult) (execsvc.Submission, error) {
	onRead := a.Views == agentrunner.ViewsOnRead
	data, repaired, err := view.Read(ctx, k.opts.Store, k.opts.Views, onRead, a.Run.ID, a.RunDir, step.Artifact, k.clock.Now())
	if repaired != nil {
		res.Events = append(res.Events, repaired)
	}
	if err == nil && data == nil {
		err = fmt.Errorf("the run has no %s", step.Artifact)
	}
	if err != nil {
		return execsvc.Submission{}, agentrunner.Fail(agentrunner.ClassInternal, "read %s: %v", step.Artifact, err)
	}
	// Validate again right before the handoff (FR-080): the file is what
	// gets traded, whatever happened to it since it was published.
	if producer := k.ws.Producer(step.Artifact); producer != nil && producer.Contract != nil {
		if err := artifact.Check(producer.Contract, step.Artifact, data); err != nil {
			return execsvc.Submission{}, agentrunner.Fail(agentrunner.ClassInvalidOutput, "%v", err)
		}
	}
	until, err := checkValidity(data, step.Validity)
	if err != nil {
		return execsvc.Submission{}, err
	}
	sub, err := execsvc.NewSubmission(a.Run.ID, data)
	if err != nil {
		return execsvc.Submission{}, agentrunner.Fail(agentrunner.ClassInvalidOutput, "%s: %v", step.Artifact, err)
	}
	sub.ValidUntil = until
	return sub, nil
}

// finish records the final status and delivers the step's messages, with
// the outcome as their note.
func (k *Kind) finish(run *agentrunner.Run, step *config.Step, r *execsvc.Receipt, status execsvc.Status, detail string, res *agentrunner.StepResult) error {
	level := agentrunner.LevelInfo
	if status != execsvc.StatusCompleted {
		level = agentrunner.LevelError
	}
	note := fmt.Sprintf("Execution of %s from cycle %s (strategy %s): %s", step.Artifact, run.ID, r.StrategyID, status)
	if detail != "" {
		note += ": " + detail
	}
	res.Events = append(res.Events, k.event(run, step, EventExecutionStatus, level, map[string]any{
		"strategy_id": r.StrategyID, "status": string(status), "final": true, "detail": detail,
	}))
	if k.opts.Deliver == nil {
		return nil
	}
	return k.opts.Deliver(res, run, step, nil, note)
}

// stepStart is when the first attempt of this step began; the step's
// deadline counts from it, across restarts.
func (k *Kind) stepStart(ctx context.Context, run *agentrunner.Run, step string) (time.Time, error) {
	atts, err := k.opts.Store.Attempts(ctx, run.ID)
	if err != nil {
		return time.Time{}, err
	}
	for _, a := range atts {
		if a.Step == step && !a.StartedAt.IsZero() {
			return a.StartedAt, nil
		}
	}
	return k.clock.Now(), nil
}

// event makes an event of the run's step.
func (k *Kind) event(run *agentrunner.Run, step *config.Step, typ string, level agentrunner.Level, details map[string]any) *agentrunner.Event {
	return &agentrunner.Event{Timestamp: k.clock.Now(), Type: typ, Step: step.ID, Agent: step.Agent, CycleID: run.ID, Level: level, Details: details}
}

// commit commits the kind's own change.
func (k *Kind) commit(ctx context.Context, ch *agentrunner.Change) error {
	if k.opts.Commit != nil {
		return k.opts.Commit(ctx, ch)
	}
	return k.opts.Store.Apply(ctx, ch)
}

// sleep waits d between polls.
func (k *Kind) sleep(ctx context.Context, d time.Duration) error {
	if k.opts.Sleep != nil {
		return k.opts.Sleep(ctx, d)
	}
	select {
	case <-ctx.Done():
	case <-k.clock.After(d):
	}
	return ctx.Err()
}

var _ agentrunner.CommandTaker = (*Kind)(nil)

// Takes reports that the kind's attempts take the Execution Service's
// status callbacks.
func (k *Kind) Takes(commandKind string) bool { return commandKind == CommandExecutionStatus }

// Stale is why a callback that came while no execution step ran has
// nothing to act on: it is late (the step ended on a poll or its timeout)
// or about no strategy of ours; it must not wait forever.
func (k *Kind) Stale(cmd *agentrunner.Command) string {
	return fmt.Sprintf("no strategy is being followed (callback about %v)", cmd.Args["strategy_id"])
}

var _ agentrunner.InputLister = (*Kind)(nil)

// Inputs names the artifact an execution step hands over.
func (k *Kind) Inputs(run *agentrunner.Run, st *agentrunner.Step) []string {
	if s, ok := st.Config.(*config.Step); ok && s != nil {
		return []string{filepath.Join(run.Dir, s.Artifact)}
	}
	return nil
}
