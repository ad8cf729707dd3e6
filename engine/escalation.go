package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/internal/atomicfile"
	"github.com/agentrunner/agentrunner/webhook"
)

// Event types of escalation and recovery.
const (
	EventEscalation = "escalation"
	EventSkipped    = "step.skipped"
	EventHalted     = "cycle.halted"
	EventResumed    = "cycle.resumed"
	EventForced     = "cycle.forced"
)

// escalate handles a step that failed for good, as its policy says
// (FR-048..051): skip to the last known good artifact, halt until an
// operator resumes, or end the cycle failed. Each records the failure's
// full context and notifies operators through the webhook, in the change
// that also records the failed attempt.
func (e *Engine) escalate(ctx context.Context, c *agentrunner.Cycle, failed *agentrunner.Attempt, ch *agentrunner.Change) (*agentrunner.Cycle, *agentrunner.Attempt, error) {
	step := e.cfg.Pipeline.Steps[failed.Step]
	policy := e.cfg.StepPolicyName(step)
	details := map[string]any{
		"step": failed.Step, "attempts": failed.Number, "error_class": string(failed.ErrorClass), "error": failed.Error,
		"inputs": e.inputPaths(c, failed.Step), "policy": policy,
	}
	alert := webhook.Event{
		Kind: webhook.KindEscalation, ID: fmt.Sprintf("escalation/%s/%s/%d", c.ID, failed.Step, failed.Number),
		Time: e.clock.Now(), Pipeline: e.cfg.Name, CycleID: c.ID, Step: failed.Step, Agent: step.Agent,
		Attempts: failed.Number, ErrorClass: string(failed.ErrorClass), Error: failed.Error, Inputs: e.inputPaths(c, failed.Step),
		Policy: policy,
	}
	if policy == config.PolicySkip {
		fb, err := e.fallback(ctx, c, step)
		if err != nil {
			return c, nil, err
		}
		if fb != nil {
			details["fallback"], details["fallback_cycle"] = fb.path, fb.cycleID
			alert.Fallback = fb.path
			e.event(ch, c, failed.Step, EventEscalation, agentrunner.LevelError, details)
			e.alert(ch, alert)
			return e.skip(ctx, c, step, fb, ch)
		}
		// With nothing to stand in for the step, skip is halt (issue 5).
		policy, details["policy"], details["fallback"] = config.PolicyHalt, config.PolicyHalt, "none: no earlier cycle has a valid "+e.stepFile(step)
		alert.Policy = config.PolicyHalt
	}
	e.event(ch, c, failed.Step, EventEscalation, agentrunner.LevelError, details)
	e.alert(ch, alert)
	if policy == config.PolicyFail {
		return e.end(ctx, c, ch, agentrunner.CycleFailed, fmt.Sprintf("step %s failed after %d attempt(s): %s: %s", failed.Step, failed.Number, failed.ErrorClass, failed.Error))
	}
	from := agentrunner.State(c.Step)
	if err := e.ws.Machine.Check(from, agentrunner.StateHalted); err != nil {
		return c, nil, err
	}
	halted := *c
	halted.Status = agentrunner.CycleHalted
	halted.Error = fmt.Sprintf("step %s failed after %d attempt(s): %s: %s; waiting for an operator to resume", failed.Step, failed.Number, failed.ErrorClass, failed.Error)
	ch.Cycle = &halted
	e.transition(ch, c, from, agentrunner.StateHalted)
	e.event(ch, c, failed.Step, EventHalted, agentrunner.LevelError, map[string]any{"step": failed.Step, "error": halted.Error})
	if err := e.commit(ctx, ch); err != nil {
		return c, nil, err
	}
	return &halted, nil, nil
}

// end ends a cycle that will not run its remaining steps.
func (e *Engine) end(ctx context.Context, c *agentrunner.Cycle, ch *agentrunner.Change, status agentrunner.CycleStatus, why string) (*agentrunner.Cycle, *agentrunner.Attempt, error) {
	from := c.State()
	if err := e.ws.Machine.Check(from, agentrunner.StateWaiting); err != nil {
		return c, nil, err
	}
	ended := *c
	ended.Status, ended.Step, ended.EndedAt, ended.Error = status, "", e.clock.Now(), why
	ch.Cycle = &ended
	e.transition(ch, c, from, agentrunner.StateWaiting)
	typ, level := agentrunner.EventCycleFailed, agentrunner.LevelError
	if status == agentrunner.CycleAborted {
		typ, level = agentrunner.EventCycleAborted, agentrunner.LevelWarn
	}
	e.event(ch, c, c.Step, typ, level, map[string]any{
		"step": c.Step, "status": string(status), "error": why, "inputs": e.inputPaths(c, c.Step),
		"duration_ms": ended.EndedAt.Sub(c.StartedAt).Milliseconds(),
	})
	if err := e.commit(ctx, ch); err != nil {
		return c, nil, err
	}
	return &ended, nil, nil
}

// alert adds a webhook notification to a change, when a webhook is
// configured: the outbox delivers it, signed, with retries.
func (e *Engine) alert(ch *agentrunner.Change, ev webhook.Event) {
	if e.cfg.Escalation.Webhook.URL == "" {
		return
	}
	body, err := ev.Body()
	if err != nil {
		e.log.Error("building a webhook notification", "id", ev.ID, "error", err)
		return
	}
	ch.Outbox = append(ch.Outbox, &agentrunner.OutboxMessage{
		Key: ev.ID, Kind: agentrunner.OutboxWebhook, CycleID: ev.CycleID, Payload: body, CreatedAt: e.clock.Now(),
	})
}

// stepFile is the artifact a step produces, if any.
func (e *Engine) stepFile(s *config.Step) string {
	if a := e.cfg.Agents[s.Agent]; s.Kind == config.StepAgent && a != nil {
		return a.Output.File
	}
	return ""
}

// fallbackArtifact is the last known good artifact of a step.
type fallbackArtifact struct {
	path    string
	cycleID string
	data    []byte
}

// maxFallbackScan bounds how many earlier cycles are searched (FR-051).
const maxFallbackScan = 200

// fallback finds the most recent valid artifact of a step's name in
// earlier cycles (FR-051); nil when there is none (or the step has no
// artifact, as an execution step).
func (e *Engine) fallback(ctx context.Context, c *agentrunner.Cycle, s *config.Step) (*fallbackArtifact, error) {
	file := e.stepFile(s)
	if file == "" {
		return nil, nil
	}
	agent := e.ws.Agents[s.Agent]
	cycles, err := e.store.Cycles(ctx, agentrunner.CycleFilter{Before: c.ID, Limit: maxFallbackScan})
	if err != nil {
		return nil, err
	}
	for _, prev := range cycles {
		path := filepath.Join(prev.Dir, file)
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		if len(agent.Contract.Validate(data)) == 0 {
			return &fallbackArtifact{path: path, cycleID: prev.ID, data: data}, nil
		}
	}
	return nil, nil
}

// skip publishes a fallback artifact in place of the step's output,
// delivers the step's messages from it, and moves on (FR-050).
func (e *Engine) skip(ctx context.Context, c *agentrunner.Cycle, s *config.Step, fb *fallbackArtifact, ch *agentrunner.Change) (*agentrunner.Cycle, *agentrunner.Attempt, error) {
	file := e.stepFile(s)
	dst := filepath.Join(c.Dir, file)
	err := e.untilResourced(ctx, c.ID, s.ID, opFallback, func() error {
		return e.fileOp(opFallback, func() error { return atomicfile.WriteFile(dst, fb.data, 0o644) })
	})
	if err != nil {
		return c, nil, fmt.Errorf("publish fallback %s: %w", fb.path, err)
	}
	out := &outcome{}
	note := fmt.Sprintf("%s failed; %s of cycle %s stands in for it: %s", s.ID, file, fb.cycleID, dst)
	err = e.untilResourced(ctx, c.ID, s.ID, opDeliver, func() error {
		out = &outcome{}
		return e.deliver(c, s, fb.data, note, out)
	})
	if err != nil {
		return c, nil, err
	}
	ch.Events = append(ch.Events, out.events...)
	e.event(ch, c, s.ID, EventSkipped, agentrunner.LevelWarn, map[string]any{
		"artifact": file, "fallback": fb.path, "fallback_cycle": fb.cycleID, "path": dst,
	})
	return e.advance(ctx, c, ch)
}
