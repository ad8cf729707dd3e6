package scheduler

import (
	"fmt"
	"maps"
	"slices"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/route"
)

// EventReloaded: an operator reloaded the configuration and its files.
// EventCommandIgnored: a command that had nothing to act on.
const (
	EventReloaded       = "config.reloaded"
	EventCommandIgnored = "command.ignored"
)

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
func (s *Scheduler) reload(ch *agentrunner.Change, cmd *agentrunner.Command) string {
	if s.opts.Reload == nil {
		return s.ignore(ch, cmd, "this runner cannot reload its configuration")
	}
	r, err := s.opts.Reload()
	if err == nil {
		err = s.checkReload(r)
	}
	if err != nil {
		return s.ignore(ch, cmd, err.Error())
	}
	s.opts.Pipelines, s.opts.Kinds = r.Pipelines, r.Kinds
	s.labels = map[*agentrunner.Step]*route.Extractor{}
	s.scheduled = nil
	for _, name := range slices.Sorted(maps.Keys(r.Pipelines)) {
		p := r.Pipelines[name]
		_ = s.compile(p) // checked by checkReload
		if p.Every > 0 {
			s.scheduled = append(s.scheduled, p)
		}
	}
	clear(s.due) // a new schedule counts from the newest run
	for _, rs := range s.runs {
		rs.pipeline = r.Pipelines[rs.pipeline.Name]
	}
	for _, q := range s.queued {
		for _, rs := range q {
			rs.pipeline = r.Pipelines[rs.pipeline.Name]
		}
	}
	s.commandEvent(ch, cmd, EventReloaded, agentrunner.LevelInfo, map[string]any{"path": r.Path})
	return "reloaded " + r.Path
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

// ignore consumes a command that has nothing to act on, saying why.
func (s *Scheduler) ignore(ch *agentrunner.Change, cmd *agentrunner.Command, why string) string {
	s.commandEvent(ch, cmd, EventCommandIgnored, agentrunner.LevelInfo, map[string]any{"kind": cmd.Kind, "reason": why})
	return "ignored: " + why
}

// commandEvent records an event caused by an operator's command: who,
// which command, with what.
func (s *Scheduler) commandEvent(ch *agentrunner.Change, cmd *agentrunner.Command, typ string, level agentrunner.Level, details map[string]any) {
	details["operator"], details["command"] = cmd.Operator, cmd.ID
	if len(cmd.Args) > 0 {
		details["args"] = cmd.Args
	}
	ch.Events = append(ch.Events, &agentrunner.Event{Timestamp: s.clock.Now(), Type: typ, Level: level, Details: details})
}
