// Package scheduler runs pipelines as durable graphs of step runs: many
// runs of many pipelines at once, in one process, on one store.
//
// One goroutine owns the state of every unfinished run. Workers run the
// attempts of step runs (each through its step kind) and send back what
// they produced; the scheduler turns each outcome into a change (the
// attempt closed, the successors chosen by the edges opened, the events and
// outbox messages written) and commits every change that arrived together
// in one transaction: a group commit, so a thousand runs in flight cost one
// fsync per batch, not one per transition. Each run's share of a batch
// stands on its own (group.go): the store refuses a share whose guard
// failed, because something else moved the store on, and commits the
// rest. Only after the commit does it start the attempts the batch opened,
// so nothing runs that the store does not know about.
//
// A crash at any moment loses nothing: on start the scheduler reads the
// unfinished runs back, records the attempts that were running as
// interrupted and runs them again under a new attempt number. A step run
// whose success was committed is never run again.
package scheduler

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/eventlog"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/route"
	"github.com/agentrunner/agentrunner/view"
	"github.com/agentrunner/agentrunner/webhook"
)

// Store is what the scheduler needs of the store.
type Store interface {
	agentrunner.RunStore
	Attempts(ctx context.Context, runID string) ([]*agentrunner.Attempt, error)
	PendingCommands(ctx context.Context) ([]*agentrunner.Command, error)
	// Control is the workspace's pause, read back at a start.
	Control(ctx context.Context) (*agentrunner.Control, error)
	// Events gives the newest event at a start: the time of the last
	// commit, from which the views to check are found.
	Events(ctx context.Context, f agentrunner.EventFilter) ([]*agentrunner.Event, error)
	// Mailbox gives the messages the mailbox files are views of.
	agentrunner.MailStore
}

// Options wire a scheduler.
type Options struct {
	Store Store
	// Pipelines are the graphs it runs, by name; each was checked by
	// graph.Check.
	Pipelines map[string]*agentrunner.Pipeline
	// Kinds run the attempts of steps, by step kind.
	Kinds map[string]agentrunner.StepKind
	// RunDir is the directory of a run; AttemptDir the scratch folder of
	// attempt n of a step of a run.
	RunDir     func(pipeline, id string) string
	AttemptDir func(runID, step string, n int) string
	// ArchivePath, if set, is where a run's archive would be: an id whose
	// archive exists is not given to a new run.
	ArchivePath func(pipeline, id string) string
	// MaxAttempts bounds the attempts running at once, across every run
	// and pipeline; 0 means 64.
	MaxAttempts int
	// Clock defaults to the system clock.
	Clock  agentrunner.Clock
	Logger *slog.Logger
	// OnEvent, if set, is called with each event once it is committed.
	OnEvent func(*agentrunner.Event)
	// Poll is how often commands are looked for without a Wake; 0 means 1s.
	Poll time.Duration
	// MaxInterruptions bounds how often one step run may be interrupted by
	// the runner stopping before it fails for good; 0 means 10. An
	// interruption is not the step's fault, so it costs no retry, but a
	// step that kills the runner each time must not loop forever.
	MaxInterruptions int
	// Reload, if set, reads the configuration again for an operator's
	// reload command; an error refuses the reload, saying why, and
	// nothing changes. nil: reloads are refused.
	Reload func() (*Reloaded, error)
	// Alert, if set, adds an operators' notification (a step that failed
	// for good, a halted run resumed) to the change that records what it
	// is about: the outbox delivers it. Nil: no notifications.
	Alert func(ch *agentrunner.Change, ev webhook.Event)
	// Inject, if set, makes the deposit of an inject command's message
	// (args agent, message) into the agent's mailbox, with the event that
	// says so (EventInjected) and the command's result: all committed in
	// the transaction that consumes the command, so the message is
	// delivered once; the mailbox's file is written after the commit. An
	// EINVALID error (no such agent) ignores the command with its message;
	// another error leaves the command pending for the next look. Without
	// Inject, inject commands are ignored.
	Inject func(ctx context.Context, cmd *agentrunner.Command) (*Injection, error)
	// Mailboxes, if set, are the agents' mailbox files, views of the
	// store's messages: the deposits of a step's result and of an inject
	// command are committed with them, and the files they touch written
	// after each commit.
	Mailboxes *mailbox.Mailboxes
	// Agents are the agents whose mailbox files the start checks against
	// the store (and imports into it, from a workspace whose mailboxes
	// were files before the store kept them).
	Agents []string
	// Views, if set, writes the views of committed artifacts and the
	// mailbox files in the background, off the next step's path; the
	// step kinds settle a view before they read it. Run writes what is
	// pending before it returns. Nil: each is written after its commit.
	Views *view.Writer
	// BeforeViews, if set, is called after each commit that has views to
	// write, before they are written. It is for tests, which kill the
	// process there to show that the store's copies restore the views.
	BeforeViews func()
	// Followers keep what follows the runs of a pipeline outside the
	// store (its document), by pipeline name: each is called after every
	// commit that changed one of the pipeline's runs, before the attempts
	// the commit opened start, and at the start for the newest runs.
	Followers map[string]agentrunner.RunFollower
	// ShutdownGrace, if set, is how long the running attempts may finish
	// once Run's context ends with agentrunner.ErrShutdown, read when the
	// shutdown begins (a reload may change it); then they are interrupted
	// and recorded as shut down (agentrunner.ClassShutdown). Nil or 0:
	// they are interrupted at once. Any other end of the context stops
	// the scheduler as a crash would: the next start finds the running
	// attempts interrupted.
	ShutdownGrace func() time.Duration
	// Heartbeat, if set, is beaten while the scheduler runs, and read at
	// a start to date the end of the attempts a crash left running.
	Heartbeat Heartbeat
	// ViewsChecked, if set, is shared by the schedulers of one process:
	// the first one checks the views at its start and sets it, the others
	// skip the check. Nil: check at every start.
	ViewsChecked *atomic.Bool
}

// Stats counts what a scheduler did, for benchmarks and metrics.
type Stats struct {
	// Transitions are committed step-run outcomes and openings.
	Transitions int64
	// Commits are store transactions (group commits).
	Commits int64
}

// Scheduler runs the step runs of every unfinished run.
type Scheduler struct {
	opts    Options
	store   Store
	clock   agentrunner.Clock
	log     *slog.Logger
	labels  map[*agentrunner.Step]*route.Extractor
	results chan *result
	wake    chan struct{}
	workers sync.WaitGroup
	stats   struct{ transitions, commits atomic.Int64 }
	running atomic.Bool
	awaited *commandResults
	// starts are runs asked for by Start, handled by the loop.
	starts chan *startRequest
	// slotRequests are the workers' agentrunner.Waiting, for the loop.
	slotRequests chan slotRequest
	// settled is closed after the first pass (see Ready).
	settled     chan struct{}
	settledOnce sync.Once
	watch       watch
	// graphsMu guards opts.Pipelines and kept, which a reload replaces,
	// for the readers outside the loop (StartChild, Pipelines,
	// RunPipeline); the loop, their only writer, reads them without it.
	graphsMu sync.RWMutex
	// kept are the graphs of the unfinished runs that a reload left on
	// the graph they began on (runState.frozen), by run id.
	kept map[string]*agentrunner.Pipeline
	// The fields below belong to the goroutine of Run.
	// docs are the documents the followers keep, by pipeline.
	docs     map[string]agentrunner.DocumentSpec
	runs     map[string]*runState
	halted   map[string]*runState   // waiting for an operator to resume them
	queued   map[string][]*runState // by pipeline, oldest first
	active   map[string]int         // unfinished runs started, by pipeline
	ready    []*task                // attempts waiting for a free slot
	starting []*task                // attempts the last commit recorded running
	delayed  []*task                // attempts waiting for their backoff
	slots    int
	ids      *idAllocator
	// yielded are the running attempts that gave their slot back while
	// they wait on other runs (agentrunner.Waiting); resuming, those of
	// them that want one again, oldest first.
	yielded  map[*stepState]bool
	resuming []slotRequest
	// timed are the waiting gates that have a timeout, with their runs; a
	// gate decided or canceled since (its deadline cleared) is dropped
	// when next looked at.
	timed map[*stepState]*runState
	// scheduled are the pipelines with a schedule, by name; due is when
	// each one's next run starts; looked are those whose first look
	// (which catches up on the fire times missed while the runner was
	// down) is done; started is when each pipeline's newest run started.
	scheduled []*agentrunner.Pipeline
	due       map[string]time.Time
	looked    map[string]bool
	started   map[string]time.Time
	batch     *batch
	stopping  bool

	// bounds are the running runs that have a deadline (MaxDuration), with
	// it; see deadline.go.
	bounds map[*runState]time.Time
	// control is the workspace's pause.
	control agentrunner.Control
	// behind are the runs whose follower failed: their attempts wait.
	behind map[string]bool

	// inflight counts the attempts whose workers run.
	inflight int
	// draining: a shutdown began, no attempt starts; interrupted: its
	// grace is over, the running attempts were told to stop.
	draining, interrupted bool
	// hurry is closed by Hurry.
	hurry     chan struct{}
	hurryOnce sync.Once
	// born is when the scheduler was made: events from then on are this
	// process's. beaten is the last heartbeat; beatFailed: one failed.
	born       time.Time
	beaten     time.Time
	beatFailed bool
}

// New checks the options and returns a scheduler.
func New(opts Options) (*Scheduler, error) {
	if opts.Store == nil || opts.RunDir == nil || opts.AttemptDir == nil {
		return nil, errors.New("scheduler: a store, RunDir and AttemptDir are required")
	}
	s := &Scheduler{
		opts: opts, clock: opts.Clock, log: opts.Logger,
		labels: map[*agentrunner.Step]*route.Extractor{}, wake: make(chan struct{}, 1), starts: make(chan *startRequest), settled: make(chan struct{}), awaited: newCommandResults(), timed: map[*stepState]*runState{}, due: map[string]time.Time{}, looked: map[string]bool{}, started: map[string]time.Time{},
		runs: map[string]*runState{}, halted: map[string]*runState{}, queued: map[string][]*runState{}, active: map[string]int{},
		behind: map[string]bool{}, hurry: make(chan struct{}), kept: map[string]*agentrunner.Pipeline{}, docs: map[string]agentrunner.DocumentSpec{},
	}
	for _, name := range slices.Sorted(maps.Keys(opts.Pipelines)) {
		p := opts.Pipelines[name]
		if err := compile(p, opts.Kinds, s.labels); err != nil {
			return nil, err
		}
		if p.Scheduled() {
			s.scheduled = append(s.scheduled, p)
		}
		if p.Document != nil {
			s.docs[name] = *p.Document
		}
	}
	if s.clock == nil {
		s.clock = agentrunner.SystemClock{}
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.opts.MaxAttempts <= 0 {
		s.opts.MaxAttempts = 64
	}
	if s.opts.Poll <= 0 {
		s.opts.Poll = time.Second
	}
	if s.opts.MaxInterruptions <= 0 {
		s.opts.MaxInterruptions = 10
	}
	s.store = &watchedStore{Store: opts.Store, s: s}
	s.watch.due = map[*agentrunner.StepAttempt]time.Time{}
	s.slots = s.opts.MaxAttempts
	// Room for the workers holding a slot and as many again waiting with
	// theirs given back. Past that a worker's send waits for the loop,
	// which takes results at every pass and while it shuts down.
	s.results = make(chan *result, 2*s.opts.MaxAttempts)
	s.slotRequests = make(chan slotRequest, 4*s.opts.MaxAttempts)
	s.yielded = map[*stepState]bool{}
	s.ids = newIDAllocator(s.store, s.clock)
	s.born = s.clock.Now()
	return s, nil
}

// compile checks that every step of p has a kind among kinds and
// compiles its label source into labels.
func compile(p *agentrunner.Pipeline, kinds map[string]agentrunner.StepKind, labels map[*agentrunner.Step]*route.Extractor) error {
	for _, st := range p.Steps {
		if kinds[st.Kind] == nil {
			return fmt.Errorf("scheduler: pipeline %s, step %s (%s): no step kind %q is registered", p.Name, st.ID, st.Where, st.Kind)
		}
		if st.Label == nil {
			continue
		}
		x, err := route.Compile(st.Label)
		if err != nil {
			return fmt.Errorf("scheduler: pipeline %s, step %s (%s): %w", p.Name, st.ID, st.Where, err)
		}
		labels[st] = x
	}
	return nil
}

// Stats returns what the scheduler did so far.
func (s *Scheduler) Stats() Stats {
	return Stats{Transitions: s.stats.transitions.Load(), Commits: s.stats.commits.Load()}
}

// Wake makes the scheduler look at new commands at once (a run started, a
// gate decided) instead of at its next poll: the API calls it after
// writing a command.
func (s *Scheduler) Wake() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// Run runs step runs until ctx ends. When it ends with
// agentrunner.ErrShutdown, Run shuts down: the running attempts may finish
// within Options.ShutdownGrace, then the rest are interrupted and recorded
// as shut down (see shutdown). When it ends otherwise, Run stops the
// running attempts and returns, leaving them recorded running, for the
// next start to find interrupted as after a crash. Either way it returns
// nil; any other error means the scheduler cannot go on (the store
// failed) and the process should exit so a supervisor restarts it.
func (s *Scheduler) Run(ctx context.Context) error {
	if !s.running.CompareAndSwap(false, true) {
		return errors.New("scheduler: already running")
	}
	workCtx, stopWork := context.WithCancelCause(context.WithoutCancel(ctx))
	defer func() {
		stopWork(context.Canceled)
		s.workers.Wait()
		s.opts.Views.Flush()
		s.running.Store(false)
	}()
	err := s.loop(ctx, workCtx)
	if ctx.Err() == nil {
		return err
	}
	if agentrunner.Shutdown(ctx) {
		return s.shutdown(ctx, stopWork)
	}
	return nil
}

// loop runs passes until ctx ends. A pass, once begun, runs to its
// commit whatever happens to ctx (pass is not canceled): the scheduler's
// memory then matches the store, which a shutdown goes on from.
func (s *Scheduler) loop(ctx, workCtx context.Context) error {
	if err := s.recover(ctx); err != nil {
		return err
	}
	pass := context.WithoutCancel(ctx)
	commandsDue := true
	for {
		s.dispatch(workCtx)
		var first *result
		var req *startRequest
		if !commandsDue {
			timer, stop := s.nextTimer()
			select {
			case <-ctx.Done():
				stop()
				return ctx.Err()
			case first = <-s.results:
			case <-s.wake:
				commandsDue = true
			case req = <-s.starts:
			case q := <-s.slotRequests:
				s.slotRequest(q)
			case <-timer:
				commandsDue = true // the poll, and due backoffs and gates
			}
			stop()
		}
		s.batch = newBatch()
		// Commands first: a pause holds the attempts this pass opens.
		if commandsDue {
			if err := s.commands(pass); err != nil {
				return err
			}
			commandsDue = false
		}
		if first != nil {
			s.handle(first)
		}
		s.drain()
		s.drainSlotRequests()
		if req != nil {
			if err := s.start(pass, req); err != nil {
				return err
			}
		}
		s.timers()
		s.overdueRuns()
		if err := s.schedules(pass); err != nil {
			return err
		}
		if err := s.commit(pass); err != nil {
			return err
		}
		if req != nil {
			req.reply <- req.id
		}
		s.beat()
		s.settledOnce.Do(func() { close(s.settled) })
	}
}

// report logs the events of a committed change and hands them to OnEvent.
func (s *Scheduler) report(ch *agentrunner.Change) {
	for _, ev := range ch.Events {
		eventlog.Write(s.log, ev)
		if s.opts.OnEvent != nil {
			s.opts.OnEvent(ev)
		}
	}
}

// committed reports what the units the store committed did (their events,
// the results of the commands they consumed), and drops those it refused.
func (s *Scheduler) committed(us []*unit, errs []error) {
	var consumed []*agentrunner.Command
	n := 0
	for i, u := range us {
		if errs[i] != nil {
			s.refused(u, errs[i])
			continue
		}
		n++
		s.stats.transitions.Add(int64(u.transitions))
		s.report(u.ch)
		consumed = append(consumed, u.ch.Consumed...)
	}
	if n > 0 {
		s.stats.commits.Add(1)
	}
	s.awaited.publish(consumed)
}

// Ready is closed once Run has read the unfinished runs back and applied
// the commands that were pending when it started (those it applies at
// once: a force-cycle waits while paused, and a step kind's commands wait
// for its attempts).
func (s *Scheduler) Ready() <-chan struct{} { return s.settled }

// drain handles every result that is already there, so they commit
// together.
func (s *Scheduler) drain() {
	for {
		select {
		case r := <-s.results:
			s.handle(r)
		default:
			return
		}
	}
}

// nextTimer returns a channel that fires at the next due time: the poll,
// or earlier a backoff's or a gate's end.
//
// On the system clock, and on a SteppedClock, the poll is real time:
// commands come from other processes (the CLI) in real time. Due times
// are on the scheduler's clock. A SteppedClock is waited on only when no
// attempt runs.
func (s *Scheduler) nextTimer() (<-chan time.Time, func()) {
	switch s.clock.(type) {
	case agentrunner.SystemClock:
	case agentrunner.SteppedClock:
		poll := time.NewTimer(s.opts.Poll)
		due, ok := s.nextDue()
		if !ok || s.inflight > 0 || s.slots < s.opts.MaxAttempts {
			return poll.C, func() { poll.Stop() }
		}
		fired, stopped := make(chan time.Time, 1), make(chan struct{})
		go func() {
			select {
			case t := <-s.clock.After(max(due.Sub(s.clock.Now()), 0)):
				fired <- t
			case t := <-poll.C:
				fired <- t
			case <-stopped:
			}
		}()
		return fired, func() { poll.Stop(); close(stopped) }
	default: // a test's clock with timers of its own: poll on it too
		return s.clock.After(max(s.untilDue(), 0)), func() {}
	}
	t := time.NewTimer(max(s.untilDue(), 0))
	return t.C, func() { t.Stop() }
}

// untilDue is the time until the poll, or sooner what is due.
func (s *Scheduler) untilDue() time.Duration {
	wait := s.opts.Poll
	if due, ok := s.nextDue(); ok {
		wait = min(wait, due.Sub(s.clock.Now()))
	}
	return wait
}

// nextDue is the earliest time something is due: a backoff's end, a
// gate's timeout, a scheduled run.
func (s *Scheduler) nextDue() (time.Time, bool) {
	var due time.Time
	earliest := func(t time.Time) {
		if due.IsZero() || t.Before(due) {
			due = t
		}
	}
	for _, t := range s.delayed {
		earliest(t.att.NotBefore)
	}
	for ss := range s.timed {
		if !ss.deadline.IsZero() {
			earliest(ss.deadline)
		}
	}
	for _, at := range s.due {
		earliest(at)
	}
	for _, d := range s.bounds {
		if !s.control.Paused {
			earliest(d) // a run's deadline
		}
	}
	return due, !due.IsZero()
}

// commit writes the batch's changes in one transaction, then reports its
// events and starts what it opened. The batch is committed in units (see
// units): a unit the store refuses is dropped (refused), and the others
// go on.
func (s *Scheduler) commit(ctx context.Context) error {
	s.assign()
	b := s.batch
	if len(b.changes) == 0 {
		return nil
	}
	us := b.units()
	errs, err := s.applyGroup(ctx, us)
	if err != nil {
		return fmt.Errorf("commit %d state changes: %w", len(b.changes), err)
	}
	// Followers first, and to the end: whoever hears of a run's end from
	// its events finds its document archived.
	s.makeDirs(us, errs)
	s.follow(context.WithoutCancel(ctx), us, errs)
	s.committed(us, errs)
	s.writeViews(b.views)
	s.syncMailboxes(ctx, b.mail)
	s.starting = append(s.starting, b.run...)
	s.delayed = append(s.delayed, b.delay...)
	return nil
}
