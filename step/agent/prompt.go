package agent

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"math"
	"os"
	"path/filepath"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/internal/atomicfile"
	"github.com/agentrunner/agentrunner/mcp"
	"github.com/agentrunner/agentrunner/prompt"
	"github.com/agentrunner/agentrunner/tool"
	"github.com/agentrunner/agentrunner/workspace"
)

// maxInline bounds the bytes of one file put into a prompt.
const maxInline = 256 << 10

// prepare builds the attempt's invocation: inputs, token budget, MCP
// configuration and prompt, which it writes into the attempt folder for
// an agent that works with files.
func (at *attempt) prepare(ctx context.Context) error {
	if err := at.attemptFolder(); err != nil {
		return agentrunner.Fail(agentrunner.ClassInternal, "create attempt folder: %w", err)
	}
	inputs, err := at.gather(ctx)
	if err != nil {
		return err
	}
	at.inv = at.invocation(inputs)
	if at.inv.MemoryRunDir, err = RootRunDir(ctx, at.k.opts.Store, at.sa.Run); err != nil {
		return agentrunner.Fail(agentrunner.ClassInternal, "find the lead's run of %s: %w", at.sa.Run.ID, err)
	}
	if at.inv.TokenBudget, err = at.k.budget(ctx, at.sa.Run, at.agent.Agent); err != nil {
		return err
	}
	pc := at.promptContext()
	if err := at.mcpConfig(); err != nil {
		return err
	}
	at.inv.Prompt = prompt.Build(pc)
	if as := at.assigned; as != nil {
		at.inv.Prompt, at.inv.WorkDir, at.inv.MailboxPath, at.inv.Mail = as.Prompt, as.WorkDir, "", nil
	}
	return at.writePrompt()
}

// gather reads the inputs of a configured agent and makes its mailbox
// right; an assigned agent has neither, its prompt holds what it needs.
func (at *attempt) gather(ctx context.Context) ([]agentrunner.Input, error) {
	if at.assigned != nil {
		return nil, nil
	}
	inputs, err := at.inputs(ctx)
	if err != nil {
		return nil, err
	}
	return inputs, at.checkMailbox(ctx)
}

// checkMailbox makes the agent's mailbox right before it reads it: the
// file is checked against the store's messages by hash and rewritten
// from them when a crash left it stale or missing, with an
// EventViewRepaired, so an agent never reads a stale mailbox.
func (at *attempt) checkMailbox(ctx context.Context) error {
	k, agent := at.k, at.agent.Name
	k.opts.Views.Settle(k.opts.Mailboxes.Path(agent)) // a write still pending is no repair
	var reason string
	err := k.fileOp(OpMailbox, func() (err error) {
		reason, err = k.opts.Mailboxes.Check(ctx, k.opts.Store, agent)
		return err
	})
	if err != nil {
		return agentrunner.Fail(agentrunner.ClassInternal, "check the mailbox of %s: %w", agent, err)
	}
	if reason != "" {
		ev := k.opts.Mailboxes.Repaired(k.clock.Now(), agent, reason)
		ev.CycleID, ev.Step = at.sa.Run.ID, at.step.ID // the step it was repaired for
		at.res.Events = append(at.res.Events, ev)
	}
	return nil
}

// invocation is what the runtime is given, but the prompt and budget.
func (at *attempt) invocation(inputs []agentrunner.Input) *agentrunner.Invocation {
	a, sa := at.agent, at.sa
	inv := &agentrunner.Invocation{
		CycleID: sa.Run.ID, Step: at.step.ID, Agent: a.Name, Attempt: sa.Attempt.Number, Visit: sa.Attempt.Visit,
		PromptPath: filepath.Join(sa.Dir, "prompt.md"), Dir: sa.Dir,
		OutputPath: filepath.Join(sa.Dir, a.Output.File), CycleDir: sa.RunDir, WorkspaceDir: at.k.cfg.Dir,
		MailboxPath: at.k.opts.Mailboxes.Path(a.Name), Mail: at.k.opts.Store, Inputs: inputs,
		TemplatePath: a.TemplatePath, Timeout: at.timeout(), Tools: a.Tools,
		Output: Contract(a), Model: ModelSettings(a.Agent),
	}
	inv.SubAgent = sa.Run != nil && sa.Run.Parent != ""
	if b, ok := TaskToolBudget(sa.Run); ok {
		inv.Model.ToolBudget = b
	}
	if a.Output.Schema != "" {
		inv.SchemaPath = a.SchemaPath
	}
	if a.Memory {
		inv.MemoryPath = at.k.ws.Layout.Memory(a.Name)
	}
	return inv
}

// maxAncestors bounds the walk up a run's parents: sub-agents of
// sub-agents, not a chain without end (or a loop a broken store holds).
const maxAncestors = 64

// RootRunDir is the directory of r's root ancestor: r's own for a run
// without a parent, else that of the first run up its parents that has
// none (the lead's). The sub-agents of a lead write their reports under
// its memory/ folder, where the lead reads them.
func RootRunDir(ctx context.Context, store interface {
	Run(ctx context.Context, id string) (*agentrunner.Run, error)
}, r *agentrunner.Run) (string, error) {
	if r == nil {
		return "", nil
	}
	for range maxAncestors {
		if r.Parent == "" {
			return r.Dir, nil
		}
		parent, err := store.Run(ctx, r.Parent)
		if err != nil {
			return "", fmt.Errorf("run %s, the parent of %s: %w", r.Parent, r.ID, err)
		}
		r = parent
	}
	return "", fmt.Errorf("run %s has more than %d ancestors", r.ID, maxAncestors)
}

// TaskToolBudget is the tool budget a lead gave the sub-agent whose run r
// is: the run input task.tool_budget of a run that has a parent, when it
// is a positive integer. It stands in for the agent's tool_budget, so a
// lead sizes each sub-agent's work to its task.
func TaskToolBudget(r *agentrunner.Run) (int, bool) {
	if r == nil || r.Parent == "" {
		return 0, false
	}
	task, _ := r.Inputs["task"].(map[string]any)
	var n float64
	switch v := task["tool_budget"].(type) {
	case int:
		n = float64(v)
	case int64:
		n = float64(v)
	case float64:
		n = v
	case json.Number:
		f, err := v.Float64()
		if err != nil {
			return 0, false
		}
		n = f
	default:
		return 0, false
	}
	if n < 1 || n != math.Trunc(n) || n > math.MaxInt32 {
		return 0, false
	}
	return int(n), true
}

// Contract is the output contract of an agent for an invocation.
func Contract(a *workspace.Agent) agentrunner.OutputContract {
	oc := agentrunner.OutputContract{File: a.Output.File, Schema: a.Schema}
	if c := a.Contract; c != nil {
		oc.Check = func(data []byte) []string {
			var out []string
			for _, p := range c.Validate(data) {
				out = append(out, p.String())
			}
			return out
		}
	}
	return oc
}

// ModelSettings are an agent's model parameters for an invocation.
func ModelSettings(a *config.Agent) agentrunner.ModelSettings {
	m := agentrunner.ModelSettings{Name: a.Model, Temperature: a.Temperature, MaxTokens: a.MaxTokens, MaxTurns: a.MaxTurns, InlineInputs: a.InlineInputs, ToolBudget: a.ToolBudget}
	if a.RepairTurns != nil {
		m.RepairTurns = *a.RepairTurns
	}
	return m
}

// promptContext is what the prompt is built from. A model cannot write
// files: its answer is the artifact, and it reads its files with
// filesystem_read or finds them in the prompt; a sub-agent, which reads
// no files (spec 4), always finds them there.
func (at *attempt) promptContext() prompt.Context {
	a, inv := at.agent, at.inv
	pc := prompt.Context{
		CycleID: inv.CycleID, Step: inv.Step, Agent: a.Name, Attempt: inv.Attempt,
		Identity: a.Identity, MailboxPath: inv.MailboxPath, MaxMessages: at.k.opts.Mailboxes.Max(),
		Inputs: inv.Inputs, TemplatePath: inv.TemplatePath, SchemaPath: inv.SchemaPath, OutputPath: inv.OutputPath,
		RunInputs: at.sa.Run.Inputs,
	}
	for _, t := range a.Tools {
		pc.Tools = append(pc.Tools, prompt.Tool{Name: t, Section: at.k.ws.Tools[t]})
	}
	if at.onModel() {
		pc.FinalAnswer = true
		if a.InlineInputs || inv.SubAgent { // a sub-agent has no filesystem_read
			pc.Inline = inlineFiles(inv)
		}
	}
	return pc
}

// onModel reports whether the agent runs on a model provider.
func (at *attempt) onModel() bool {
	switch at.k.cfg.Providers[at.agent.Provider].Kind {
	case config.ProviderOpenAI, config.ProviderAnthropic:
		return true
	}
	return false
}

// mcpConfig gives a process agent with tools the runner's tools over MCP.
func (at *attempt) mcpConfig() error {
	k, a, inv := at.k, at.agent, at.inv
	if k.cfg.Providers[a.Provider].Kind != config.ProviderProcess || len(a.Tools) == 0 || k.opts.MCPCommand == "" {
		return nil
	}
	call := agentrunner.ToolCall{Agent: a.Name, Step: inv.Step, CycleID: inv.CycleID, Attempt: inv.Attempt}
	err := k.fileOp(OpMCPConfig, func() (err error) {
		inv.MCPConfig, err = mcp.WriteConfig(inv.Dir, k.opts.MCPCommand, k.cfg.Path, call)
		return err
	})
	if err != nil {
		return agentrunner.Fail(agentrunner.ClassInternal, "write MCP configuration: %w", err)
	}
	return nil
}

// writePrompt keeps the prompt for the store, so an operator can read
// exactly what the agent saw, and unless the agent takes it from memory
// writes it for the agent to read, without an fsync, and clears the
// output path of anything an earlier run of the same attempt folder left
// there.
func (at *attempt) writePrompt() error {
	inv := at.inv
	if at.inMemory {
		at.keep(agentrunner.FilePrompt, filepath.Base(inv.PromptPath), []byte(inv.Prompt))
		return nil
	}
	err := at.k.fileOp(OpPrompt, func() error { return atomicfile.Write(inv.PromptPath, []byte(inv.Prompt), 0o644) })
	if err != nil {
		return agentrunner.Fail(agentrunner.ClassInternal, "write prompt: %w", err)
	}
	at.keep(agentrunner.FilePrompt, filepath.Base(inv.PromptPath), []byte(inv.Prompt))
	_ = os.Remove(inv.OutputPath) // usually absent; a stale file must never pass for the agent's
	return nil
}

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
// is left of the run's, whichever is smaller.
func (k *Kind) budget(ctx context.Context, run *agentrunner.Run, a *config.Agent) (agentrunner.TokenBudget, error) {
	b := agentrunner.TokenBudget{Limit: a.TokenBudget, Source: fmt.Sprintf("the token_budget of agent %s", a.Name)}
	limit := k.cfg.Budgets.CycleTokens
	if limit == 0 {
		return b, nil
	}
	atts, err := k.opts.Store.Attempts(ctx, run.ID)
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

// lastEventID returns the id of the newest event, 0 if there is none or
// the store cannot say.
func (k *Kind) lastEventID(ctx context.Context) int64 {
	evs, err := k.opts.Store.Events(ctx, agentrunner.EventFilter{Newest: true, Limit: 1})
	if err != nil || len(evs) == 0 {
		return 0
	}
	return evs[0].ID
}

// reportChildToolCalls hands the tool calls a process agent made through
// its MCP server (another process, which committed them itself) to
// OnEvent, so this process's metrics count them too. Failing to read them
// costs only the metrics, not the step.
func (k *Kind) reportChildToolCalls(ctx context.Context, run *agentrunner.Run, step string, after int64) {
	if k.opts.OnEvent == nil {
		return
	}
	evs, err := k.opts.Store.Events(ctx, agentrunner.EventFilter{CycleID: run.ID, AfterID: after, Type: tool.EventToolCall})
	if err != nil {
		k.log.Warn("reading a process agent's tool calls", "cycle_id", run.ID, "step", step, "error", err)
		return
	}
	for _, ev := range evs {
		if ev.Step == step {
			k.opts.OnEvent(ev)
		}
	}
}

// attemptFolder makes an attempt's folder, whose parent (the run's folder
// of attempts) exists but for the run's first attempt: one system call in
// the common case. An agent that works in memory gets none: its runtime
// makes it if it keeps files there (a model agent's exchanges). An agent
// that works with files may also use its run's directory, which the
// scheduler makes in the background: it is settled first.
func (at *attempt) attemptFolder() error {
	if at.inMemory {
		return nil
	}
	if run := at.sa.RunDir; run != "" {
		at.k.opts.Views.Settle(run)
		if err := os.MkdirAll(run, 0o755); err != nil {
			return err
		}
	}
	dir := at.sa.Dir
	err := os.Mkdir(dir, 0o755)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return os.MkdirAll(dir, 0o755)
	case errors.Is(err, fs.ErrExist):
		return nil
	}
	return err
}
