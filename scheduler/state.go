package scheduler

import (
	"context"
	"time"

	"github.com/agentrunner/agentrunner"
)

// runState is what the scheduler keeps of an unfinished run.
type runState struct {
	run      *agentrunner.Run
	pipeline *agentrunner.Pipeline
	// steps are its step runs by key (step#visit); visits and attempts
	// the highest visit and attempt number of each step.
	steps    map[string]*stepState
	visits   map[string]int
	attempts map[string]int
	// state is where a run of a serial pipeline is (see moveTo).
	state agentrunner.State
	// forced: the run ran out of time and was forced to its final step.
	forced bool
	// frozen, if set, is what the run keeps of a configuration a reload
	// replaced: its pipeline is the graph it began on, not the current
	// one. nil: it runs on the current pipeline and kinds.
	frozen *frozen
}

// frozen is shared by the runs that kept their graph across one reload:
// the step kinds they ran on, built for that graph.
type frozen struct {
	kinds map[string]agentrunner.StepKind
}

func newRunState(r *agentrunner.Run, p *agentrunner.Pipeline) *runState {
	return &runState{run: r, pipeline: p, steps: map[string]*stepState{}, visits: map[string]int{}, attempts: map[string]int{}, state: r.State()}
}

// live reports whether any step run of the run is unfinished.
func (rs *runState) live() bool {
	for _, ss := range rs.steps {
		if !ss.sr.Status.Finished() {
			return true
		}
	}
	return false
}

// latest returns the newest step run of step, nil if there is none.
func (rs *runState) latest(step string) *stepState {
	return rs.steps[agentrunner.StepRunKey(step, rs.visits[step])]
}

// stepState is one step run and its current attempt.
type stepState struct {
	sr  *agentrunner.StepRun
	att *agentrunner.Attempt
	// cancel stops its running attempt (an abort, or the run failed).
	cancel context.CancelFunc
	// interruptions counts the attempts the runner's stopping cut short.
	interruptions int
	// exhausted counts its attempts in a row that failed for want of a
	// resource.
	exhausted int
	// deadline is when a waiting gate decides its default.
	deadline time.Time
	// lastAlive is when the runner was last known alive, for an attempt
	// read back running at a start: the end it is recorded with.
	lastAlive time.Time
}

// task is an attempt to run.
type task struct {
	rs  *runState
	ss  *stepState
	att *agentrunner.Attempt
}

// result is what a worker brings back from an attempt.
type result struct {
	task
	res *agentrunner.StepResult
	err error
}

// batch is what one pass of the loop commits together.
type batch struct {
	changes []*agentrunner.Change
	// counted are the transitions of each change.
	counted map[*agentrunner.Change]int
	// start wait for a slot; run got one and start after the commit;
	// delay wait for their backoff.
	start []*task
	run   []*task
	delay []*task
	// views are written once the batch is committed.
	views []pendingView
	// mail are the agents whose mailboxes the batch deposits into.
	mail []string
	// begun are the directories of the runs the batch begins, by run id,
	// made once the run is committed.
	begun map[string]string
}

func newBatch() *batch {
	return &batch{counted: map[*agentrunner.Change]int{}, begun: map[string]string{}}
}

// transition counts a transition ch commits.
func (b *batch) transition(ch *agentrunner.Change) { b.counted[ch]++ }

// change returns a new change added to the batch.
func (b *batch) change() *agentrunner.Change {
	ch := &agentrunner.Change{}
	b.changes = append(b.changes, ch)
	return ch
}
