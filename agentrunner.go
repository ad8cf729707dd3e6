// Package agentrunner holds the domain of agentrunner: the types every other
// package speaks (cycles, attempts, events, invocations), the small interfaces
// that connect them (Store, Runtime, Clock) and the one error type.
//
// agentrunner drives pipelines of LLM agents deterministically and durably:
// it assembles each agent's context, runs the agent, validates its output
// artifact, moves messages between agents and records every state change in
// one transaction, so a crash at any moment resumes where it stopped.
//
// Sub-packages implement these interfaces, one per dependency (sqlite,
// runtime/process, execsvc …); cmd/agentrunner wires them together.
package agentrunner

import (
	"context"
	"time"
)

// State is where the loop of a pipeline is. Besides the two states below,
// the state while a cycle runs is the id of the pipeline step being run
// ("plan", "research" …), so a pipeline's states are exactly its graph.
type State string

const (
	// StateIdle is the state before the first cycle of a workspace.
	StateIdle State = "Idle"
	// StateWaiting is the state between cycles (FR-001 WaitingForNextCycle).
	StateWaiting State = "WaitingForNextCycle"
	// StateHalted: a step failed for good under the halt policy; the loop
	// waits for an operator to resume it.
	StateHalted State = "Halted"
)

// IsStep reports whether s names a pipeline step: not empty and not one
// of the states above, whose names steps may not take.
func (s State) IsStep() bool {
	return s != "" && s != StateIdle && s != StateWaiting && s != StateHalted
}

// RunStatus is the outcome of a run so far. CycleStatus is its name for
// the cycles of the learning loop.
type RunStatus string

// CycleStatus is the status of a cycle: a cycle is a run.
type CycleStatus = RunStatus

// RunQueued: the run was started but waits for a free place under its
// pipeline's max_concurrent_runs; no step of it has run.
const RunQueued RunStatus = "queued"

const (
	// CycleRunning: the cycle has a current step and is not finished.
	CycleRunning CycleStatus = "running"
	// CycleCompleted: every step of the pipeline succeeded.
	CycleCompleted CycleStatus = "completed"
	// CycleFailed: a step failed beyond its retry policy (escalation policy
	// fail); the loop goes on with the next scheduled cycle.
	CycleFailed CycleStatus = "failed"
	// CycleHalted: a step failed for good under the halt policy; the cycle
	// waits, at that step, for an operator to resume it.
	CycleHalted CycleStatus = "halted"
	// CycleAborted: an operator ended the cycle.
	CycleAborted CycleStatus = "aborted"
	// CycleIncomplete: a loop of the run reached its cap (max_visits,
	// on_cap: end) before the run reached its end; the run is over, with
	// what its steps committed kept.
	CycleIncomplete CycleStatus = "incomplete"
)

// Run statuses under their general names; the Cycle names above are the
// same values.
const (
	RunRunning    = CycleRunning
	RunCompleted  = CycleCompleted
	RunFailed     = CycleFailed
	RunHalted     = CycleHalted
	RunAborted    = CycleAborted
	RunIncomplete = CycleIncomplete
)

// Finished reports whether a cycle with this status will run no more steps.
func (s CycleStatus) Finished() bool {
	return s == CycleCompleted || s == CycleFailed || s == CycleAborted || s == CycleIncomplete
}

// Cycle is a run of the learning loop: its id is the UTC start time as
// YYYYMMDD_HHMMSS and its directory cycles/<ID>/.
type Cycle = Run

// Run is one execution of a pipeline, with its own directory. Run ids are
// unique in a workspace, whatever the pipeline, so a run id alone names a
// run everywhere (API paths, events, outbox keys).
type Run struct {
	// ID is the run's id in its pipeline's format (Pipeline.RunID).
	ID       string
	Pipeline string
	Status   RunStatus
	// Step is the step a serial run of the loop engine is at (or halted
	// at) while it is unfinished, else empty. Runs of the graph scheduler
	// may be at several steps at once: their step runs say where.
	Step              string
	LastCompletedStep string
	// Dir is the absolute path of the cycle directory.
	Dir       string
	StartedAt time.Time
	EndedAt   time.Time // zero while running
	// Error says why a failed cycle failed.
	Error string
	// Inputs are the run's input variables (POST /api/pipelines/{name}/runs,
	// agentrunner start --input k=v), checked against the pipeline's schema.
	Inputs map[string]any
	// Parent is the run that started this one (a sub-agent's run), if any.
	Parent string
	// Serial: at most one unfinished (running or halted) run of its
	// pipeline at a time, which the store enforces; the learning loop's
	// cycles are serial.
	Serial bool
}

// State returns the loop state this cycle puts the pipeline in.
func (c *Cycle) State() State {
	switch c.Status {
	case CycleRunning:
		return State(c.Step)
	case CycleHalted:
		return StateHalted
	}
	return StateWaiting
}

// AttemptStatus is the status of one attempt.
type AttemptStatus string

const (
	// AttemptPending: scheduled, waiting for NotBefore (a retry backoff).
	AttemptPending AttemptStatus = "pending"
	// AttemptRunning: started and not finished. Found at startup, it means
	// the runner died during the attempt; recovery marks it interrupted.
	AttemptRunning AttemptStatus = "running"
	// AttemptSucceeded: the step's output was validated and published.
	AttemptSucceeded AttemptStatus = "succeeded"
	// AttemptFailed: see ErrorClass and Error.
	AttemptFailed AttemptStatus = "failed"
)

// Attempt is one try of one step in one cycle.
type Attempt struct {
	CycleID string
	Step    string
	Number  int // 1-based
	// Visit is the step run the attempt belongs to: the how-manieth visit
	// of Step in the run (1 unless the step is on a loop). Attempt numbers
	// go on counting across visits, so (run, step, number) stays unique.
	Visit  int
	Agent  string
	Status AttemptStatus
	// ErrorClass and Error say why a failed attempt failed.
	ErrorClass ErrorClass
	Error      string
	// NotBefore is when a pending attempt may start.
	NotBefore time.Time
	StartedAt time.Time
	EndedAt   time.Time
	// ExitCode is the agent process's exit code, when there was a process.
	ExitCode *int
	// OutputPath is where the accepted artifact was published.
	OutputPath string
	// Dir is the attempt's scratch folder (prompt, logs, raw output).
	Dir string
	// Usage is what a model agent spent.
	Usage Usage
	// RetryBase is the attempt number retries are counted from: 0, or the
	// last attempt before an operator resumed the step, which gives the
	// step a new round of retries.
	RetryBase int
}

// Level is the severity of an event.
type Level string

// Event levels.
const (
	LevelDebug Level = "debug"
	LevelInfo  Level = "info"
	LevelWarn  Level = "warn"
	LevelError Level = "error"
)

// Event is an append-only record of something the runner did (FR-057).
type Event struct {
	ID        int64
	Timestamp time.Time
	Type      string
	Agent     string
	Step      string
	CycleID   string
	Level     Level
	// Details is a JSON-encodable map; stored as a JSON object.
	Details map[string]any
}

// Event types written by the engine.
const (
	EventRunnerStarted      = "runner.started"
	EventCycleStarted       = "cycle.started"
	EventCycleCompleted     = "cycle.completed"
	EventCycleFailed        = "cycle.failed"
	EventCycleAborted       = "cycle.aborted"
	EventCycleHalted        = "cycle.halted"
	EventTransition         = "state.transition"
	EventAttemptStarted     = "attempt.started"
	EventAttemptSucceeded   = "attempt.succeeded"
	EventAttemptFailed      = "attempt.failed"
	EventAttemptInterrupted = "attempt.interrupted"
	EventRetryScheduled     = "retry.scheduled"
	EventArtifactAccepted   = "artifact.accepted"
	EventArtifactRejected   = "artifact.rejected"
	// EventViewRepaired: a file on disk that is a view of a stored file
	// (an artifact in a run's directory) was missing or differed from the
	// store's copy, and was rewritten from it (details: path, artifact,
	// reason: missing or different); or a mailbox file differed from the
	// store's messages of its agent (details: path, mailbox, reason).
	EventViewRepaired = "view.repaired"
	// EventSignal: the SIGNAL BLOCK of an agent step that routes on one
	// (spec 2), checked and committed with the step's success (details:
	// agent, cycle, step, confidence, risk, next, visit).
	EventSignal           = "signal.received"
	EventMailboxDelivered = "mailbox.delivered"
	EventMemoryCreated    = "memory.created"
	// EventResourceExhausted: the runner ran out of a resource (details:
	// resource, operation, error, wait) and tries again after the wait.
	EventResourceExhausted = "resource.exhausted"
	// EventBackupCompleted and EventBackupFailed: a scheduled backup of the
	// state database was taken (details: file, bytes, duration_ms) or not
	// (details: file, error).
	EventBackupCompleted = "backup.completed"
	EventBackupFailed    = "backup.failed"
)

// OutboxMessage is a side effect outside the process (a REST call) that is
// committed together with the state change that causes it and delivered
// afterwards, with Key as idempotency key, so neither a crash nor a retry
// can lose or double it.
type OutboxMessage struct {
	Key       string
	Kind      string
	CycleID   string
	Payload   []byte
	CreatedAt time.Time
	// DeliveredAt is zero until the receiver acknowledged the message.
	DeliveredAt time.Time
	// Response is the receiver's acknowledgement body.
	Response  []byte
	Attempts  int
	LastError string
	// NextAttemptAt is when an undelivered message is tried again.
	NextAttemptAt time.Time
}

// Outbox message kinds.
const (
	// OutboxWebhook notifies operators.
	OutboxWebhook = "webhook"
)

// OutboxFilter selects outbox messages.
type OutboxFilter struct {
	Kind string // empty: any kind
	// Due selects undelivered messages whose next attempt is due by then.
	Due time.Time
	// Delivered selects delivered messages, newest first.
	Delivered bool
	Limit     int
}

// Command is an operator's order to the engine (resume, pause, abort …),
// written durably by the API or the CLI and consumed by the engine exactly
// once, in the transaction of the change it causes.
type Command struct {
	ID       int64
	Kind     string
	Args     map[string]any
	Operator string
	// CreatedAt is when it was given; ConsumedAt when the engine applied it.
	CreatedAt  time.Time
	ConsumedAt time.Time
	// Result says what the engine did with it.
	Result string
	// Target names what a command of a one-decision kind decides
	// (CommandGateDecision: "run/step#visit"): AddCommand refuses a second
	// such command with the same kind and target with ECONFLICT, so two
	// operators can never both decide one gate.
	Target string
}

// Command kinds.
const (
	// CommandResume resumes a halted cycle at its step.
	CommandResume = "resume"
	// CommandPause stops new steps from starting; the running one finishes.
	CommandPause = "pause"
	// CommandAbort cancels the running agent and ends the cycle aborted.
	CommandAbort = "abort"
	// CommandInject puts an operator's message into an agent's mailbox
	// (args: agent, message).
	CommandInject = "inject"
	// CommandForceCycle starts a new cycle now, or as soon as the running
	// one ends.
	CommandForceCycle = "force-cycle"
	// CommandReload reads the configuration and its files again (admin).
	CommandReload = "reload"
	// CommandStartRun starts a run of a pipeline (args: pipeline, inputs).
	CommandStartRun = "run.start"
	// CommandGateDecision decides a waiting gate (args: run, step, visit,
	// action, to, comment); its Target is "run/step#visit".
	CommandGateDecision = "gate.decision"
	// CommandAbortRun ends a run of the graph scheduler (args: run).
	CommandAbortRun = "run.abort"
	// CommandResumeRun resumes a halted run of the graph scheduler (args:
	// run): the step runs the halt stopped run again.
	CommandResumeRun = "run.resume"
)

// OverrideKinds are the commands operators give through the API (FR-162).
var OverrideKinds = []string{CommandPause, CommandResume, CommandAbort, CommandInject, CommandForceCycle}

// CommandFilter selects commands, newest first.
type CommandFilter struct {
	BeforeID int64 // 0: none
	Limit    int   // 0: no limit
}

// Control is the loop's operator-set state, changed only by commands.
type Control struct {
	Paused bool
	// PausedBy and PausedAt say who paused the loop and when.
	PausedBy string
	PausedAt time.Time
}

// ToolUsage sums the recorded calls of one tool (FR-143).
type ToolUsage struct {
	Tool     string
	Calls    int
	Errors   int
	Duration time.Duration // all calls together
	LastCall time.Time
}

// EventToolCall is the type of the event recorded for every tool call.
// Stores keep a summary of these events (Store.ToolUsage).
const EventToolCall = "tool.call"

// ToolUsageBucket is the granularity of the tool usage summary: calls are
// summed per tool and UTC hour, so ToolUsage's since counts from the start
// of its hour.
const ToolUsageBucket = time.Hour

// ToolCallOf reads what the tool usage summary keeps of an event: the
// tool's name (details "tool", a string), whether the call failed
// (details "is_error" true) and its duration (details "duration_ms", a
// number). ok is false for other events and for a tool.call event
// without a tool name, which the summary does not count.
func ToolCallOf(e *Event) (tool string, failed bool, d time.Duration, ok bool) {
	if e.Type != EventToolCall {
		return "", false, 0, false
	}
	tool, ok = e.Details["tool"].(string)
	if !ok {
		return "", false, 0, false
	}
	failed, _ = e.Details["is_error"].(bool)
	var ms int64
	switch v := e.Details["duration_ms"].(type) {
	case int:
		ms = int64(v)
	case int64:
		ms = v
	case float64:
		ms = int64(v)
	}
	return tool, failed, time.Duration(ms) * time.Millisecond, true
}

// Change is everything one state change writes. A Store applies it in one
// transaction: all of it is committed or none of it.
type Change struct {
	// From, when set, guards the change: the pipeline of its cycle (Cycle,
	// else the run of its first attempt) must be in this state in the
	// store, else Apply fails with ECONFLICT and writes nothing. It is the
	// loop engine's guard, for serial pipelines.
	From State
	// Guards, when set, guard the change too: each names an attempt that
	// must still be running in the store (see AttemptGuard), else the
	// change fails with ECONFLICT and writes nothing. They are the graph
	// scheduler's guards, one per attempt whose outcome the change commits.
	Guards []AttemptGuard
	// Cycle is inserted or updated (by ID); an ID taken by a run of
	// another pipeline is ECONFLICT.
	Cycle *Cycle
	// Attempts are inserted or updated (by cycle, step and number); a
	// Visit of 0 is stored, and read back, as 1.
	Attempts []*Attempt
	// Events are appended; their IDs are assigned by the store.
	Events []*Event
	// Outbox messages are inserted; one whose key exists is left alone.
	Outbox []*OutboxMessage
	// Delivered marks outbox messages as acknowledged.
	Delivered []*OutboxMessage
	// Consumed marks commands as applied, with their Result.
	Consumed []*Command
	// Control, when set, replaces the loop's control state.
	Control *Control
	// Runs are inserted or updated (by ID), unguarded: runs of the graph
	// scheduler, whose only writer is the scheduler's one goroutine.
	Runs []*Run
	// StepRuns are inserted or updated (by run, step and visit).
	StepRuns []*StepRun
	// Files are inserted; their IDs are assigned by the store.
	Files []*StoredFile
	// Mail are deposits into the agents' mailboxes, made in order.
	Mail []*MailDeposit
}

// CycleFilter selects cycles, newest first.
type CycleFilter struct {
	// Pipeline selects the runs of one pipeline; empty: every pipeline.
	Pipeline string
	Status   CycleStatus // empty: any
	Before   string      // cycle ID bound (exclusive); empty: none
	Limit    int         // 0: no limit
}

// EventFilter selects events, oldest first (newest first with Newest).
type EventFilter struct {
	CycleID  string
	AfterID  int64
	BeforeID int64     // 0: none
	Since    time.Time // zero: any time
	MinLevel Level     // empty: any level
	Type     string    // empty: any type
	Newest   bool
	Limit    int
}

// Store is the durable state of a workspace. The engine is the only
// writer of pipeline state; capsules and memory entries are written by
// their own services (package capsule, package memory), each write one
// transaction.
type Store interface {
	RunStore
	MailStore
	CapsuleStore
	MemoryStore
	TodoStore
	ConversationStore
	SessionStore
	// Apply commits a Change in one transaction.
	Apply(ctx context.Context, ch *Change) error
	// Cycle returns one cycle, or an ENOTFOUND error.
	Cycle(ctx context.Context, id string) (*Cycle, error)
	// UnfinishedCycle returns the one unfinished (running or halted)
	// serial run of the pipeline, the loop engine's cycle, or ENOTFOUND.
	UnfinishedCycle(ctx context.Context, pipeline string) (*Cycle, error)
	// Cycles lists cycles, newest first.
	Cycles(ctx context.Context, f CycleFilter) ([]*Cycle, error)
	// Attempts lists the attempts of a cycle in the order they were made.
	Attempts(ctx context.Context, cycleID string) ([]*Attempt, error)
	// Events lists events, oldest first.
	Events(ctx context.Context, f EventFilter) ([]*Event, error)
	// OutboxMessage returns one outbox message by key, or ENOTFOUND.
	OutboxMessage(ctx context.Context, key string) (*OutboxMessage, error)
	// RecordOutboxFailure counts a failed delivery of a message and sets
	// when to try again (zero: no time set).
	RecordOutboxFailure(ctx context.Context, key, reason string, next time.Time) error
	// Outbox lists outbox messages: due ones oldest first, delivered ones
	// newest first.
	Outbox(ctx context.Context, f OutboxFilter) ([]*OutboxMessage, error)
	// AddCommand stores a command and assigns its ID.
	AddCommand(ctx context.Context, c *Command) error
	// PendingCommands lists unconsumed commands, oldest first.
	PendingCommands(ctx context.Context) ([]*Command, error)
	// Commands lists commands, consumed or not, newest first: the audit log.
	Commands(ctx context.Context, f CommandFilter) ([]*Command, error)
	// Control returns the loop's control state (the zero Control at first).
	Control(ctx context.Context) (*Control, error)
	// PruneEvents deletes events older than before, never the newest one
	// (so event ids keep growing), and returns how many it deleted. The
	// tool usage summary is the history of the calls and stays as it is.
	PruneEvents(ctx context.Context, before time.Time) (int64, error)
	// PruneFiles deletes the stored files of the kinds given (FilePrompt,
	// FileValidation) created before before, never the newest stored file
	// (so file ids keep growing), and returns how many it deleted: the prompts and validation reports are for an operator's
	// inspection and go with the events, on their retention. Stored
	// artifacts are never pruned, for they are what steps produced and
	// what later steps read: asking for FileArtifact, an unknown kind or
	// no kind at all is an EINVALID error.
	PruneFiles(ctx context.Context, before time.Time, kinds ...FileKind) (int64, error)
	// ToolUsage sums the tool calls (ToolCallOf) since then, by tool,
	// sorted by name, from a summary Apply keeps in the transaction that
	// writes the tool.call events, never from a scan of the events. The
	// summary counts per ToolUsageBucket: since is taken back to the start
	// of its hour. The zero since is all time.
	ToolUsage(ctx context.Context, since time.Time) ([]*ToolUsage, error)
	Close() error
}

// SessionStore keeps the dashboard's sessions that were ended before
// they expired (signed out), so that a copy of their cookie is refused
// too, across restarts.
type SessionStore interface {
	// EndSession records that the session id ended; the record is kept
	// until expires, when the session would have ended anyway. Records
	// whose time has passed (before now) are dropped.
	EndSession(ctx context.Context, id string, expires, now time.Time) error
	// SessionEnded reports whether the session id was ended.
	SessionEnded(ctx context.Context, id string) (bool, error)
}

// Clock is the time source; tests inject a fake so nothing sleeps.
type Clock interface {
	Now() time.Time
	// After is time.After on this clock.
	After(d time.Duration) <-chan time.Time
}

// SteppedClock is a test clock whose time moves only when someone waits
// on it: After moves it forward at once. Waiting on it while an attempt
// works would make the attempt's time jump, so the scheduler waits on it
// only when no attempt runs: time stands still while an attempt works, as
// it would for a step that takes no time.
type SteppedClock interface {
	Clock
	Stepped()
}

// SystemClock is the real time.
type SystemClock struct{}

// Now returns the current UTC time.
func (SystemClock) Now() time.Time { return time.Now().UTC() }

// After waits on the real clock.
func (SystemClock) After(d time.Duration) <-chan time.Time { return time.After(d) }

var _ Clock = SystemClock{}
