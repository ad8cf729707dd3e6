package agentrunner

import (
	"context"
	"strconv"
	"time"
)

// Pipeline is a graph of steps: where a run starts, and how each step run
// leads on (Edges). The learning loop is one pipeline; a workspace may
// define several, and each run executes one of them.
type Pipeline struct {
	Name  string
	Start string
	Steps map[string]*Step
	// RunID is the format of the ids of its runs (RunIDTimestamp …).
	RunID RunIDFormat
	// MaxConcurrentRuns bounds the runs of this pipeline that run at once;
	// further runs wait, queued, in the order they were started. 0: no bound.
	MaxConcurrentRuns int
	// InputSchema, if set, is the JSON Schema (compiled by config) that a
	// run's inputs must satisfy; its path is InputSchemaPath.
	InputSchemaPath string
	// Every, if set, starts a run (without inputs) every interval, counted
	// from the start of the pipeline's newest run.
	Every time.Duration
	// EveryInputs are the inputs of the runs Every (or Cron) starts.
	EveryInputs map[string]any
	// Cron, if set instead of Every, starts a run (without inputs but
	// EveryInputs) at each of its fire times.
	Cron Timetable
	// Overlap is what a fire time of the schedule (Every or Cron) does
	// while a run of the pipeline is running; "" is OverlapAllow.
	Overlap Overlap
	// CatchUp is what the fire times missed while the runner was down do
	// at its start; "" is CatchUpOne. CatchUpMax bounds CatchUpAll.
	CatchUp    CatchUp
	CatchUpMax int
	// MinInterval, if set, skips a fire time of Cron that comes sooner
	// than it after the start of the pipeline's newest run (the learning
	// loop's schedule.min_cycle, FR-005).
	MinInterval time.Duration
	// MaxDuration, if set, bounds a run: once it is overdue, its unfinished
	// step runs are cut short and the run is forced to its Final step,
	// which judges what the run has; with no Final step (or when the Final
	// step itself runs out of time) the run fails.
	MaxDuration time.Duration
	Final       string
	// Serial pipelines run one run at a time and record its current step on
	// the run (the learning loop); Noun names its runs in event types
	// ("cycle": cycle.started …; empty: "run").
	Serial bool
	Noun   string
	// Views says when the files of its runs' artifacts, views of the
	// store's copies, are written: after each commit (ViewsEager, the
	// zero value) or only when something reads them (ViewsOnRead).
	Views ViewMode
	// Document, if set, is the pipeline's shared document, which a
	// RunFollower keeps.
	Document *DocumentSpec
	// Where is the pipeline's place in the configuration ("file:line").
	Where string
}

// Scheduled reports whether the pipeline starts runs on a clock.
func (p *Pipeline) Scheduled() bool { return p.Every > 0 || p.Cron != nil }

// Timetable is the fire times of a cron schedule (package cron reads
// one from its expression and time zone).
type Timetable interface {
	// Next is the first fire time after t; zero when there is none.
	Next(t time.Time) time.Time
	// String is the schedule as written, with its time zone.
	String() string
}

// Overlap is what a schedule's fire time does while a run of its
// pipeline is still running.
type Overlap string

// Overlap policies.
const (
	// OverlapAllow starts the run anyway; the pipeline's
	// MaxConcurrentRuns, if set, queues it (one at most).
	OverlapAllow Overlap = "allow"
	// OverlapSkip drops the fire time, with a schedule.skipped event.
	OverlapSkip Overlap = "skip"
	// OverlapQueue starts the run once no run of the pipeline is running;
	// one at most waits, a fire time that finds one waiting is skipped.
	OverlapQueue Overlap = "queue"
)

// CatchUp is what the fire times that passed while the runner was down
// do when it starts.
type CatchUp string

// Catch-up policies.
const (
	// CatchUpNone drops them, with a schedule.missed event.
	CatchUpNone CatchUp = "none"
	// CatchUpOne starts one run for them all.
	CatchUpOne CatchUp = "one"
	// CatchUpAll starts one run for each, at most CatchUpMax; the
	// overlap policy queues them, and OverlapQueue lets them all wait.
	CatchUpAll CatchUp = "all"
)

// DocumentSpec is a pipeline's shared document (spec 2's
// current_cycle.md): a view of the store that holds a header made from
// the run's inputs and each succeeded step run's artifact in order,
// rewritten after each commit before the next attempt starts, and
// archived when the run ends. Its paths are absolute.
type DocumentSpec struct {
	// File is the live document of the run in flight.
	File string
	// Archive is the folder the ended runs' documents are archived in.
	Archive string
	// Iteration, if set, is the step each visit of which opens an
	// "## Iteration N" heading.
	Iteration string
}

// RunFollower keeps something outside the store in step with the runs
// of a pipeline (its document). The scheduler calls Follow after each
// commit that changed one of the pipeline's runs, before the run's next
// attempt starts, and at its start for the pipeline's newest runs, so
// Follow must be idempotent: it brings what it keeps to what the store
// says, however often it is called, and whatever a crash left.
type RunFollower interface {
	Follow(ctx context.Context, run *Run) error
}

// ViewMode says when a pipeline's run directory, the files that are views
// of the artifacts its steps committed, is written.
type ViewMode string

// The view modes.
const (
	// ViewsEager writes each artifact's file after the commit that stored
	// it, in the background: the run directory follows the run.
	ViewsEager ViewMode = "eager"
	// ViewsOnRead writes an artifact's file only when an agent is about
	// to read it as an input; the API serves artifacts from the store.
	// A step then makes no file at all, for pipelines whose agents work
	// in memory and whose operators read the store, not the directory.
	ViewsOnRead ViewMode = "on_read"
)

// RunIDFormat names how a pipeline's run ids are made.
type RunIDFormat string

// Run id formats.
const (
	// RunIDTimestamp: the UTC start time, YYYYMMDD_HHMMSS (the cycles of
	// the learning loop); a second start in the same second takes the next.
	RunIDTimestamp RunIDFormat = "timestamp"
	// RunIDDateSeq: the UTC date and the day's sequence number,
	// YYYY-MM-DD-NNN (spec 2's cycles).
	RunIDDateSeq RunIDFormat = "date-seq"
	// RunIDSeq: the pipeline's name and a sequence number, name-000001.
	RunIDSeq RunIDFormat = "seq"
)

// EndStep as an edge's target ends the branch; a run whose branches all
// ended is completed.
const EndStep = "end"

// Step kinds the engine ships. Other kinds register a StepKind by name.
const (
	KindAgent     = "agent"
	KindExecution = "execution"
	KindGate      = "gate"
)

// Step is one node of a pipeline: what runs (Kind, and the kind's own
// configuration in Config) and where it leads (its edges).
type Step struct {
	ID   string
	Kind string
	// Next is the one successor, or EndStep; used when neither Routes nor
	// Then is set.
	Next string
	// Label reads the routing label from the step's output; Routes pick
	// the successor by it.
	Label  *LabelSource
	Routes []Route
	// Then starts several branches at once.
	Then []string
	// Join makes the step wait for its incoming branches (JoinAll) or
	// take the first that arrives (JoinAny); empty: no join.
	Join JoinMode
	// MaxVisits caps the step runs of this step in one run; every step on
	// a cycle of the graph needs one. 0: no cap (the step is on no cycle).
	MaxVisits int
	// OnCap is what happens when an edge leads to the step at its cap.
	OnCap CapAction
	// Gate configures a gate step.
	Gate *GateSpec
	// OnFailure is what happens when a step run fails for good (its
	// retries spent); the zero value is FailRun.
	OnFailure FailurePolicy
	// Retry is the retry policy of its attempts; Timeout bounds each one.
	Retry   RetryPolicy
	Timeout time.Duration
	// Where is the step's place in the configuration ("file:line").
	Where string
	// Config is the kind's own configuration, decoded by the kind's
	// package (the agent to run, the artifact to hand over …).
	Config any
}

// LabelSource says where a step's routing label is read from its output:
// exactly one of its fields is set.
type LabelSource struct {
	// Pointer is a JSON pointer into a JSON artifact.
	Pointer string
	// Section is a markdown section whose first line is the label.
	Section string
	// Field is a labelled markdown field ("Verdict: APPROVE").
	Field string
	// Regex's first group (or whole match) is the label.
	Regex string
	// Parser names a parser of a known format ("signal": spec 2's SIGNAL
	// BLOCK, whose Next= is the label).
	Parser string
}

// Route is one of a step's routes: When the label is When, go To; a route
// with Otherwise set is the default, taken when no When matches.
type Route struct {
	When      string
	To        string
	Otherwise bool
}

// JoinMode is how a step joins its incoming branches.
type JoinMode string

// Join modes.
const (
	JoinAll JoinMode = "all"
	JoinAny JoinMode = "any"
)

// CapAction is what happens at a step's MaxVisits: go To a step (a gate
// step opens a gate for a person), Halt the run with its state kept, or
// End it incomplete (RunIncomplete): the loop gave up, and the run is over.
type CapAction struct {
	To   string
	Halt bool
	End  bool
}

// GateSpec configures a gate: an optional Timeout after which Default
// (approve or reject) is decided for the operator.
type GateSpec struct {
	Timeout time.Duration
	Default DecisionAction
}

// FailurePolicy is what happens when a step run fails for good.
type FailurePolicy string

// Failure policies (FR-048..051).
const (
	// FailRun ends the run failed.
	FailRun FailurePolicy = "fail"
	// HaltRun halts the run, its state kept, until an operator resumes it:
	// the step then runs again with a new round of retries.
	HaltRun FailurePolicy = "halt"
	// SkipStep stands in for the step with its last good output from an
	// earlier run (Fallbacker), and goes on; with none, the run halts.
	SkipStep FailurePolicy = "skip"
)

// Fallbacker is a step kind that can stand in for a step run that failed
// for good with the last good output of the step from an earlier run of
// the pipeline (SkipStep). It returns nil, nil when there is none.
type Fallbacker interface {
	Fallback(ctx context.Context, a *StepAttempt) (*StepResult, error)
}

// CommandTaker is a step kind whose attempts take commands of their own
// kinds (the Execution Service's status callbacks). The scheduler leaves
// those commands to the attempts; one that arrives while no step run of
// the kind is open has nothing to act on, and is consumed as ignored with
// the reason Stale gives.
type CommandTaker interface {
	Takes(commandKind string) bool
	Stale(cmd *Command) string
}

// InputLister is a step kind that names the input artifacts a step of
// its kind reads, for the context of a failure that escalates (FR-048).
type InputLister interface {
	Inputs(run *Run, step *Step) []string
}

// RetryPolicy is how often a failed attempt is tried again: at most Max
// retries, waiting Backoff[i] before retry i+1 (the last wait repeats).
type RetryPolicy struct {
	Max     int
	Backoff []time.Duration
	// InvalidOutput retries an attempt whose output its contract refused
	// (ClassInvalidOutput), as a model may do better at a second try.
	InvalidOutput bool
}

// Retries reports whether a failure of class is tried again under the
// policy (while retries are left).
func (p RetryPolicy) Retries(class ErrorClass) bool {
	return class.Retryable() && class != ClassInterrupted && class != ClassShutdown || p.InvalidOutput && class == ClassInvalidOutput
}

// Wait is the backoff before retry n (1-based).
func (p RetryPolicy) Wait(n int) time.Duration {
	if len(p.Backoff) == 0 || n < 1 {
		return 0
	}
	return p.Backoff[min(n, len(p.Backoff))-1]
}

// EdgeKind says why an edge exists.
type EdgeKind string

// Edge kinds.
const (
	EdgeNext      EdgeKind = "next"
	EdgeRoute     EdgeKind = "route"
	EdgeOtherwise EdgeKind = "otherwise"
	EdgeThen      EdgeKind = "then"
	EdgeCap       EdgeKind = "on_cap"
)

// Edge is one way a step run leads on: From's step run opens a step run
// of To (EndStep: the branch ends). Label is the route's label.
type Edge struct {
	From, To string
	Kind     EdgeKind
	Label    string
}

// Edges lists the step's edges in configuration order.
func (s *Step) Edges() []Edge {
	var es []Edge
	switch {
	case len(s.Then) > 0:
		for _, to := range s.Then {
			es = append(es, Edge{From: s.ID, To: to, Kind: EdgeThen})
		}
	case len(s.Routes) > 0:
		for _, r := range s.Routes {
			k := EdgeRoute
			if r.Otherwise {
				k = EdgeOtherwise
			}
			es = append(es, Edge{From: s.ID, To: r.To, Kind: k, Label: r.When})
		}
	case s.Next != "":
		es = append(es, Edge{From: s.ID, To: s.Next, Kind: EdgeNext})
	}
	if s.OnCap.To != "" {
		es = append(es, Edge{From: s.ID, To: s.OnCap.To, Kind: EdgeCap})
	}
	return es
}

// StepRunStatus is where one step run is.
type StepRunStatus string

const (
	// StepRunJoining: a join step run that waits for more of its branches.
	StepRunJoining StepRunStatus = "joining"
	// StepRunOpen: the step run has a current attempt, pending or running.
	StepRunOpen StepRunStatus = "open"
	// StepRunWaiting: a gate waits for an operator's decision.
	StepRunWaiting StepRunStatus = "waiting"
	// StepRunSucceeded: done; its Label chose the successors.
	StepRunSucceeded StepRunStatus = "succeeded"
	// StepRunFailed: failed beyond its retry policy, or for good.
	StepRunFailed StepRunStatus = "failed"
	// StepRunCanceled: the run ended (failed, aborted) before it, or a
	// join any went on without it.
	StepRunCanceled StepRunStatus = "canceled"
)

// Finished reports whether a step run in this status is over.
func (s StepRunStatus) Finished() bool {
	return s == StepRunSucceeded || s == StepRunFailed || s == StepRunCanceled
}

// StepRun is one visit of one step in one run: a step visited three times
// in a loop has three step runs. Attempts belong to a step run.
type StepRun struct {
	RunID  string
	Step   string
	Visit  int // 1-based
	Status StepRunStatus
	// From is the step run that opened this one ("step#visit"), empty for
	// the start step.
	From string
	// Arrived lists the steps whose branches reached a join so far.
	Arrived []string
	// Label is the routing label of a succeeded step run (for a gate, the
	// decision).
	Label string
	// Output is the path of its published artifact, if any.
	Output   string
	OpenedAt time.Time
	EndedAt  time.Time
	// Error says why a failed step run failed; on a succeeded one, the
	// failure that an earlier output stood in for (SkipStep).
	Error string
	// Decision is a gate's decision, once made.
	Decision *Decision
}

// Key names the step run within its run: "step#visit".
func (s *StepRun) Key() string { return StepRunKey(s.Step, s.Visit) }

// DecisionAction is an operator's decision on a gate.
type DecisionAction string

// Decision actions.
const (
	DecisionApprove DecisionAction = "approve"
	DecisionReject  DecisionAction = "reject"
	// DecisionRoute sends the run to the step named in Decision.To.
	DecisionRoute DecisionAction = "route"
)

// Decision is an operator's audited decision on a gate.
type Decision struct {
	Action  DecisionAction
	To      string
	Comment string
	// Operator is who decided ("timeout" for a gate's default decision).
	Operator  string
	DecidedAt time.Time
}

// StepKind runs one attempt of a step run of its kind. It knows nothing of
// the graph: the scheduler opens step runs, commits what Run returns, and
// follows the edges.
type StepKind interface {
	Run(ctx context.Context, a *StepAttempt) (*StepResult, error)
}

// StepAttempt is one attempt of one step run, as given to its kind.
type StepAttempt struct {
	Run     *Run
	Step    *Step
	StepRun *StepRun
	Attempt *Attempt
	// Dir is the attempt's scratch folder; RunDir the run's directory.
	Dir, RunDir string
	// Timeout is the attempt's time limit, which the kind holds its work
	// to; ctx's deadline is a little later, for the kind to record what
	// came of it.
	Timeout time.Duration
	// Late: the run is out of time and is forced to its final step, which
	// judges what the run has: inputs it lacks are named, not fatal.
	Late bool
	// Views is the view mode of the run's pipeline: with ViewsOnRead, an
	// input's missing file is written, not repaired.
	Views ViewMode
}

// StepResult is what an attempt produced, committed with its outcome.
type StepResult struct {
	// Output is the artifact's bytes, read for the routing label; Path
	// where it was published.
	Output []byte
	Path   string
	// Label, if set, is the routing label (the kind decided it itself);
	// else the step's LabelSource reads it from Output.
	Label string
	// Wait: the step run waits for an operator's decision (a gate).
	Wait     bool
	ExitCode *int
	Usage    Usage
	// Events and Outbox are committed with the outcome, even a failure.
	Events []*Event
	Outbox []*OutboxMessage
	// Files are the store's copies of what the attempt wrote (its
	// artifact, its prompt, a rejected output's validation report),
	// committed with the outcome; the scheduler fills in their run, step,
	// visit, attempt, hash and time. The files on disk are views of them.
	Files []*StoredFile
	// Mail are the step's messages to the agents' mailboxes, committed
	// only with a success: a failed attempt delivers nothing.
	Mail []*MailDeposit
}

// FileKind says what a stored file is, and so where its view is.
type FileKind string

// The kinds of stored files.
const (
	// FileArtifact is a step's output; its Name is a path relative to the
	// run's directory, where its view is.
	FileArtifact FileKind = "artifact"
	// FilePrompt is the prompt an attempt's agent saw; FileValidation why
	// an attempt's output was rejected. Their views are in the attempt's
	// folder, under Name.
	FilePrompt     FileKind = "prompt"
	FileValidation FileKind = "validation"
)

// StoredFile is the store's copy of a file a step run wrote, committed
// with the step run's outcome: the truth, of which the file on disk is a
// view that a crash may leave stale or missing and that is rewritten from
// this copy (see docs/durability.md).
type StoredFile struct {
	ID      int64 // assigned by the store
	RunID   string
	Step    string
	Visit   int
	Attempt int
	Kind    FileKind
	Name    string
	Data    []byte
	// Size is len(Data), also when a listing leaves Data out.
	Size int64
	// SHA256 is the hex SHA-256 of Data.
	SHA256    string
	CreatedAt time.Time
	// From, if set, is a file that holds Data already (the agent's own
	// output): the view is made by moving it into place rather than by
	// writing a new file. It is not stored.
	From string
}

// FileFilter selects stored files, oldest first.
type FileFilter struct {
	RunID string   // required
	Kind  FileKind // empty: any
	Name  string   // empty: any
	// Step and Attempt, when set, select the files of one step or of one
	// attempt of it.
	Step    string
	Attempt int
	// Latest keeps only the newest copy of each kind and name.
	Latest bool
	// NoData leaves Data out (a listing).
	NoData bool
}

// StepRunKey names a step run within its run: "step#visit".
func StepRunKey(step string, visit int) string {
	return step + "#" + strconv.Itoa(visit)
}

// RunFilter selects runs, newest first.
type RunFilter struct {
	Pipeline string    // empty: any
	Status   RunStatus // empty: any
	// Unfinished selects queued, running and halted runs.
	Unfinished bool
	Before     string // run ID bound (exclusive); empty: none
	// EndedAfter selects the runs that ended at or after it; zero: any.
	EndedAfter time.Time
	// Parent selects the runs a run started (its sub-agents' runs);
	// empty: any.
	Parent string
	Limit  int // 0: no limit
}

// StepRunFilter selects step runs, oldest first.
type StepRunFilter struct {
	RunID  string        // empty: any run
	Status StepRunStatus // empty: any
	Limit  int
}

// AttemptGuard guards a change that commits an attempt's outcome: the
// attempt (RunID, Step, Number) must still be running in the store, as
// the scheduler that ran it recorded it. A failed guard means the store
// moved on without that scheduler: another writer (a second runner on
// the same workspace, a manual repair) closed, replaced or removed the
// attempt, and the outcome, with everything that follows from it, must
// not be committed over that writer's record.
type AttemptGuard struct {
	RunID  string
	Step   string
	Number int
}

// RunStore is the part of the store the graph scheduler and the API use
// for runs and step runs; Store implementations provide it too.
type RunStore interface {
	// ApplyAll commits several changes in one transaction (a group
	// commit): all of them or none.
	ApplyAll(ctx context.Context, chs ...*Change) error
	// ApplyGroup commits several independent changes in one transaction,
	// one commit and one fsync for all of them, each on its own: a change
	// refused with ECONFLICT (a failed guard, From or Guards; a command
	// consumed already; an id taken) writes nothing and its error is
	// errs[i], while the others commit. A change sees the committed
	// changes before it. Any other error (a full disk, a broken
	// constraint, I/O) fails the whole group, which writes nothing, and is
	// returned as err, errs then nil.
	ApplyGroup(ctx context.Context, chs ...*Change) (errs []error, err error)
	// Run returns one run, or ENOTFOUND.
	Run(ctx context.Context, id string) (*Run, error)
	// Runs lists runs, newest first.
	Runs(ctx context.Context, f RunFilter) ([]*Run, error)
	// StepRuns lists step runs, oldest first.
	StepRuns(ctx context.Context, f StepRunFilter) ([]*StepRun, error)
	// RunCounts counts the unfinished runs by pipeline and status, and the
	// waiting gates, without reading the runs: a status page polls it
	// while thousands of runs are in flight.
	RunCounts(ctx context.Context) (RunCounts, error)
	// Files lists the stored files of a run, oldest first.
	Files(ctx context.Context, f FileFilter) ([]*StoredFile, error)
}

// RunCount is the number of runs of one pipeline in one status.
type RunCount struct {
	Pipeline string
	Status   RunStatus
	N        int
}

// RunCounts is what RunStore.RunCounts counts.
type RunCounts struct {
	// Unfinished are the queued, running and halted runs, by pipeline and
	// status, ordered by both; a pair without runs is left out.
	Unfinished []RunCount
	// WaitingGates is the number of step runs waiting for a decision.
	WaitingGates int
}
