package engine

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/internal/atomicfile"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/mcp"
	"github.com/agentrunner/agentrunner/memory"
	"github.com/agentrunner/agentrunner/prompt"
	"github.com/agentrunner/agentrunner/tool"
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
	var reused bool
	err := e.fileOp(opAttemptFolder, func() (err error) {
		reused, err = attemptFolder(att.Dir)
		return err
	})
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "create attempt folder: %w", err)
	}
	if step.Kind == config.StepExecution {
		return e.runExecution(ctx, c, step, att)
	}
	return e.runAgent(ctx, c, step, att, reused)
}

// attemptFolder creates an attempt's folder, and its parent on the first
// attempt of a cycle. It reports whether the folder was there already,
// which should never be (an interrupted attempt is retried under a new
// number); if it is, the caller removes what an earlier run left in it.
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

// runAgent assembles the agent's context, runs it, validates its output and
// publishes it into the cycle directory, then delivers its messages.
func (e *Engine) runAgent(ctx context.Context, c *agentrunner.Cycle, step *config.Step, att *agentrunner.Attempt, reused bool) (*outcome, error) {
	agent := e.ws.Agents[step.Agent]
	out := &outcome{}
	inputs, err := e.inputs(ctx, c, agent.Agent, out)
	if err != nil {
		return out, err
	}
	inv := &agentrunner.Invocation{
		CycleID: c.ID, Step: step.ID, Agent: agent.Name, Attempt: att.Number,
		PromptPath: filepath.Join(att.Dir, "prompt.md"), Dir: att.Dir,
		OutputPath: filepath.Join(att.Dir, agent.Output.File), CycleDir: c.Dir,
		MailboxPath: e.boxes.Path(agent.Name), Inputs: inputs,
		TemplatePath: agent.TemplatePath, Timeout: e.stepTimeout(c, step),
	}
	if agent.Output.Schema != "" {
		inv.SchemaPath = agent.SchemaPath
	}
	if agent.Memory {
		inv.MemoryPath = e.ws.Layout.Memory(agent.Name)
	}
	inv.Tools = agent.Tools
	if inv.TokenBudget, err = e.budget(ctx, c, agent.Agent); err != nil {
		return out, err
	}
	pc := prompt.Context{
		CycleID: c.ID, Step: step.ID, Agent: agent.Name, Attempt: att.Number,
		Identity: agent.Identity, MailboxPath: inv.MailboxPath, MaxMessages: e.boxes.Max(),
		Inputs: inputs, TemplatePath: inv.TemplatePath, SchemaPath: inv.SchemaPath, OutputPath: inv.OutputPath,
	}
	for _, t := range agent.Tools {
		pc.Tools = append(pc.Tools, prompt.Tool{Name: t, Section: e.ws.Tools[t]})
	}
	switch e.cfg.Providers[agent.Provider].Kind {
	case config.ProviderOpenAI, config.ProviderAnthropic:
		// A model cannot write files: its answer is the artifact. It reads
		// its files with filesystem_read, or finds them in the prompt.
		pc.FinalAnswer = true
		if agent.InlineInputs {
			pc.Inline = inlineFiles(inv)
		}
	case config.ProviderProcess:
		if len(agent.Tools) > 0 && e.mcpCommand != "" {
			call := agentrunner.ToolCall{Agent: agent.Name, Step: step.ID, CycleID: c.ID, Attempt: att.Number}
			err := e.fileOp(opMCPConfig, func() (err error) {
				inv.MCPConfig, err = mcp.WriteConfig(att.Dir, e.mcpCommand, e.cfg.Path, call)
				return err
			})
			if err != nil {
				return out, agentrunner.Fail(agentrunner.ClassInternal, "write MCP configuration: %w", err)
			}
		}
	}
	inv.Prompt = prompt.Build(pc)
	// The prompt is kept so an operator can read exactly what the agent saw.
	err = e.fileOp(opPrompt, func() error { return atomicfile.Write(inv.PromptPath, []byte(inv.Prompt), 0o644) })
	if err != nil {
		return out, agentrunner.Fail(agentrunner.ClassInternal, "write prompt: %w", err)
	}
	if reused {
		os.Remove(inv.OutputPath) // the attempt never mistakes its earlier run's file for its own
	}

	var lastEvent int64 // a child's tool calls are its events after this one
	if inv.MCPConfig != "" {
		lastEvent = e.lastEventID(ctx)
	}
	runCtx, cancel := context.WithTimeout(ctx, inv.Timeout)
	defer cancel()
	e.busy(inv.Timeout + e.cfg.Providers[agent.Provider].KillGrace.D())
	res, err := e.runtimes[agent.Provider].Run(runCtx, inv)
	if inv.MCPConfig != "" {
		e.reportChildToolCalls(ctx, c, step.ID, lastEvent)
	}
	if res != nil {
		out.exitCode, out.usage = res.ExitCode, res.Usage
	}
	if err != nil {
		if errors.Is(runCtx.Err(), context.DeadlineExceeded) && ctx.Err() == nil && agentrunner.ClassOf(err) != agentrunner.ClassTimeout {
			err = agentrunner.Fail(agentrunner.ClassTimeout, "agent timed out after %s: %v", inv.Timeout, err)
		}
		return out, err
	}
	var data []byte
	err = e.fileOp(opReadArtifact, func() (err error) {
		data, err = atomicfile.ReadFileLimit(inv.OutputPath, int64(agent.Output.MaxBytes))
		return err
	})
	if tl := (*atomicfile.TooLargeError)(nil); errors.As(err, &tl) {
		return out, agentrunner.Fail(agentrunner.ClassInvalidOutput, "the agent's %s is %d bytes or more, over output.max_bytes (%d)", agent.Output.File, tl.Size, tl.Limit)
	}
	if agentrunner.ExhaustedResource(err) != "" {
		return out, agentrunner.Fail(agentrunner.ClassInternal, "read %s: %w", agent.Output.File, err)
	}
	if err != nil {
		return out, agentrunner.Fail(agentrunner.ClassInvalidOutput, "the agent wrote no %s (expected at %s)", agent.Output.File, inv.OutputPath)
	}
	spans, err := check(agent.Contract, agent.Output.File, data)
	if err != nil {
		var ve *artifact.ValidationError
		problems := []string{err.Error()}
		if errors.As(err, &ve) {
			problems = problems[:0]
			for _, p := range ve.Problems {
				problems = append(problems, p.String())
			}
		}
		os.WriteFile(filepath.Join(att.Dir, "validation.txt"), []byte(err.Error()+"\n"), 0o644)
		out.add(e, c, step.ID, agentrunner.EventArtifactRejected, agentrunner.LevelWarn, map[string]any{
			"artifact": agent.Output.File, "problems": problems,
		})
		return out, agentrunner.Fail(agentrunner.ClassInvalidOutput, "%v", err)
	}
	// Publish the validated file: the agent's output in the attempt folder
	// is the temporary file, complete since the agent ended; it is fsynced
	// and renamed into the cycle directory, so the cycle directory only ever
	// holds complete, valid artifacts.
	dst := filepath.Join(c.Dir, agent.Output.File)
	if err := e.fileOp(opPublish, func() error { return atomicfile.Move(inv.OutputPath, dst) }); err != nil {
		return out, agentrunner.Fail(agentrunner.ClassInternal, "publish %s: %w", agent.Output.File, err)
	}
	out.outputPath = dst
	out.add(e, c, step.ID, agentrunner.EventArtifactAccepted, agentrunner.LevelInfo, map[string]any{
		"artifact": agent.Output.File, "path": dst, "bytes": len(data), "sha256": artifact.Hash(data),
	})
	return out, e.deliver(c, step, data, spans, "", out)
}

// check validates an artifact; a markdown one also gives its sections,
// found in the same parse, for the deliveries that quote them.
func check(c artifact.Contract, file string, data []byte) ([]artifact.Span, error) {
	if mc, ok := c.(*artifact.MarkdownContract); ok {
		return mc.CheckSections(file, data)
	}
	return nil, artifact.Check(c, file, data)
}

// lastEventID returns the id of the newest event, 0 if there is none or
// the store cannot say.
func (e *Engine) lastEventID(ctx context.Context) int64 {
	evs, err := e.store.Events(ctx, agentrunner.EventFilter{Newest: true, Limit: 1})
	if err != nil || len(evs) == 0 {
		return 0
	}
	return evs[0].ID
}

// reportChildToolCalls hands the tool calls a process agent made through
// its MCP server (another process, which committed them itself) to
// OnEvent, so this process's metrics count them too. Failing to read them
// costs only the metrics, not the step.
func (e *Engine) reportChildToolCalls(ctx context.Context, c *agentrunner.Cycle, step string, after int64) {
	if e.onEvent == nil {
		return
	}
	evs, err := e.store.Events(ctx, agentrunner.EventFilter{CycleID: c.ID, AfterID: after, Type: tool.EventToolCall})
	if err != nil {
		e.log.Warn("reading a process agent's tool calls", "cycle_id", c.ID, "step", step, "error", err)
		return
	}
	for _, ev := range evs {
		if ev.Step == step {
			e.onEvent(ev)
		}
	}
}

// inputs resolves an agent's inputs to paths (FR-039/151), in configuration
// order. Memory files are created from the template on first use
// (FR-176..178).
func (e *Engine) inputs(ctx context.Context, c *agentrunner.Cycle, a *config.Agent, out *outcome) ([]agentrunner.Input, error) {
	if a.Memory {
		if err := e.ensureMemory(c, a.Name, out); err != nil {
			return nil, err
		}
	}
	var inputs []agentrunner.Input
	for _, in := range a.Inputs {
		switch {
		case in.Memory != "":
			if err := e.ensureMemory(c, in.Memory, out); err != nil {
				return nil, err
			}
			inputs = append(inputs, agentrunner.Input{Name: describe(in, "memory of the "+in.Memory+" agent"), Path: e.ws.Layout.Memory(in.Memory)})
		case in.History == nil:
			path := filepath.Join(c.Dir, in.Artifact)
			name := describe(in, in.Artifact+" of this cycle")
			if _, err := os.Stat(path); err != nil {
				if !e.overdue(c) {
					return nil, agentrunner.Fail(agentrunner.ClassInternal, "input %s is missing from the cycle directory %s", in.Artifact, c.Dir)
				}
				// A cycle forced to its end judges what it has (FR-007).
				name += " (missing: the cycle ran out of time before it was produced)"
			}
			inputs = append(inputs, agentrunner.Input{Name: name, Path: path})
		default:
			found, err := e.history(ctx, c, in)
			if err != nil {
				return nil, err
			}
			inputs = append(inputs, found...)
		}
	}
	return inputs, nil
}

func describe(in config.Input, def string) string {
	if in.Description != "" {
		return in.Description
	}
	return def
}

// history finds an artifact in earlier cycles: the most recent ones first,
// at most Last of them, and only those started Within the given time.
func (e *Engine) history(ctx context.Context, c *agentrunner.Cycle, in config.Input) ([]agentrunner.Input, error) {
	const scan = 1000 // cycles looked at; at 4 cycles a day, most of a year
	cycles, err := e.store.Cycles(ctx, agentrunner.CycleFilter{Before: c.ID, Limit: scan})
	if err != nil {
		return nil, err
	}
	var out []agentrunner.Input
	for _, prev := range cycles {
		if in.History.Last > 0 && len(out) >= in.History.Last {
			break
		}
		if in.History.Within > 0 && c.StartedAt.Sub(prev.StartedAt) > in.History.Within.D() {
			break
		}
		path := filepath.Join(prev.Dir, in.Artifact)
		if _, err := os.Stat(path); err != nil {
			continue
		}
		name := fmt.Sprintf("%s of cycle %s", in.Artifact, prev.ID)
		if in.Description != "" {
			name = fmt.Sprintf("%s (cycle %s)", in.Description, prev.ID)
		}
		out = append(out, agentrunner.Input{Name: name, Path: path})
	}
	return out, nil
}

func (e *Engine) ensureMemory(c *agentrunner.Cycle, agent string, out *outcome) error {
	path := e.ws.Layout.Memory(agent)
	tmpl := artifact.ExpandPlaceholders(e.ws.MemoryTemplate, func(name string) string {
		if name == "agent" {
			return agent
		}
		return "{{" + name + "}}"
	})
	var created bool
	err := e.fileOp(opMemory, func() (err error) {
		created, err = memory.Ensure(path, tmpl)
		return err
	})
	if err != nil {
		return agentrunner.Fail(agentrunner.ClassInternal, "create memory of %s: %w", agent, err)
	}
	if created {
		out.add(e, c, "", agentrunner.EventMemoryCreated, agentrunner.LevelInfo, map[string]any{"agent": agent, "path": path})
	}
	return nil
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

// deliver deposits the step's messages (Appendix A): forward, backward,
// broadcast or status. Each message has a stable id, so a retried step
// replaces its earlier message instead of adding a second one.
func (e *Engine) deliver(c *agentrunner.Cycle, step *config.Step, data []byte, spans []artifact.Span, note string, out *outcome) error {
	var ds []mailbox.Delivery // deposited together: one directory fsync for all
	// The artifact's sections (spans, when the caller has them) are found
	// once for all deliveries.
	sections := func() []artifact.Span {
		if spans == nil {
			spans = artifact.MarkdownSections(data)
		}
		return spans
	}
	for _, d := range step.Deliver {
		file := step.Artifact
		if a := e.ws.Agents[step.Agent]; a != nil {
			file = a.Output.File
		}
		body := note
		if body == "" {
			body = fmt.Sprintf("%s finished %s for cycle %s: %s", step.ID, file, c.ID, filepath.Join(c.Dir, file))
		}
		if quote := excerpt(data, sections, d); quote != "" {
			body += "\n\n" + quote
		}
		for _, to := range d.To {
			ds = append(ds, mailbox.Delivery{Agent: to, Msg: mailbox.Message{
				ID: fmt.Sprintf("%s/%s/%s/%s", c.ID, step.ID, d.Kind, to), Time: e.clock.Now(),
				From: step.ID, Kind: mailbox.Kind(d.Kind), CycleID: c.ID, Body: body,
			}})
		}
	}
	if len(ds) == 0 {
		return nil
	}
	var replaced []bool
	err := e.fileOp(opDeliver, func() (err error) {
		replaced, err = e.boxes.DepositAll(ds)
		return err
	})
	if err != nil {
		return agentrunner.Fail(agentrunner.ClassInternal, "deliver to mailboxes: %w", err)
	}
	for i, d := range ds {
		out.add(e, c, step.ID, agentrunner.EventMailboxDelivered, agentrunner.LevelInfo, map[string]any{
			"to": d.Agent, "kind": string(d.Msg.Kind), "id": d.Msg.ID, "replaced": replaced[i], "bytes": len(d.Msg.Body),
		})
	}
	return nil
}

var (
	htmlComment = regexp.MustCompile(`(?s)<!--.*?-->`)
	blankLines  = regexp.MustCompile(`\n\s*\n(\s*\n)+`)
)

// excerpt quotes the configured section (markdown) or field (JSON) of an
// artifact for a message.
func excerpt(data []byte, sections func() []artifact.Span, d config.Delivery) string {
	switch {
	case d.Section != "":
		if s, ok := artifact.Find(sections(), d.Section); ok {
			quote := htmlComment.ReplaceAllString(string(data[s.Start:s.End]), "")
			return strings.TrimSpace(blankLines.ReplaceAllString(quote, "\n\n"))
		}
	case d.Field != "":
		var doc any
		if json.Unmarshal(data, &doc) != nil {
			return ""
		}
		v, ok := artifact.Lookup(doc, d.Field)
		if !ok {
			return ""
		}
		if s, isString := v.(string); isString {
			return s
		}
		b, _ := json.MarshalIndent(v, "", "  ")
		return string(b)
	}
	return ""
}

// stepStart is when the first attempt of this step began; the
// execution step's deadline counts from it, across restarts.
func (e *Engine) stepStart(ctx context.Context, c *agentrunner.Cycle, step string) (time.Time, error) {
	atts, err := e.store.Attempts(ctx, c.ID)
	if err != nil {
		return time.Time{}, err
	}
	for _, a := range atts {
		if a.Step == step && !a.StartedAt.IsZero() {
			return a.StartedAt, nil
		}
	}
	return e.clock.Now(), nil
}

// maxInline bounds the bytes of one file put into a prompt.
const maxInline = 256 << 10

// inlineFiles reads the files a model agent is given in its prompt: its
// mailbox, memory, inputs, template and schema. Missing files (a mailbox
// with no message yet) are left out.
func inlineFiles(inv *agentrunner.Invocation) map[string]string {
	files := map[string]string{}
	paths := []string{inv.MailboxPath, inv.MemoryPath, inv.TemplatePath, inv.SchemaPath}
	for _, in := range inv.Inputs {
		paths = append(paths, in.Path)
	}
	for _, p := range paths {
		if p == "" {
			continue
		}
		data, err := os.ReadFile(p)
		if err != nil {
			continue
		}
		if len(data) > maxInline {
			data = append(data[:maxInline:maxInline], fmt.Sprintf("\n[truncated: the file has %d bytes]", len(data))...)
		}
		files[p] = string(data)
	}
	return files
}

// budget returns the token budget of an attempt: the agent's own, or what
// is left of the cycle's, whichever is smaller.
func (e *Engine) budget(ctx context.Context, c *agentrunner.Cycle, a *config.Agent) (agentrunner.TokenBudget, error) {
	b := agentrunner.TokenBudget{Limit: a.TokenBudget, Source: fmt.Sprintf("the token_budget of agent %s", a.Name)}
	limit := e.cfg.Budgets.CycleTokens
	if limit == 0 {
		return b, nil
	}
	atts, err := e.store.Attempts(ctx, c.ID)
	if err != nil {
		return b, err
	}
	used := 0
	for _, at := range atts {
		used += at.Usage.InputTokens + at.Usage.OutputTokens
	}
	left := limit - used
	if left <= 0 {
		return b, agentrunner.Fail(agentrunner.ClassBudget, "the cycle's token budget (budgets.cycle_tokens %d) is used up: %d tokens spent", limit, used)
	}
	if b.Limit == 0 || left < b.Limit {
		b = agentrunner.TokenBudget{Limit: left, Source: fmt.Sprintf("what is left of budgets.cycle_tokens (%d of %d)", left, limit)}
	}
	return b, nil
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
