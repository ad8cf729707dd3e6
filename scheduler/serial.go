package scheduler

import (
	"context"
	"maps"
	"slices"

	"github.com/agentrunner/agentrunner"
)

// runEvent is the event type of a step in a run's life ("started",
// "completed" …), named with its pipeline's noun: the learning loop's
// runs are cycles, and write cycle.started as they always did.
func runEvent(p *agentrunner.Pipeline, verb string) string {
	return noun(p) + "." + verb
}

// abortSerial applies the loop's abort override, which names no run: it
// aborts the unfinished run of a serial pipeline (the cycle in flight,
// running or halted).
func (s *Scheduler) abortSerial(ch *agentrunner.Change, cmd *agentrunner.Command) {
	unfinished := maps.Clone(s.runs)
	maps.Copy(unfinished, s.halted)
	for _, id := range slices.Sorted(maps.Keys(unfinished)) {
		rs := unfinished[id]
		if rs.pipeline.Serial && rs.run.Status != agentrunner.RunQueued {
			named := *cmd
			named.Args = maps.Clone(cmd.Args)
			if named.Args == nil {
				named.Args = map[string]any{}
			}
			named.Args["run"] = id
			s.consume(ch, cmd, s.abort(ch, &named))
			return
		}
	}
	s.ignore(ch, cmd, "no cycle is running")
}

// moveTo records, on a run of a serial pipeline, the state it moves to
// (a step, WaitingForNextCycle at its end, Halted), with the loop's
// state.transition event; the run's Step says where it is for the status
// page (FR-062). Runs of other pipelines may be at several steps at once:
// their step runs say where, and nothing is recorded here.
func (s *Scheduler) moveTo(ch *agentrunner.Change, rs *runState, to agentrunner.State) {
	if !rs.pipeline.Serial {
		return
	}
	from := rs.state
	if from == to {
		return
	}
	rs.state = to
	r := *rs.run
	switch to {
	case agentrunner.StateWaiting:
		r.Step = ""
	case agentrunner.StateHalted:
	default:
		r.Step = string(to)
	}
	rs.run = &r
	s.putRun(ch, rs)
	s.event(ch, rs, "", agentrunner.EventTransition, agentrunner.LevelInfo, map[string]any{"from": string(from), "to": string(to)})
}

// completed records, on a serial run, the last step it completed.
func (s *Scheduler) completed(ch *agentrunner.Change, rs *runState, step string) {
	if !rs.pipeline.Serial {
		return
	}
	r := *rs.run
	r.LastCompletedStep = step
	rs.run = &r
	s.putRun(ch, rs)
}

// putRun adds the run's current state to the change, once.
func (s *Scheduler) putRun(ch *agentrunner.Change, rs *runState) {
	for i, old := range ch.Runs {
		if old.ID == rs.run.ID {
			ch.Runs[i] = rs.run
			return
		}
	}
	ch.Runs = append(ch.Runs, rs.run)
}

// before is the state a serial pipeline is in before a new run: Idle
// before its first, WaitingForNextCycle after one.
func (s *Scheduler) before(ctx context.Context, p *agentrunner.Pipeline) (agentrunner.State, error) {
	runs, err := s.store.Runs(ctx, agentrunner.RunFilter{Pipeline: p.Name, Limit: 1})
	if err != nil || len(runs) == 0 {
		return agentrunner.StateIdle, err
	}
	return agentrunner.StateWaiting, nil
}
