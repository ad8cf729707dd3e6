package scheduler

import (
	"slices"
	"strings"

	"github.com/agentrunner/agentrunner"
)

// A batch is committed as units, in one transaction (Store.ApplyGroup):
// the changes of a batch that write to the same run are one unit, which
// the store commits or refuses as a whole, and a unit refused does not
// hold the others back. Changes that touch several runs (a run that ends
// and lets a queued one begin) join their runs' units.

// unit is the changes of a batch that stand or fall together, merged
// into one change.
type unit struct {
	ch *agentrunner.Change
	// runs are the ids of the runs it writes to; transitions counts the
	// transitions it commits.
	runs        []string
	transitions int
}

// units groups the batch's changes into units, in the order of their
// first change.
func (b *batch) units() []*unit {
	runs := make([][]string, len(b.changes))
	for i, ch := range b.changes {
		runs[i] = runsOf(ch)
	}
	if len(b.changes) == 1 { // a lone run's step
		return []*unit{{ch: b.changes[0], runs: runs[0], transitions: b.counted[b.changes[0]]}}
	}
	parent := make([]int, len(b.changes))
	var find func(i int) int
	find = func(i int) int {
		if parent[i] != i {
			parent[i] = find(parent[i])
		}
		return parent[i]
	}
	owner := map[string]int{} // a change that writes to the run
	for i := range b.changes {
		parent[i] = i
		for _, id := range runs[i] {
			j, ok := owner[id]
			if !ok {
				owner[id] = i
				continue
			}
			// The smaller index is the root, so a unit keeps its first
			// change's place.
			ri, rj := find(i), find(j)
			parent[max(ri, rj)] = min(ri, rj)
		}
	}
	byRoot := map[int]*unit{}
	var us []*unit
	for i, ch := range b.changes {
		u := byRoot[find(i)]
		if u == nil {
			u = &unit{}
			byRoot[find(i)] = u
			us = append(us, u)
		}
		u.add(ch, runs[i], b.counted[ch])
	}
	return us
}

// add merges ch, which writes to runs, into the unit: a unit of one
// change is that change.
func (u *unit) add(ch *agentrunner.Change, runs []string, transitions int) {
	u.transitions += transitions
	for _, id := range runs {
		if !slices.Contains(u.runs, id) {
			u.runs = append(u.runs, id)
		}
	}
	if u.ch == nil {
		u.ch = ch
		return
	}
	u.ch = merge(u.ch, ch)
}

// merge is a followed by b as one change: each kind of record in the
// order of the changes. The store writes a change's records kind by kind
// (runs, step runs, attempts …), which is the order the scheduler's
// changes of one run need: it never sets From or Cycle, the loop
// engine's, and merge leaves them out.
func merge(a, b *agentrunner.Change) *agentrunner.Change {
	m := &agentrunner.Change{
		Guards:    slices.Concat(a.Guards, b.Guards),
		Runs:      slices.Concat(a.Runs, b.Runs),
		StepRuns:  slices.Concat(a.StepRuns, b.StepRuns),
		Attempts:  slices.Concat(a.Attempts, b.Attempts),
		Events:    slices.Concat(a.Events, b.Events),
		Outbox:    slices.Concat(a.Outbox, b.Outbox),
		Delivered: slices.Concat(a.Delivered, b.Delivered),
		Consumed:  slices.Concat(a.Consumed, b.Consumed),
		Files:     slices.Concat(a.Files, b.Files),
		Mail:      slices.Concat(a.Mail, b.Mail),
		Control:   a.Control,
	}
	if b.Control != nil {
		m.Control = b.Control
	}
	return m
}

// runsOf lists the runs a change writes to, each once.
func runsOf(ch *agentrunner.Change) []string {
	var ids []string
	add := func(id string) {
		if id != "" && !slices.Contains(ids, id) {
			ids = append(ids, id)
		}
	}
	for _, r := range ch.Runs {
		add(r.ID)
	}
	for _, sr := range ch.StepRuns {
		add(sr.RunID)
	}
	for _, a := range ch.Attempts {
		add(a.CycleID)
	}
	for _, e := range ch.Events {
		add(e.CycleID)
	}
	for _, m := range ch.Outbox {
		add(m.CycleID)
	}
	for _, f := range ch.Files {
		add(f.RunID)
	}
	for _, g := range ch.Guards {
		add(g.RunID)
	}
	return ids
}

// guard guards the change that commits a result by the result's attempt:
// the store must still have it running, as this scheduler recorded it.
func guard(ch *agentrunner.Change, r *result) {
	ch.Guards = append(ch.Guards, agentrunner.AttemptGuard{RunID: r.rs.run.ID, Step: r.att.Step, Number: r.att.Number})
}

// refused handles a unit the store refused (a failed guard: the store
// moved on without this scheduler). Nothing of it is reported and none of
// the attempts it opened starts: its runs are dropped from memory, to be
// read back from the store at the next start, and an error names them.
func (s *Scheduler) refused(u *unit, err error) {
	for _, id := range u.runs {
		var steps []string
		for _, g := range u.ch.Guards {
			if g.RunID == id && !slices.Contains(steps, g.Step) {
				steps = append(steps, g.Step)
			}
		}
		s.log.Error("the store refused a transition: it moved on without this scheduler (another writer, a repair); the run is dropped until the next start, which reads it back",
			"run", id, "step", strings.Join(steps, ","), "error", err)
		s.forget(id)
	}
}

// forget drops a run from the scheduler's memory, with everything it
// holds: its running attempts are stopped and their results dropped, its
// waiting ones never start (they are stale), its place among the active
// runs is given up.
func (s *Scheduler) forget(id string) {
	if rs := s.halted[id]; rs != nil {
		delete(s.halted, id)
		s.drop(rs)
	}
	rs := s.runs[id]
	if rs == nil {
		return // it ended in the batch, and gave its place up then
	}
	delete(s.runs, id)
	if i := slices.Index(s.queued[rs.run.Pipeline], rs); i >= 0 {
		s.queued[rs.run.Pipeline] = slices.Delete(s.queued[rs.run.Pipeline], i, i+1)
	} else {
		s.active[rs.run.Pipeline]--
	}
	s.drop(rs)
}

// drop stops a forgotten run's attempts and clears its timers.
func (s *Scheduler) drop(rs *runState) {
	for _, ss := range rs.steps {
		if ss.cancel != nil {
			ss.cancel()
			ss.cancel = nil
		}
		delete(s.timed, ss)
	}
	delete(s.bounds, rs)
}
