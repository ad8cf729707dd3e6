package scheduler

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/agentrunner/agentrunner"
)

// Events of the operators' overrides, which apply to the whole workspace.
// Each consumed command also keeps its result in the audit log.
const (
	EventPaused   = "loop.paused"
	EventUnpaused = "loop.resumed"
	// EventInjected: an operator's message was put into an agent's
	// mailbox (Options.Inject writes it).
	EventInjected = "mailbox.injected"
	// EventCommandIgnored: a command that had nothing to act on (a pause
	// of a paused workspace, a resume with nothing to resume).
	EventCommandIgnored = "command.ignored"
)

// override applies one of the operators' overrides (pause, resume,
// force-cycle, inject), consuming it in ch; other kinds are left alone. A force-cycle given
// while paused stays pending until the resume.
func (s *Scheduler) override(ctx context.Context, ch *agentrunner.Change, cmd *agentrunner.Command) error {
	switch cmd.Kind {
	case agentrunner.CommandPause:
		s.pause(ch, cmd)
	case agentrunner.CommandResume:
		s.resumeOverride(ch, cmd)
	case agentrunner.CommandForceCycle:
		if s.control.Paused {
			return nil
		}
		return s.forceRun(ctx, ch, cmd)
	case agentrunner.CommandInject:
		s.inject(ctx, ch, cmd)
	}
	return nil
}

// loadControl reads the workspace's control state back, so a pause
// survives a restart.
func (s *Scheduler) loadControl(ctx context.Context) error {
	ctl, err := s.store.Control(ctx)
	if err != nil {
		return fmt.Errorf("read the control state: %w", err)
	}
	s.control = *ctl
	return nil
}

// mayStart reports whether an attempt may start now: a slot is free, the
// workspace is not paused and the runner is not shutting down.
func (s *Scheduler) mayStart() bool {
	return s.slots > 0 && !s.control.Paused && !s.draining
}

// pause stops attempts from starting anywhere in the workspace: those
// that would start stay pending until the resume; those running finish
// and their outcomes are committed. Scheduled runs do not start either.
func (s *Scheduler) pause(ch *agentrunner.Change, cmd *agentrunner.Command) {
	if s.control.Paused {
		s.ignore(ch, cmd, fmt.Sprintf("the workspace is already paused (by %s)", s.control.PausedBy))
		return
	}
	s.control = agentrunner.Control{Paused: true, PausedBy: cmd.Operator, PausedAt: s.clock.Now()}
	next := s.control
	ch.Control = &next
	s.workspaceEvent(ch, EventPaused, agentrunner.LevelWarn, commandDetails(cmd, nil))
	s.consume(ch, cmd, "paused")
}

// resumeAction is one thing a resume command does. It returns what it
// did, or "" and why it had nothing to do.
type resumeAction func(ch *agentrunner.Change, cmd *agentrunner.Command) (did, nothing string)

// resumeActions are what a resume command does, in order; one command
// does them all: it lifts a pause and resumes the halted cycle of the
// serial pipeline (the learning loop).
func (s *Scheduler) resumeActions() []resumeAction {
	return []resumeAction{s.unpause, s.resumeSerial}
}

// resumeSerial resumes the halted run of a serial pipeline, if there is
// one.
func (s *Scheduler) resumeSerial(ch *agentrunner.Change, cmd *agentrunner.Command) (string, string) {
	for _, id := range slices.Sorted(maps.Keys(s.halted)) {
		if rs := s.halted[id]; rs.pipeline.Serial {
			if result, ok := s.resumeRun(ch, rs, cmd); ok {
				return result, ""
			} else {
				return "", result
			}
		}
	}
	return "", "no cycle is halted"
}

// resumeOverride applies a resume command: every action that has something to
// act on, each saying what it did in the result ("lifted the pause;
// resumed …"); with none, the command is ignored with their reasons.
func (s *Scheduler) resumeOverride(ch *agentrunner.Change, cmd *agentrunner.Command) {
	var did, nothing []string
	for _, act := range s.resumeActions() {
		d, n := act(ch, cmd)
		if d != "" {
			did = append(did, d)
		} else if n != "" {
			nothing = append(nothing, n)
		}
	}
	if len(did) == 0 {
		s.ignore(ch, cmd, "nothing to resume: "+strings.Join(nothing, "; "))
		return
	}
	s.consume(ch, cmd, strings.Join(did, "; "))
}

// unpause lifts a pause: the attempts it held start in the same commit,
// as slots allow. The commands are looked at again at once, for a
// force-cycle the pause held.
func (s *Scheduler) unpause(ch *agentrunner.Change, cmd *agentrunner.Command) (string, string) {
	if !s.control.Paused {
		return "", "the workspace is not paused"
	}
	s.workspaceEvent(ch, EventUnpaused, agentrunner.LevelInfo, commandDetails(cmd, map[string]any{"paused_by": s.control.PausedBy}))
	s.control = agentrunner.Control{}
	ch.Control = &agentrunner.Control{}
	s.Wake()
	return "lifted the pause", ""
}

// forceRun starts a run now, whatever the pipeline's schedule says: of the
// pipeline the command names (args "pipeline"), else of the workspace's
// serial pipeline (the learning loop). A pipeline at its
// max_concurrent_runs queues the run. A scheduled pipeline counts its
// next run from this one.
func (s *Scheduler) forceRun(ctx context.Context, ch *agentrunner.Change, cmd *agentrunner.Command) error {
	p, why := s.forced(cmd)
	if p == nil {
		s.ignore(ch, cmd, why)
		return nil
	}
	id, err := s.startRun(ctx, ch, p, nil, "")
	if err != nil {
		return err
	}
	if p.Every > 0 {
		s.due[p.Name] = s.clock.Now().Add(p.Every)
	}
	verb := "started"
	if rs := s.runs[id]; rs != nil && rs.run.Status == agentrunner.RunQueued {
		verb = "queued"
	}
	for _, ev := range ch.Events {
		if ev.CycleID == id && ev.Type == runEvent(p, verb) {
			ev.Details["forced_by"], ev.Details["command"] = cmd.Operator, cmd.ID
		}
	}
	s.consume(ch, cmd, fmt.Sprintf("%s %s %s", verb, noun(p), id))
	return nil
}

// forced returns the pipeline a force-cycle command is about, or nil and
// why there is none.
func (s *Scheduler) forced(cmd *agentrunner.Command) (*agentrunner.Pipeline, string) {
	if name, _ := cmd.Args["pipeline"].(string); name != "" {
		if p := s.opts.Pipelines[name]; p != nil {
			return p, ""
		}
		return nil, fmt.Sprintf("pipeline %q is not configured", name)
	}
	var serial []string
	for name, p := range s.opts.Pipelines {
		if p.Serial {
			serial = append(serial, name)
		}
	}
	switch len(serial) {
	case 1:
		return s.opts.Pipelines[serial[0]], ""
	case 0:
		return nil, "the command names no pipeline and the workspace has no serial pipeline"
	}
	slices.Sort(serial)
	return nil, fmt.Sprintf("the command names no pipeline and the workspace has several serial ones (%s)", strings.Join(serial, ", "))
}

// inject hands an inject command to Options.Inject, which makes the
// message's deposit, and consumes it in the same change, with the
// deposit and the event that says so. A delivery
// refused as invalid (no such agent) ignores the command; any other
// failure leaves it pending, to be tried again at the next look.
func (s *Scheduler) inject(ctx context.Context, ch *agentrunner.Change, cmd *agentrunner.Command) {
	if s.opts.Inject == nil {
		s.ignore(ch, cmd, "this runner delivers no messages to mailboxes")
		return
	}
	inj, err := s.opts.Inject(ctx, cmd)
	switch {
	case agentrunner.ErrorCode(err) == agentrunner.EINVALID:
		s.ignore(ch, cmd, err.Error())
		return
	case err != nil:
		s.log.Warn("delivering an operator's message", "command", cmd.ID, "error", err)
		return
	}
	if inj.Mail != nil {
		s.deposit(ch, inj.Mail)
	}
	if ev := inj.Event; ev != nil {
		if ev.Timestamp.IsZero() {
			ev.Timestamp = s.clock.Now()
		}
		ch.Events = append(ch.Events, ev)
	}
	s.consume(ch, cmd, inj.Result)
}

// ignore consumes a command that has nothing to act on, with the reason
// in its result and a command.ignored event.
func (s *Scheduler) ignore(ch *agentrunner.Change, cmd *agentrunner.Command, why string) {
	s.workspaceEvent(ch, EventCommandIgnored, agentrunner.LevelInfo, commandDetails(cmd, map[string]any{"kind": cmd.Kind, "reason": why}))
	s.consume(ch, cmd, "ignored: "+why)
}

// commandDetails are the details of an event caused by cmd: who, which
// command, with what.
func commandDetails(cmd *agentrunner.Command, more map[string]any) map[string]any {
	d := map[string]any{"operator": cmd.Operator, "command": cmd.ID}
	if len(cmd.Args) > 0 {
		d["args"] = cmd.Args
	}
	for k, v := range more {
		d[k] = v
	}
	return d
}

// workspaceEvent appends an event about no run to a change.
func (s *Scheduler) workspaceEvent(ch *agentrunner.Change, typ string, level agentrunner.Level, details map[string]any) {
	ch.Events = append(ch.Events, &agentrunner.Event{Timestamp: s.clock.Now(), Type: typ, Level: level, Details: details})
}
