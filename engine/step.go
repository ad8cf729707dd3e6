package engine

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/step/agent"
	"github.com/agentrunner/agentrunner/step/execution"
)

// outcome is what running a step produced, to be committed with the
// attempt's result. events are kept even when the step failed.
type outcome struct {
	outputPath string
	exitCode   *int
	usage      agentrunner.Usage
	events     []*agentrunner.Event
}

func (o *outcome) add(e *Engine, c *agentrunner.Cycle, step, typ string, level agentrunner.Level, details map[string]any) {
	ch := &agentrunner.Change{}
	e.event(ch, c, step, typ, level, details)
	o.events = append(o.events, ch.Events...)
}

// runStep runs one attempt of the cycle's current step.
func (e *Engine) runStep(ctx context.Context, c *agentrunner.Cycle, att *agentrunner.Attempt) (*outcome, error) {
	step := e.cfg.Pipeline.Steps[att.Step]
	err := e.fileOp(opAttemptFolder, func() (err error) {
		_, err = attemptFolder(att.Dir) // the agent step kind clears a reused folder's output itself
		return err
	})
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "create attempt folder: %w", err)
	}
	if step.Kind == config.StepExecution {
		return e.runExecution(ctx, c, step, att)
	}
	return e.runAgent(ctx, c, step, att)
}

// attemptFolder creates an attempt's folder, and its parent on the first
// attempt of a cycle. It reports whether the folder was there already,
// which should never be (an interrupted attempt is retried under a new
// number).
func attemptFolder(dir string) (reused bool, err error) {
	err = os.Mkdir(dir, 0o755)
	switch {
	case err == nil:
		return false, nil
	case errors.Is(err, fs.ErrExist):
		return true, nil
	case errors.Is(err, fs.ErrNotExist):
		return false, os.MkdirAll(dir, 0o755)
	}
	return false, err
}

// runAgent runs an attempt of an agent step through the agent step kind,
// which the graph scheduler runs agent steps through too.
func (e *Engine) runAgent(ctx context.Context, c *agentrunner.Cycle, step *config.Step, att *agentrunner.Attempt) (*outcome, error) {
	kind, err := e.agentKind()
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "%w", err)
	}
	res, err := kind.Run(ctx, &agentrunner.StepAttempt{
		Run: c, Step: &agentrunner.Step{ID: step.ID, Kind: agentrunner.KindAgent, Config: step}, Attempt: att,
		Dir: att.Dir, RunDir: c.Dir, Timeout: e.stepTimeout(c, step), Late: e.overdue(c),
	})
	if res == nil {
		return nil, err
	}
	return &outcome{outputPath: res.Path, exitCode: res.ExitCode, usage: res.Usage, events: res.Events}, err
}

// runExecution runs an attempt of an execution step through the
// execution step kind. Its outcome is the events of the hand-off.
func (e *Engine) runExecution(ctx context.Context, c *agentrunner.Cycle, step *config.Step, att *agentrunner.Attempt) (*outcome, error) {
	kind, err := execution.New(execution.Options{
		Workspace: e.ws, Store: e.store, Service: e.exec, Clock: e.clock, Logger: e.log,
		Commit: e.commit, Sleep: e.sleep, Busy: e.busy, Deliver: e.deliverNote,
	})
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "%w", err)
	}
	res, err := kind.Run(ctx, &agentrunner.StepAttempt{
		Run: c, Step: &agentrunner.Step{ID: step.ID, Kind: agentrunner.KindExecution, Config: step}, Attempt: att,
		Dir: att.Dir, RunDir: c.Dir, Timeout: e.stepTimeout(c, step), Late: e.overdue(c),
	})
	if res == nil {
		return nil, err
	}
	return &outcome{events: res.Events}, err
}

// agentKind is the agent step kind for the current workspace and
// mailboxes, which a reload replaces.
func (e *Engine) agentKind() (*agent.Kind, error) {
	return agent.New(agent.Options{
		Workspace: e.ws, Mailboxes: e.boxes, Runtimes: e.runtimes, Store: e.store, Clock: e.clock, Logger: e.log,
		OnEvent: e.onEvent, MCPCommand: e.mcpCommand, Faults: e.faults, Busy: e.busy,
	})
}

// deliver deposits the messages of a step whose artifact is not its own
// output (a fallback), adding their events to out.
func (e *Engine) deliver(c *agentrunner.Cycle, step *config.Step, data []byte, note string, out *outcome) error {
	evs, err := e.deliverNote(c, step, data, note)
	out.events = append(out.events, evs...)
	return err
}

// deliverNote deposits the messages of a step through the agent step
// kind, which knows the mailboxes; an execution step's carry its outcome
// as note.
func (e *Engine) deliverNote(c *agentrunner.Cycle, step *config.Step, data []byte, note string) ([]*agentrunner.Event, error) {
	kind, err := e.agentKind()
	if err != nil {
		return nil, err
	}
	return kind.Deliver(c, step, data, note)
}

// inputPaths lists the input artifacts of a step, for failure reports.
func (e *Engine) inputPaths(c *agentrunner.Cycle, step string) []string {
	s := e.cfg.Pipeline.Steps[step]
	if s.Kind == config.StepExecution {
		return []string{filepath.Join(c.Dir, s.Artifact)}
	}
	var paths []string
	for _, in := range e.cfg.Agents[s.Agent].Inputs {
		switch {
		case in.Memory != "":
			paths = append(paths, e.ws.Layout.Memory(in.Memory))
		case in.History == nil:
			paths = append(paths, filepath.Join(c.Dir, in.Artifact))
		}
	}
	return paths
}

// stepTimeout is the time limit of an attempt: the step's, cut to what is
// left of the cycle unless the step is the final one, which always gets
// its own time to judge what the cycle has.
func (e *Engine) stepTimeout(c *agentrunner.Cycle, s *config.Step) time.Duration {
	t := e.cfg.StepTimeout(s)
	if s.ID == e.ws.Machine.Final() {
		return t
	}
	return max(min(t, e.deadline(c).Sub(e.clock.Now())), time.Millisecond)
}
