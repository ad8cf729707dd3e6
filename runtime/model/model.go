// Package model is the agent runtime for LLM providers over HTTP: a
// conversation in which agentrunner offers the agent's tools, runs the
// model's tool calls through the tool executor, feeds the results back and
// takes the model's final answer as the output artifact (FR-144..147).
//
// A model cannot open files, so it gets filesystem_read/filesystem_tree
// confined to exactly its inputs, mailbox, memory and template and the
// files under its run's memory/ folder, or, with inline_inputs, their
// content in the prompt. A sub-agent (spec 4) reads no files: it gets
// neither tool, its files are in its prompt, and a call of either is
// refused with what to do instead. An agent that lists a filesystem_write tool
// writes under the memory/ folder of its run, or of its root ancestor's
// run in a sub-agent's. Its answer
// is checked against the output contract; invalid output goes back to the
// model with the problems for a bounded number of repair turns. Every
// request and response is recorded in the attempt folder, credentials
// redacted.
package model

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/llm"
	"github.com/agentrunner/agentrunner/mailbox"
	"github.com/agentrunner/agentrunner/tool"
	"github.com/agentrunner/agentrunner/tool/fstool"
)

// Tools is what the runtime needs of the tool executor: a view scoped to
// one attempt.
type Tools interface {
	Scope(allowed []string, local ...tool.Local) *tool.Scope
}

// Runtime runs the agents of one provider.
type Runtime struct {
	model   llm.Model
	tools   Tools
	secrets []string
	// secretsFrom, when set, gives more secrets at each attempt
	// (SecretsFrom).
	secretsFrom func() []string
	// conversations, when set, keeps each attempt's conversation (see
	// Checkpoint).
	conversations agentrunner.ConversationStore
	// onTurn, when set, is told each attempt's usage after each turn (see
	// OnTurn).
	onTurn func(Turn)
}

var _ agentrunner.OutputReturner = (*Runtime)(nil)

// ReturnsOutput marks the runtime as working in memory: the model's
// answer is the artifact, returned in RunResult.Output, and its prompt is
// the Invocation's. Only its recorded exchanges are files.
func (r *Runtime) ReturnsOutput() {}

// New returns a runtime that talks to model. secrets (the provider's API
// key) are redacted from the recorded exchanges. Everything an agent
// needs, its model settings and output contract included, comes in each
// Invocation.
func New(model llm.Model, tools Tools, secrets ...string) *Runtime {
	return &Runtime{model: model, tools: tools, secrets: secrets}
}

// SecretsFrom makes each attempt redact also what get returns then from
// its recorded exchanges: the provider's key as rotated since the runtime
// was made.
func (r *Runtime) SecretsFrom(get func() []string) *Runtime {
	r.secretsFrom = get
	return r
}

// redacted are the secrets an attempt's recording redacts.
func (r *Runtime) redacted() []string {
	if r.secretsFrom == nil {
		return r.secrets
	}
	return append(slices.Clone(r.secrets), r.secretsFrom()...)
}

// SubAgentReadRefusal is the error result of a sub-agent's call of
// filesystem_read or filesystem_tree, which it is not offered.
const SubAgentReadRefusal = "sub-agents do not read files: your task and your own files are in your instructions. " +
	"Write your report with filesystem_write and answer with its path as artifact_path; the lead reads it."

// RecordingDir is the folder of an attempt's recorded exchanges.
const RecordingDir = "exchanges"

// Run holds the conversation of one attempt.
func (r *Runtime) Run(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
	if inv.Output.File == "" {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "the invocation of agent %s names no output file", inv.Agent)
	}
	recDir := filepath.Join(inv.Dir, RecordingDir)
	if err := os.MkdirAll(recDir, 0o755); err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "create recording folder: %w", err)
	}
	ctx = llm.WithRecording(ctx, llm.NewRecording(recDir, r.redacted()...))

	// filesystem_write, when the agent has it, writes under the memory/
	// of this run, or of its lead's run in a sub-agent's.
	ctx = fstool.WithRunDir(ctx, memoryRunDir(inv))
	var local []tool.Local
	if !inv.Model.InlineInputs && !inv.SubAgent {
		local = fstool.New(readable(inv), readableDirs(inv)...)
	}
	scope := r.tools.Scope(inv.Tools, local...)
	if inv.SubAgent {
		// Spec 4: sub-agents write artifacts, the lead reads them. A
		// model may call a tool it was not offered; it is told why.
		scope.Refuse(SubAgentReadRefusal, fstool.ReadName, fstool.TreeName)
	}
	if err := scope.Err(); err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassConfig, "tools of agent %s: %v", inv.Agent, err)
	}
	c := &conversation{rt: r, inv: inv, scope: scope, result: &agentrunner.RunResult{}}
	for _, s := range scope.Specs() {
		c.specs = append(c.specs, llm.ToolSpec{Name: s.Name, Description: s.Description, Parameters: s.Parameters})
	}
	err := c.run(ctx)
	if err != nil {
		c.forget(ctx, err)
	}
	return c.result, err
}

// readable is every file the agent may read: its inputs, mailbox, memory,
// template and schema.
func readable(inv *agentrunner.Invocation) []string {
	files := []string{inv.MailboxPath, inv.TemplatePath}
	for _, p := range []string{inv.MemoryPath, inv.SchemaPath} {
		if p != "" {
			files = append(files, p)
		}
	}
	for _, in := range inv.Inputs {
		files = append(files, in.Path)
	}
	return files
}

// memoryRunDir is the run directory whose memory/ filesystem_write
// writes in.
func memoryRunDir(inv *agentrunner.Invocation) string {
	if inv.MemoryRunDir != "" {
		return inv.MemoryRunDir
	}
	return inv.CycleDir
}

// readableDirs are the folders whose files the agent may read besides
// its own: the memory/ folder of its run, where its sub-agents' reports
// are (spec 4: written by sub-agents, read by the lead). It is listed at
// each call, so a report written during the conversation can be read.
func readableDirs(inv *agentrunner.Invocation) []string {
	if inv.CycleDir == "" || !filepath.IsAbs(inv.CycleDir) {
		return nil
	}
	return []string{filepath.Join(inv.CycleDir, fstool.MemoryDir)}
}

type conversation struct {
	rt     *Runtime
	inv    *agentrunner.Invocation
	scope  *tool.Scope
	specs  []llm.ToolSpec
	msgs   []llm.Message
	usage  llm.Usage
	result *agentrunner.RunResult
	// shown holds the ids of the operator's messages the model has seen:
	// those in its mailbox when it started, and those given since.
	shown map[string]bool
	// called counts the tool calls run, against the tool budget.
	called int
	// saved: the store holds a conversation of this attempt's run, step
	// and visit that this attempt saved or resumed.
	saved bool
}

func (c *conversation) run(ctx context.Context) error {
	m, file := c.inv.Model, c.inv.Output.File
	isJSON := filepath.Ext(file) == ".json"
	c.shown = map[string]bool{}
	c.injected(ctx)
	at, err := c.resume(ctx)
	if err != nil {
		return err
	}
	if at == nil {
		at = &resumed{}
		c.msgs = []llm.Message{{Role: llm.User, Text: fmt.Sprintf(
			"Produce %s now. Read what you need with your tools, then answer with the complete content of %s and nothing else: your final answer becomes the file.",
			file, file)}}
	} else if at.answer != "" {
		// The previous attempt had the answer and ended before the engine
		// took it: it is not asked for again.
		c.result.Output = []byte(at.answer)
		return nil
	}
	repairs := at.repairs
	for turn := at.turns + 1; ; turn++ {
		if turn > m.MaxTurns {
			return agentrunner.Fail(agentrunner.ClassInvalidOutput, "the model gave no final answer within max_turns (%d)", m.MaxTurns)
		}
		if notes := c.injected(ctx); notes != "" && turn > 1 {
			last := &c.msgs[len(c.msgs)-1] // a user message: tool results or a repair request
			last.Text = strings.TrimSpace(last.Text + "\n\n" + notes)
		}
		req := &llm.Request{
			Model: m.Name, System: c.inv.Prompt, Messages: c.msgs, Tools: c.specs,
			Temperature: m.Temperature, MaxTokens: m.MaxTokens,
		}
		if c.spent() || turn == m.MaxTurns {
			req.Tools = nil // the last turn: an answer, no more calls
		}
		if turn == m.MaxTurns && turn > 1 && len(req.Tools) == 0 && len(c.specs) > 0 && !c.spent() {
			c.lastTurn(fmt.Sprintf("This is your last turn (max_turns %d): no more tool calls. Answer now with the complete content of %s from what you have.", m.MaxTurns, file))
			req.Messages = c.msgs
		}
		if isJSON {
			req.JSONSchema, req.SchemaName = c.schema(), strings.TrimSuffix(file, ".json")
		}
		resp, err := c.rt.model.Generate(ctx, req)
		if err != nil {
			return err
		}
		c.account(resp)
		if err := c.checkBudget(); err != nil {
			return err
		}
		c.msgs = append(c.msgs, llm.Message{Role: llm.Assistant, Text: resp.Text, ToolCalls: resp.ToolCalls})
		if len(resp.ToolCalls) > 0 {
			if req.Tools == nil && c.spent() {
				return agentrunner.Fail(agentrunner.ClassBudget, "the model called tools after its tool budget (%d calls) was spent, in the turn it was given to answer", m.ToolBudget)
			}
			if turn == m.MaxTurns {
				return agentrunner.Fail(agentrunner.ClassInvalidOutput, "the model gave no final answer within max_turns (%d): it called tools in its last turn", m.MaxTurns)
			}
			c.msgs = append(c.msgs, c.toolTurn(ctx, resp.ToolCalls))
			// The turn is complete with its results: a later attempt
			// resumes after it, and its tools do not run again.
			if err := c.checkpoint(ctx, turn); err != nil {
				return err
			}
			continue
		}
		answer := unfence(resp.Text)
		problems := c.check(answer, resp.StopReason)
		if len(problems) == 0 || repairs >= m.RepairTurns {
			// Invalid output after the repairs is returned all the same:
			// the engine validates it again, rejects it and records why.
			c.result.Output = []byte(answer)
			return c.checkpoint(ctx, turn)
		}
		repairs++
		c.msgs = append(c.msgs, llm.Message{Role: llm.User, Text: fmt.Sprintf(
			"Your answer breaks the contract of %s:\n- %s\nAnswer again with the complete, corrected content of %s and nothing else.",
			file, strings.Join(problems, "\n- "), file)})
		if err := c.checkpoint(ctx, turn); err != nil {
			return err
		}
	}
}

// injected returns the operator's messages put into the agent's mailbox
// since it last looked (FR-164: an injection reaches a running model agent
// at its next turn), and marks them shown.
func (c *conversation) injected(ctx context.Context) string {
	msgs, err := c.mailbox(ctx)
	if err != nil {
		return "" // the engine reports a corrupt mailbox when it writes it
	}
	var b strings.Builder
	for _, m := range msgs {
		if m.Kind != mailbox.Inject || c.shown[m.ID] {
			continue
		}
		c.shown[m.ID] = true
		fmt.Fprintf(&b, "A message from the operator (%s, %s) arrived while you work:\n%s\n\n", m.From, m.Time.Format(time.RFC3339), m.Body)
	}
	return strings.TrimSpace(b.String())
}

// mailbox reads the agent's messages as committed when the invocation
// says how (Invocation.Mail), else from its mailbox's file, which the
// engine writes after the commit, in the background: a message committed
// just before a turn may not be in the file yet.
func (c *conversation) mailbox(ctx context.Context) ([]mailbox.Message, error) {
	if c.inv.Mail != nil {
		return mailbox.ReadStored(ctx, c.inv.Mail, c.inv.Agent)
	}
	return mailbox.ReadFile(c.inv.MailboxPath)
}

// schema returns the artifact's JSON Schema, for structured output: the
// contract's, which the answer is checked against too.
func (c *conversation) schema() json.RawMessage {
	data := c.inv.Output.Schema
	if len(data) == 0 || !json.Valid(data) {
		return nil // the workspace checked it when it loaded; without it the answer is still validated
	}
	return data
}

func (c *conversation) account(resp *llm.Response) {
	c.usage = c.usage.Add(resp.Usage)
	u := &c.result.Usage
	u.InputTokens, u.OutputTokens, u.CachedTokens = c.usage.InputTokens, c.usage.OutputTokens, c.usage.CachedTokens
	u.Turns++
	u.ToolCalls += len(resp.ToolCalls)
	c.told()
}

func (c *conversation) checkBudget() error {
	b := c.inv.TokenBudget
	if b.Limit > 0 && c.usage.Total() > b.Limit {
		return agentrunner.Fail(agentrunner.ClassBudget, "token budget exceeded: %d tokens used, %s allows %d", c.usage.Total(), b.Source, b.Limit)
	}
	return nil
}

// lastTurn adds a note to the message the model reads next (the tool
// results of its last turn): it is to answer now.
func (c *conversation) lastTurn(note string) {
	last := &c.msgs[len(c.msgs)-1]
	last.Text = strings.TrimSpace(last.Text + "\n\n" + note)
}

// spent reports whether the tool budget is spent.
func (c *conversation) spent() bool {
	b := c.inv.Model.ToolBudget
	return b > 0 && c.called >= b
}

// toolTurn runs a turn's calls within the tool budget: calls past it get
// an error instead of running, and once it is spent the model is told to
// answer now, in the one turn it has left.
func (c *conversation) toolTurn(ctx context.Context, calls []llm.ToolCall) llm.Message {
	b := c.inv.Model.ToolBudget
	run := calls
	if b > 0 && len(calls) > b-c.called {
		run = calls[:max(b-c.called, 0)]
	}
	results := c.callTools(ctx, run)
	c.called += len(run)
	for _, call := range calls[len(run):] {
		res := agentrunner.ToolResult{IsError: true, Message: fmt.Sprintf("not run: your tool budget of %d calls is spent", b)}
		results = append(results, llm.ToolResult{CallID: call.ID, Content: encodeResult(res), IsError: true})
	}
	msg := llm.Message{Role: llm.User, ToolResults: results}
	if c.spent() {
		msg.Text = fmt.Sprintf("Your tool budget of %d calls is spent: no more tool calls. Answer now with the complete content of %s from what you have.", b, c.inv.Output.File)
	}
	return msg
}

// callTools runs the calls of one turn concurrently and returns their
// results in the order of the calls (FR-113).
func (c *conversation) callTools(ctx context.Context, calls []llm.ToolCall) []llm.ToolResult {
	results := make([]llm.ToolResult, len(calls))
	var wg sync.WaitGroup
	for i, call := range calls {
		wg.Add(1)
		go func() {
			defer wg.Done()
			res := c.scope.Execute(ctx, agentrunner.ToolCall{
				ID: call.ID, Name: call.Name, Arguments: call.Arguments,
				Agent: c.inv.Agent, Step: c.inv.Step, CycleID: c.inv.CycleID, Attempt: c.inv.Attempt,
			})
			results[i] = llm.ToolResult{CallID: call.ID, Content: encodeResult(res), IsError: res.IsError}
		}()
	}
	wg.Wait()
	return results
}

// encodeResult writes a tool result as the {"isError", "message"} JSON the
// model reads, without escaping <, > and & as HTML would need.
func encodeResult(res agentrunner.ToolResult) string {
	var b strings.Builder
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	enc.Encode(res)
	return strings.TrimSuffix(b.String(), "\n")
}

// check returns the problems of an answer, as the model should read them.
func (c *conversation) check(answer string, stop llm.StopReason) []string {
	var problems []string
	if stop == llm.StopMaxTokens {
		problems = append(problems, fmt.Sprintf("the answer was cut off at max_tokens (%d); make it shorter", c.inv.Model.MaxTokens))
	}
	return append(problems, c.inv.Output.Problems([]byte(answer))...)
}

var fence = regexp.MustCompile("(?s)^```[a-zA-Z]*\\s*\\n(.*?)\\n?```\\s*$")

// unfence removes a code fence around the whole answer, which models add
// out of habit even when asked for the bare document.
func unfence(text string) string {
	trimmed := strings.TrimSpace(text)
	if m := fence.FindStringSubmatch(trimmed); m != nil {
		return m[1] + "\n"
	}
	return trimmed + "\n"
}
