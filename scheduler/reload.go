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
	// Path is the configuration file read.
	Path string
}

// reload applies an operator's reload between two passes: attempts that
// start from here on run with the new pipelines and kinds (prompts,
// contracts, timeouts, retries, policies, schedules); running attempts
// finish as they began. The runs in flight keep their step runs: a reload
// that would change a graph is refused by Options.Reload.
func (s *Scheduler) reload(ch *agentrunner.Change, cmd *agentrunner.Command) {
	if s.opts.Reload == nil {
		s.ignore(ch, cmd, "this runner cannot reload its configuration")
		return
	}
	r, err := s.opts.Reload()
	if err == nil {
		err = s.checkReload(r)
	}
	if err != nil {
		// A warning: the reload may have been asked by a signal or the
		// file watcher, with nobody reading the command's result.
		s.workspaceEvent(ch, EventCommandIgnored, agentrunner.LevelWarn, commandDetails(cmd, map[string]any{"kind": cmd.Kind, "reason": err.Error()}))
		s.consume(ch, cmd, "ignored: "+err.Error())
		return
	}
	for name := range s.due {
		if !sameSchedule(s.opts.Pipelines[name], r.Pipelines[name]) {
			delete(s.due, name) // a new schedule counts from the newest run
		}
	}
	s.opts.Pipelines, s.opts.Kinds = r.Pipelines, r.Kinds
	s.labels = map[*agentrunner.Step]*route.Extractor{}
	s.scheduled = nil
	for _, name := range slices.Sorted(maps.Keys(r.Pipelines)) {
		p := r.Pipelines[name]
		_ = s.compile(p) // checked by checkReload
		if p.Scheduled() {
			s.scheduled = append(s.scheduled, p)
		}
	}
	for _, rs := range s.runs {
		rs.pipeline = r.Pipelines[rs.pipeline.Name]
	}
	for _, q := range s.queued {
		for _, rs := range q {
			rs.pipeline = r.Pipelines[rs.pipeline.Name]
		}
	}
	s.workspaceEvent(ch, EventReloaded, agentrunner.LevelInfo, commandDetails(cmd, map[string]any{"path": r.Path}))
	s.consume(ch, cmd, "reloaded "+r.Path)
}

// checkReload refuses reloaded pipelines the runs in flight cannot move
// to: a pipeline or a step gone, or a step kind missing.
func (s *Scheduler) checkReload(r *Reloaded) error {
	for name, old := range s.opts.Pipelines {
		p := r.Pipelines[name]
		if p == nil {
			return fmt.Errorf("pipeline %s is gone: that needs a restart", name)
		}
		for id := range old.Steps {
			if p.Steps[id] == nil {
				return fmt.Errorf("step %s of pipeline %s is gone: that needs a restart", id, name)
			}
		}
	}
	saved := s.opts.Kinds
	defer func() { s.opts.Kinds = saved }()
	s.opts.Kinds = r.Kinds
	for _, p := range r.Pipelines {
		if err := s.compile(p); err != nil {
			return err
		}
	}
	return nil
}
