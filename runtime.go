package agentrunner

import (
	"context"
	"time"
)

// Runtime runs one agent attempt: a child process, a conversation with an
// LLM provider, or a deterministic mock. It must write the agent's artifact
// to inv.OutputPath, or return it in RunResult.Output if it is an
// OutputReturner; the engine validates and publishes it afterwards.
//
// Run returns an error built with Fail, so the engine can tell a retryable
// failure (timeout, crash, provider 5xx) from one that is not (bad config).
// When ctx ends, Run stops the agent and returns promptly.
type Runtime interface {
	Run(ctx context.Context, inv *Invocation) (*RunResult, error)
}

// OutputReturner is a Runtime whose agents take their prompt from
// Invocation.Prompt and return their artifact in RunResult.Output instead
// of reading and writing files in the attempt's folder. The step then
// makes no file before its commit: no attempt folder, no prompt.md (the
// store keeps the prompt), no output file; the artifact's view in the
// run's directory is written after the commit.
type OutputReturner interface {
	Runtime
	ReturnsOutput()
}

// Invocation is everything an agent is given for one attempt (FR-012).
// Every path is absolute.
type Invocation struct {
	CycleID string
	Step    string
	Agent   string
	Attempt int
	// Visit is the visit of the step this attempt is one of: a model
	// runtime that checkpoints its conversation resumes only the
	// conversation of the same run, step and visit.
	Visit int

	// Prompt is the assembled context: identity, tools, mailbox, inputs,
	// template and output instructions, in that order (FR-150).
	Prompt string
	// PromptPath holds the same prompt as a file.
	PromptPath string
	// Dir is the attempt's scratch folder; the agent's working directory
	// unless WorkDir is set.
	Dir string
	// WorkDir, if set, is where a coding agent works instead: the git
	// worktree of its task, or the repository it studies. Its output
	// still goes to OutputPath.
	WorkDir string
	// OutputPath is where the agent writes its artifact (inside Dir).
	OutputPath string
	// CycleDir is the current cycle's directory (read-only for agents).
	CycleDir string
	// MemoryRunDir is the run directory under whose memory/ folder the
	// agent's filesystem_write writes: the run's own, or, in a sub-agent's
	// run (a run with a parent), its root ancestor's, so the sub-agents
	// of a lead write where the lead reads. Empty: CycleDir.
	MemoryRunDir string
	// SubAgent says the attempt is one of a sub-agent's run (a run with a
	// parent): it writes its report and reads no files (spec 4), so a
	// model runtime offers it no filesystem_read or filesystem_tree, and
	// its prompt gives its own files inline.
	SubAgent bool
	// WorkspaceDir is the workspace's directory (where agentrunner.yaml
	// is), for agents whose scripts live in the workspace.
	WorkspaceDir string
	// MailboxPath is the agent's mailbox file.
	MailboxPath string
	// Mail, if set, reads the agent's mailbox as committed. The file at
	// MailboxPath is its view, written after each commit in the
	// background, so a runtime that looks for an operator's message while
	// the agent works (a model runtime, between turns) asks the store: a
	// message committed just before a turn is in it, even when its file
	// is not written yet.
	Mail MailStore
	// MemoryPath is the agent's memory file, if it keeps one.
	MemoryPath string
	// Inputs are the artifacts the agent reads (FR-039/151).
	Inputs []Input
	// TemplatePath is the output template (FR-154).
	TemplatePath string
	// SchemaPath is the JSON Schema of a JSON artifact, if any.
	SchemaPath string
	// Timeout is the attempt's time limit; ctx carries the same deadline.
	Timeout time.Duration
	// TokenBudget bounds the model tokens of this attempt: the smaller of
	// the agent's budget and what is left of the cycle's.
	TokenBudget TokenBudget
	// Tools are the names of the tools the agent may call.
	Tools []string
	// MCPConfig is an MCP client configuration that gives a process agent
	// the runner's tools over MCP; empty when the agent has no tools.
	MCPConfig string
	// Output is the artifact the agent must produce and its contract, as
	// loaded for this attempt: a runtime never looks it up elsewhere, so
	// a reloaded contract applies from the next attempt on.
	Output OutputContract
	// Model holds the settings of an agent on a model provider.
	Model ModelSettings
}

// OutputContract is the artifact an agent produces and how it is checked
// (FR-153..156). Its template and schema paths are the Invocation's.
type OutputContract struct {
	// File is the artifact's name in the run directory (research.md).
	File string
	// Schema is the JSON Schema's content; nil without one.
	Schema []byte
	// Check returns the problems of a candidate artifact, as the agent
	// should read them; none when it is valid. Nil: nothing is checked.
	Check func(data []byte) []string
}

// Problems returns what is wrong with data under the contract.
func (o OutputContract) Problems(data []byte) []string {
	if o.Check == nil {
		return nil
	}
	return o.Check(data)
}

// ModelSettings are an agent's model parameters (FR-077, FR-144..147).
type ModelSettings struct {
	// Name is the provider's model name.
	Name string
	// Temperature of sampling; nil: the provider's default.
	Temperature *float64
	// MaxTokens bounds one answer; 0: the provider's default.
	MaxTokens int
	// MaxTurns bounds the turns of the conversation; RepairTurns the
	// answers sent back for breaking the contract.
	MaxTurns    int
	RepairTurns int
	// InlineInputs: the inputs are in the prompt, and the model gets no
	// filesystem_read access to them.
	InlineInputs bool
	// ToolBudget bounds the tool calls of the attempt; once they are
	// spent the model gets one last turn, without tools, to answer.
	// 0: no budget.
	ToolBudget int
}

// TokenBudget is a limit on model tokens and where it comes from.
type TokenBudget struct {
	// Limit is the most tokens (input + output) the attempt may use; 0: no limit.
	Limit int
	// Source says which budget it is ("agent token_budget 20000", …).
	Source string
}

// Input is one artifact given to an agent.
type Input struct {
	// Name describes the input for the prompt ("plan.md of this cycle").
	Name string
	Path string
}

// RunResult is what a runtime observed while running an agent (FR-015).
type RunResult struct {
	// Output is the artifact of an OutputReturner's agent; nil: it
	// returned none.
	Output []byte
	// ExitCode of the agent process; nil when there was no process.
	ExitCode *int
	// StdoutPath and StderrPath hold the captured output, when any.
	StdoutPath string
	StderrPath string
	// Usage is what a model agent spent; zero for other runtimes.
	Usage Usage
}

// Usage is what a model agent spent in one attempt.
type Usage struct {
	InputTokens  int
	OutputTokens int
	// CachedTokens of the input, where the provider reports them.
	CachedTokens int
	Turns        int
	ToolCalls    int
}
