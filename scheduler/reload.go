package scheduler

import (
	"fmt"
	"maps"
	"slices"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/route"
)

// EventReloaded: an operator reloaded the configuration and its files.
const EventReloaded = "config.reloaded"

// Reloaded is what an operator's reload gives the scheduler: the
// pipelines and step kinds built from the configuration read again.
type Reloaded struct {
	Pipelines map[string]*agentrunner.Pipeline
	Kinds     map[string]agentrunner.StepKind
	// Same names the pipelines of which the reload changed no more than
	// a run in flight may take: its steps' timeouts, retries and failure
	// policies, and its schedule. Their runs in flight go on with the
	// reloaded pipeline and kinds; those of any other pipeline finish on
	// the graph and kinds they had.
	Same map[string]bool
	// Followers are the followers of the pipelines that have a document
	// (Options.Followers); a pipeline's follower is made once, the first
	// time it has a document.
	Followers map[string]agentrunner.RunFollower
	// Path is the configuration file read.
	Path string
	// Apply, if set, is called once the scheduler takes the reload, before
	// anything runs on it: the loader puts its own part (the configuration
	// it serves) in place only then, so a reload the scheduler refuses
	// changes nothing.
	Apply func()
}

// reload applies an operator's reload between two passes, so it takes
// effect at the next step boundary. Runs started from here on, and queued
// runs (which have no step run yet), run on the new pipelines. A run in
// flight of a pipeline whose graph is the same (Reloaded.Same) moves to
// the new pipeline and kinds: its next attempts take the new prompts,
// contracts, timeouts, retries and policies. A run in flight of a
// pipeline whose graph changed, or that is gone, finishes on the graph
// and step kinds it had; a pipeline gone takes no new runs and its
// schedule stops. Running attempts finish as they began.
func (s *Scheduler) reload(ch *agentrunner.Change, cmd *agentrunner.Command) {
	if s.opts.Reload == nil {
		s.ignore(ch, cmd, "this runner cannot reload its configuration")
		return
	}
	r, err := s.opts.Reload()
	var labels map[*agentrunner.Step]*route.Extractor
	if err == nil {
		labels, err = s.checkReload(r)
	}
	if err != nil {
		// A warning: the reload may have been asked by a signal or the
		// file watcher, with nobody reading the command's result.
		s.workspaceEvent(ch, EventCommandIgnored, agentrunner.LevelWarn, commandDetails(cmd, map[string]any{"kind": cmd.Kind, "reason": err.Error()}))
		s.consume(ch, cmd, "ignored: "+err.Error())
		return
	}
	if r.Apply != nil {
		r.Apply()
	}
	details := s.reloadDetails(r)
	for name := range s.due {
		if !sameSchedule(s.opts.Pipelines[name], r.Pipelines[name]) {
			delete(s.due, name) // a new schedule counts from the newest run
		}
	}
	s.swap(r, labels)
	details["path"] = r.Path
	if len(s.kept) > 0 { // the runs in flight on a graph a reload replaced
		details["kept"] = slices.Sorted(maps.Keys(s.kept))
	}
	s.workspaceEvent(ch, EventReloaded, agentrunner.LevelInfo, commandDetails(cmd, details))
	s.consume(ch, cmd, "reloaded "+r.Path)
}

// swap puts the reloaded pipelines and kinds in place, and moves each
// unfinished run to them or freezes it on what it had.
func (s *Scheduler) swap(r *Reloaded, labels map[*agentrunner.Step]*route.Extractor) {
	fz := &frozen{kinds: s.opts.Kinds}
	kept := map[string]*agentrunner.Pipeline{}
	for _, rs := range s.unfinished() {
		s.moveRun(rs, r, fz)
		if rs.frozen != nil {
			kept[rs.run.ID] = rs.pipeline
			for _, st := range rs.pipeline.Steps {
				if x := s.labels[st]; x != nil {
					labels[st] = x
				}
			}
		}
	}
	s.graphsMu.Lock()
	s.opts.Pipelines, s.opts.Kinds, s.kept = r.Pipelines, r.Kinds, kept
	s.graphsMu.Unlock()
	s.labels = labels
	s.scheduled = nil
	for _, name := range slices.Sorted(maps.Keys(r.Pipelines)) {
		p := r.Pipelines[name]
		if p.Scheduled() {
			s.scheduled = append(s.scheduled, p)
		}
		if p.Document != nil && s.opts.Followers[name] == nil && r.Followers[name] != nil {
			if s.opts.Followers == nil {
				s.opts.Followers = map[string]agentrunner.RunFollower{}
			}
			s.opts.Followers[name], s.docs[name] = r.Followers[name], *p.Document
		}
	}
}

// moveRun moves a run to its pipeline's reloaded graph when it may: a
// queued run has no step run yet, and a run in flight whose graph is the
// same goes on where it is. Any other run keeps its graph, with the kinds
// it ran on (fz, unless an earlier reload froze it already).
func (s *Scheduler) moveRun(rs *runState, r *Reloaded, fz *frozen) {
	name := rs.run.Pipeline
	next := r.Pipelines[name]
	switch {
	case next != nil && rs.run.Status == agentrunner.RunQueued && len(rs.steps) == 0:
		rs.pipeline, rs.frozen = next, nil
	case next != nil && rs.frozen == nil && r.Same[name] && sameSteps(rs.pipeline, next):
		rs.pipeline = next
	case rs.frozen == nil:
		rs.frozen = fz
	}
}

// sameSteps reports whether b has every step of a, of the same kind: a
// guard on Reloaded.Same, so a run in flight never loses its step.
func sameSteps(a, b *agentrunner.Pipeline) bool {
	if len(a.Steps) != len(b.Steps) {
		return false
	}
	for id, st := range a.Steps {
		if o := b.Steps[id]; o == nil || o.Kind != st.Kind {
			return false
		}
	}
	return true
}

// unfinished lists the runs the scheduler keeps: queued, running and
// halted.
func (s *Scheduler) unfinished() []*runState {
	out := slices.Collect(maps.Values(s.runs))
	return append(out, slices.Collect(maps.Values(s.halted))...)
}

// unfreeze forgets the graph a run that ended kept.
func (s *Scheduler) unfreeze(rs *runState) {
	if rs.frozen == nil {
		return
	}
	s.graphsMu.Lock()
	delete(s.kept, rs.run.ID)
	s.graphsMu.Unlock()
}

// checkReload refuses reloaded pipelines that cannot run: a step kind
// missing, a label that does not compile, or a document changed (its
// follower keeps the document of the pipeline's runs in flight). It
// returns the compiled labels.
func (s *Scheduler) checkReload(r *Reloaded) (map[*agentrunner.Step]*route.Extractor, error) {
	labels := map[*agentrunner.Step]*route.Extractor{}
	for _, name := range slices.Sorted(maps.Keys(r.Pipelines)) {
		p := r.Pipelines[name]
		if err := compile(p, r.Kinds, labels); err != nil {
			return nil, err
		}
		if err := s.checkDocument(name, p); err != nil {
			return nil, err
		}
	}
	return labels, nil
}

// checkDocument refuses a change of the document of a pipeline the
// scheduler has run: its follower, made at the start or when the
// pipeline first had a document, keeps it.
func (s *Scheduler) checkDocument(name string, p *agentrunner.Pipeline) error {
	doc, had := s.docs[name]
	_, known := s.opts.Pipelines[name]
	switch {
	case had && (p.Document == nil || *p.Document != doc):
		return fmt.Errorf("the document of pipeline %s changed: that needs a restart", name)
	case !had && known && p.Document != nil:
		return fmt.Errorf("pipeline %s has a document now: that needs a restart", name)
	}
	return nil
}

// reloadDetails says what a reload changes: the pipelines it adds,
// removes and changes (those whose runs in flight keep their graph).
func (s *Scheduler) reloadDetails(r *Reloaded) map[string]any {
	var added, removed, changed []string
	for name := range r.Pipelines {
		if s.opts.Pipelines[name] == nil {
			added = append(added, name)
		} else if !r.Same[name] {
			changed = append(changed, name)
		}
	}
	for name := range s.opts.Pipelines {
		if r.Pipelines[name] == nil {
			removed = append(removed, name)
		}
	}
	d := map[string]any{}
	for key, names := range map[string][]string{"added": added, "removed": removed, "changed": changed} {
		if len(names) > 0 {
			slices.Sort(names)
			d[key] = names
		}
	}
	return d
}

// kindOf is the step kind of name that rs runs on.
func (s *Scheduler) kindOf(rs *runState, name string) agentrunner.StepKind {
	if rs.frozen != nil {
		return rs.frozen.kinds[name]
	}
	return s.opts.Kinds[name]
}

// kindSets are the step kinds the unfinished runs run on: the current
// ones, and those runs frozen by reloads kept.
func (s *Scheduler) kindSets() []map[string]agentrunner.StepKind {
	out := []map[string]agentrunner.StepKind{s.opts.Kinds}
	seen := map[*frozen]bool{}
	for _, rs := range s.unfinished() {
		if fz := rs.frozen; fz != nil && !seen[fz] {
			seen[fz] = true
			out = append(out, fz.kinds)
		}
	}
	return out
}

// Pipelines are the pipelines new runs start on: those the scheduler
// was made with, or the last reload's. The map is not to be changed.
func (s *Scheduler) Pipelines() map[string]*agentrunner.Pipeline {
	s.graphsMu.RLock()
	defer s.graphsMu.RUnlock()
	return s.opts.Pipelines
}

// RunPipeline is the graph run runs on: the one it began on when a
// reload changed or removed its pipeline while it was in flight, else
// its pipeline's current one; nil when there is none.
func (s *Scheduler) RunPipeline(run *agentrunner.Run) *agentrunner.Pipeline {
	s.graphsMu.RLock()
	defer s.graphsMu.RUnlock()
	if p := s.kept[run.ID]; p != nil {
		return p
	}
	return s.opts.Pipelines[run.Pipeline]
}
