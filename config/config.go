// Package config reads agentrunner.yaml: strict decoding with file:line
// errors, environment overrides (FR-073), documented defaults and validation
// that reports every problem at once (FR-072..074).
package config

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"go.yaml.in/yaml/v3"
)

// FileName is the configuration file looked for when none is given.
const FileName = "agentrunner.yaml"

// Config is one workspace's configuration. Relative paths in it are
// relative to the directory of the configuration file (Dir).
type Config struct {
	// Version of the configuration format; must be 1.
	Version int `yaml:"version"`
	// Name of the pipeline, shown in status and events.
	Name string `yaml:"name"`
	// ArtifactsDir holds cycles/, mailboxes/, <agent>/memory.md (FR-158).
	ArtifactsDir string `yaml:"artifacts_dir"`
	State        State  `yaml:"state"`
	// ToolsFile holds one "## <tool>" section per tool (FR-149).
	ToolsFile string `yaml:"tools_file"`
	// MemoryTemplate seeds <agent>/memory.md on an agent's first run.
	MemoryTemplate string               `yaml:"memory_template"`
	Providers      map[string]*Provider `yaml:"providers"`
	// Defaults apply to every agent that does not set the key itself.
	Defaults AgentDefaults     `yaml:"defaults"`
	Agents   map[string]*Agent `yaml:"agents"`
	// Pipeline is the learning loop: the pipeline named Name, a chain run
	// by the loop engine. A workspace of graphs only may leave it out.
	Pipeline Pipeline `yaml:"pipeline"`
	// Pipelines are further pipelines by name, run by the graph scheduler;
	// they may route, loop, branch and wait at gates.
	Pipelines map[string]*Pipeline `yaml:"pipelines"`
	Schedule  Schedule             `yaml:"schedule"`
	Mailbox   Mailbox              `yaml:"mailbox"`
	// Capsules configures the capsule store (spec 3's hand-offs).
	Capsules Capsules `yaml:"capsules"`
	// Backlog configures spec 5's agent pipeline: backlog items and tasks.
	Backlog          *Backlog         `yaml:"backlog"`
	ExecutionService ExecutionService `yaml:"execution_service"`
	Server           Server           `yaml:"server"`
	// Tools declares the tools agents may call (FR-102).
	Tools map[string]*Tool `yaml:"tools"`
	// MCPServers are external MCP servers whose tools are imported.
	MCPServers map[string]*MCPServer `yaml:"mcp_servers"`
	Budgets    Budgets               `yaml:"budgets"`
	Escalation Escalation            `yaml:"escalation"`
	Watchdog   Watchdog              `yaml:"watchdog"`
	// Scheduler bounds the graph scheduler's work (pipelines:).
	Scheduler Scheduler `yaml:"scheduler"`
	Events    Events    `yaml:"events"`
	Health    Health    `yaml:"health"`
	// Secrets is the age-encrypted file of secrets (FR-100).
	Secrets Secrets `yaml:"secrets"`
	// Shutdown is how serve and run stop on SIGTERM or SIGINT (FR-010).
	Shutdown Shutdown `yaml:"shutdown"`
	// Reload is how serve and run read the configuration again (FR-075).
	Reload Reload `yaml:"reload"`
	// Archive compresses old finished runs' directories (FR-038/160/161).
	Archive Archive `yaml:"archive"`

	// Path is the file the configuration was read from.
	Path string `yaml:"-"`
	// Dir is the directory relative paths are resolved against.
	Dir string `yaml:"-"`
	// lines maps key paths to their source position.
	lines map[string]string
	// inputSchemas are the compiled inputs_schema of pipelines, by name.
	inputSchemas map[string]*jsonschema.Schema
	// toolProblems are the problems of tools' kinds and own keys found
	// while decoding, reported by validation with the tools' others.
	toolProblems map[string]Problems
}

// State says where the durable state lives.
type State struct {
	// Driver is the store: sqlite (the embedded default).
	Driver string `yaml:"driver"`
	// Path of the SQLite database; default <artifacts_dir>/state.db.
	Path string `yaml:"path"`
	// Backup is serve's schedule of backups of the database.
	Backup StateBackup `yaml:"backup"`
}

// StateBackup is serve's schedule of online backups of the state database.
type StateBackup struct {
	// Every is the time between two backups; 0 (the default) takes none.
	Every Duration `yaml:"every"`
	// Dir receives the backups, and db backup's default file; default
	// <artifacts_dir>/backups.
	Dir string `yaml:"dir"`
	// Keep is how many backups are kept; older ones are removed.
	Keep int `yaml:"keep"`
}

// Provider is a way to run agents.
type Provider struct {
	// Kind: mock (deterministic offline agents) or process (a child process,
	// e.g. a coding-agent CLI).
	Kind string `yaml:"kind"`
	// Command is the argv of a process agent; see runtime/process for the
	// {placeholders} it may contain.
	Command []string `yaml:"command"`
	// Env is what a process agent gets besides the base variables (PATH,
	// HOME, LANG, TZ, TMPDIR, LC_*): nothing else of the runner's
	// environment reaches it.
	Env Env `yaml:"env"`
	// KillGrace is the time between SIGTERM and SIGKILL on timeout.
	KillGrace Duration `yaml:"kill_grace"`
	// BaseURL of an openai or anthropic provider; default from
	// OPENAI_BASE_URL or ANTHROPIC_BASE_URL, else the vendor's API. Any
	// OpenAI-compatible server (Ollama, vLLM, llama.cpp) works.
	BaseURL string `yaml:"base_url"`
	// APIKeyEnv names the variable holding the API key; default
	// OPENAI_API_KEY or ANTHROPIC_API_KEY.
	APIKeyEnv string `yaml:"api_key_env"`
	// RequestTimeout bounds one HTTP request to the provider.
	RequestTimeout Duration `yaml:"request_timeout"`
	// Model is the model of agents on this provider that name none.
	Model string `yaml:"model"`
	// Prices are what the provider charges, so that the dashboard can show
	// what a run cost next to its tokens; nil: tokens only.
	Prices *Prices `yaml:"prices"`
}

// Prices are a provider's prices in US dollars per million tokens. The
// runner spends nothing by them: they only turn the tokens it counts into
// money an operator can compare.
type Prices struct {
	// InputPerMTok prices the input (prompt) tokens not served from the
	// provider's prompt cache.
	InputPerMTok  float64 `yaml:"input_per_mtok"`
	OutputPerMTok float64 `yaml:"output_per_mtok"`
	// CachedInputPerMTok prices the input tokens served from the prompt
	// cache; nil: InputPerMTok, since a provider that reports no cache
	// discount charges them in full.
	CachedInputPerMTok *float64 `yaml:"cached_input_per_mtok"`
}

// Env is what a child process the runner starts (a process agent, an MCP
// server, a CLI-backed tool) gets besides the base variables. The runner's
// environment holds its secrets, so a child gets none of it but what Pass
// names.
type Env struct {
	// Pass names variables of the runner's environment the child gets,
	// such as the API key a coding-agent CLI needs; an unset one is absent.
	Pass []string `yaml:"pass"`
	// Set gives variables with their values: plain settings, never secrets
	// (those are passed by name, so they stay out of the file).
	Set map[string]string `yaml:"set"`
}

// Provider kinds.
const (
	ProviderMock      = "mock"
	ProviderProcess   = "process"
	ProviderOpenAI    = "openai"
	ProviderAnthropic = "anthropic"
)

// Retries is a retry policy (FR-045/046).
type Retries struct {
	// Max is how many times a failed step is retried (so Max+1 attempts).
	Max *int `yaml:"max"`
	// Backoff is the wait before each retry; the last one repeats.
	Backoff []Duration `yaml:"backoff"`
	// InvalidOutput retries an attempt whose output its contract refused
	// (a graph's steps; by default such an attempt fails the step at once).
	InvalidOutput *bool `yaml:"invalid_output"`
}

// AgentDefaults are inherited by every agent.
type AgentDefaults struct {
	Provider string   `yaml:"provider"`
	Model    string   `yaml:"model"`
	Timeout  Duration `yaml:"timeout"`
	Retries  Retries  `yaml:"retries"`
	// MaxTurns bounds the model turns of one attempt.
	MaxTurns int `yaml:"max_turns"`
	// MaxTokens bounds one model response.
	MaxTokens int `yaml:"max_tokens"`
	// RepairTurns is how many times invalid output is sent back to the
	// model with the validation errors before the step fails.
	RepairTurns *int `yaml:"repair_turns"`
}

// Agent is how to run one role.
type Agent struct {
	// Identity is the agent's identity prompt (FR-148).
	Identity string `yaml:"identity"`
	Provider string `yaml:"provider"`
	// Timeout of one attempt (FR-016).
	Timeout Duration `yaml:"timeout"`
	Retries *Retries `yaml:"retries"`
	// Tools the agent may use; their tools.md sections go into its prompt.
	Tools []string `yaml:"tools"`
	// Memory: the agent keeps <artifacts_dir>/<agent>/memory.md.
	Memory bool `yaml:"memory"`
	// Inputs are the artifacts the agent is given, in this order.
	Inputs []Input `yaml:"inputs"`
	Output Output  `yaml:"output"`

	// For agents on a model provider (openai, anthropic):
	// Model is the model name (FR-077).
	Model string `yaml:"model"`
	// Temperature of sampling; unset: the provider's default.
	Temperature *float64 `yaml:"temperature"`
	MaxTokens   int      `yaml:"max_tokens"`
	MaxTurns    int      `yaml:"max_turns"`
	RepairTurns *int     `yaml:"repair_turns"`
	// TokenBudget bounds the tokens (input + output) of one attempt; 0: none.
	TokenBudget int `yaml:"token_budget"`
	// ToolBudget bounds the tool calls of one attempt; once they are
	// spent the model gets one last turn, without tools, to answer. 0: none.
	ToolBudget int `yaml:"tool_budget"`
	// InlineInputs puts the inputs' content into the prompt instead of
	// giving the model filesystem_read access to them.
	InlineInputs bool `yaml:"inline_inputs"`

	// For agents on a process provider:
	// Env adds to the provider's env for this agent only: its pass names
	// join the provider's, its set values replace the provider's.
	Env Env `yaml:"env"`

	// Name is the agent's key in agents.
	Name string `yaml:"-"`
}

// Input is one input of an agent: an artifact of this cycle, the same
// artifact from earlier cycles, or an agent's memory file.
type Input struct {
	// Artifact is a file name produced by a step (plan.md).
	Artifact string `yaml:"artifact"`
	// Memory names the agent whose memory file is the input.
	Memory string `yaml:"memory"`
	// Document is the shared document of the run's pipeline
	// (pipelines.NAME.document), as the runner wrote it for this attempt.
	Document bool `yaml:"document"`
	// History takes Artifact from earlier completed cycles instead of this one.
	History *History `yaml:"history"`
	// Description is shown in the prompt next to the path.
	Description string `yaml:"description"`
}

// History selects earlier cycles: the Last most recent ones, and/or those
// that started Within the given time before the current cycle.
type History struct {
	Last   int      `yaml:"last"`
	Within Duration `yaml:"within"`
}

// Output is an agent's output artifact and its contract.
type Output struct {
	// File is the artifact's name in the cycle directory.
	File string `yaml:"file"`
	// Template is the output template; its headings are the required
	// sections of a markdown artifact (FR-153..156).
	Template string `yaml:"template"`
	// Schema is the JSON Schema of a JSON artifact.
	Schema string `yaml:"schema"`
	// MaxBytes is the largest output accepted: a larger one fails the
	// attempt as invalid output, unread. Default DefaultMaxArtifactBytes.
	MaxBytes int `yaml:"max_bytes"`
}

// Pipeline is the graph of steps one run executes: the learning loop's
// (pipeline:) or one of pipelines:.
type Pipeline struct {
	Start string           `yaml:"start"`
	Steps map[string]*Step `yaml:"steps"`
	// Final is the step a run that outlives its time bound is forced to,
	// with what it has (FR-007): the learning loop's cycle that outlives
	// schedule.max_cycle, a run of pipelines: that outlives max_duration;
	// empty: such a run fails.
	Final string `yaml:"final"`
	// Views is when its runs' artifact files are written: eager (after
	// each commit, the default) or on_read (only when an agent reads one).
	Views string `yaml:"views"`

	// The keys below apply to pipelines: only.
	// RunID is the format of run ids: timestamp, date-seq or seq (default).
	RunID string `yaml:"run_id"`
	// MaxConcurrentRuns bounds the runs that run at once; 0: no bound.
	MaxConcurrentRuns int `yaml:"max_concurrent_runs"`
	// InputsSchema is the JSON Schema file a run's inputs (a JSON object)
	// must satisfy; empty: any inputs.
	InputsSchema string `yaml:"inputs_schema"`
	// Schedule, if set, starts runs every interval or on a cron schedule.
	Schedule *PipelineSchedule `yaml:"schedule"`
	// MaxDuration, if set, bounds a run: once it is overdue, its
	// unfinished steps are cut short and it is forced to Final.
	MaxDuration Duration `yaml:"max_duration"`
	// Document, if set, keeps one shared document for the run in flight
	// and archives it when the run ends (spec 2's current_cycle.md).
	Document *Document `yaml:"document"`

	// Name is the pipeline's key in pipelines, or the workspace's name.
	Name string `yaml:"-"`
}

// Document is a pipeline's shared document: a file, written by the runner
// from the store, that holds a header made from the run's inputs and the
// artifact of each step run that succeeded, in order; and the folder its
// final version is archived in when the run ends. Its paths are relative
// to the workspace, and stay inside it.
type Document struct {
	// File is the live document (docs/context/current_cycle.md).
	File string `yaml:"file"`
	// Archive is the folder of the ended runs' documents, named
	// YYYY-MM-DD_cycle-NNN[_incomplete|_failed].md.
	Archive string `yaml:"archive"`
	// Iteration, if set, is the step each visit of which opens an
	// "## Iteration N" heading.
	Iteration string `yaml:"iteration"`
}

// PipelineSchedule starts runs of a pipeline on a clock: every interval,
// or at the fire times of a cron expression (exactly one of the two).
type PipelineSchedule struct {
	// Every is the time from one run's start to the next one's.
	Every Duration `yaml:"every"`
	// Cron is a five-field cron expression or a descriptor (@daily), read
	// in Timezone (default UTC).
	Cron     string `yaml:"cron"`
	Timezone string `yaml:"timezone"`
	// Overlap: what a fire time does while a run is running: allow (the
	// default), skip or queue.
	Overlap string `yaml:"overlap"`
	// CatchUp: what the fire times missed while the runner was down do
	// at its start: none, one (the default) or all, at most CatchUpMax.
	CatchUp    string `yaml:"catch_up"`
	CatchUpMax int    `yaml:"catch_up_max"`
	// Inputs, if set, are the inputs of each run the schedule starts (a
	// JSON object that the pipeline's inputs_schema must accept).
	Inputs JSON `yaml:"inputs"`
}

// ScheduleInputs are the inputs of the runs the schedule starts, nil
// without any.
func (s *PipelineSchedule) ScheduleInputs() map[string]any {
	if s == nil || len(s.Inputs) == 0 {
		return nil
	}
	var in map[string]any
	if json.Unmarshal(s.Inputs, &in) != nil {
		return nil // validation refused it
	}
	return in
}

// Step kinds.
const (
	StepAgent     = "agent"
	StepExecution = "execution"
	// StepGate waits for an operator's decision (pipelines: only).
	StepGate = "gate"
	// StepCapsule stores a capsule made from the run's artifacts
	// (pipelines: only).
	StepCapsule = "capsule"
)

// EndStep as a step's next ends the cycle.
const EndStep = "end"

// Step is one node of the pipeline.
type Step struct {
	// Kind: agent (default) runs Agent; execution hands Artifact to the
	// Execution Service and waits for it; gate waits for an operator;
	// capsule stores the capsule Capsule describes.
	Kind  string `yaml:"kind"`
	Agent string `yaml:"agent"`
	// Next is the following step, or "end".
	Next string `yaml:"next"`
	// Timeout overrides the agent's timeout for this step (FR-018); for an
	// execution step it overrides execution_service.timeout.
	Timeout Duration `yaml:"timeout"`
	// Retries overrides the agent's retry policy for this step.
	Retries *Retries `yaml:"retries"`
	// Deliver says which mailboxes get a message when the step succeeds.
	Deliver []Delivery `yaml:"deliver"`
	// Artifact is the file an execution step hands over.
	Artifact string `yaml:"artifact"`
	// Validity locates the artifact's validity window (JSON pointers).
	Validity Validity `yaml:"validity"`
	// OnFailure overrides escalation.policy for this step.
	OnFailure string `yaml:"on_failure"`

	// The keys below are edges and settings of graphs (pipelines: only).
	// Routes pick the next step by the label read through Label.
	Routes []Route `yaml:"routes"`
	Label  *Label  `yaml:"label"`
	// Then starts parallel branches.
	Then []string `yaml:"then"`
	// Join: all waits for every incoming branch, any goes on with the first.
	Join string `yaml:"join"`
	// MaxVisits caps the step's visits in one run; a step on a loop needs it.
	MaxVisits int `yaml:"max_visits"`
	// OnCap is what happens at MaxVisits: halt (the default), {to: STEP}
	// or {gate: STEP}.
	OnCap *OnCap `yaml:"on_cap"`
	// Gate configures a gate step.
	Gate *Gate `yaml:"gate"`
	// Capsule configures a capsule step.
	Capsule *CapsuleStep `yaml:"capsule"`
	// State is the state whose agent a state step runs (Planning …).
	State string `yaml:"state"`
	// Tasks configures a tasks step.
	Tasks *TasksStep `yaml:"tasks"`

	// ID is the step's key in its pipeline's steps.
	ID string `yaml:"-"`
}

// AgentName is the agent an agent step runs ("" for other kinds), for the
// scheduler's events and attempts.
func (s *Step) AgentName() string { return s.Agent }

// Route is one of a step's routes: {when: LABEL, to: STEP}, or the default
// {otherwise: STEP}.
type Route struct {
	When      string `yaml:"when"`
	To        string `yaml:"to"`
	Otherwise string `yaml:"otherwise"`
}

// Label says where a step's routing label is read from its output: set
// exactly one key.
type Label struct {
	// Pointer is a JSON pointer into a JSON artifact.
	Pointer string `yaml:"pointer"`
	// Section is a markdown section whose first line is the label.
	Section string `yaml:"section"`
	// Field is a labelled markdown field ("Verdict: APPROVE").
	Field string `yaml:"field"`
	// Regex's first group (or whole match) is the label.
	Regex string `yaml:"regex"`
	// Parser names a parser of a known format (signal).
	Parser string `yaml:"parser"`
}

// OnCap is written halt, end, {to: STEP} or {gate: STEP}.
type OnCap struct {
	// Halt is set by the plain word halt.
	Halt bool `yaml:"-"`
	// End is set by the plain word end: the run ends incomplete.
	End bool `yaml:"-"`
	// To is the step a visit past the cap goes to instead.
	To string `yaml:"to"`
	// Gate is a gate step that a visit past the cap opens.
	Gate string `yaml:"gate"`
}

// Gate configures a gate step.
type Gate struct {
	// Timeout, if set, decides Default for the operator when it passes.
	Timeout Duration `yaml:"timeout"`
	// Default is approve or reject.
	Default string `yaml:"default"`
}

// Delivery is a message deposited when a step succeeds (Appendix A).
type Delivery struct {
	// Kind: forward, backward, broadcast or status.
	Kind string   `yaml:"kind"`
	To   []string `yaml:"to"`
	// Section of a markdown artifact to quote in the message.
	Section string `yaml:"section"`
	// Field of a JSON artifact (a JSON pointer) to quote in the message.
	Field string `yaml:"field"`
}

// Validity names the fields of a validity window in a JSON artifact.
type Validity struct {
	From  string `yaml:"from"`
	Until string `yaml:"until"`
}

// Schedule paces cycles (FR-005..008).
type Schedule struct {
	// Every is the time from one cycle's start to the next one's.
	Every Duration `yaml:"every"`
	// Cron, instead of Every, starts cycles at the fire times of a
	// five-field cron expression or a descriptor (@daily), read in
	// Timezone (default UTC).
	Cron     string `yaml:"cron"`
	Timezone string `yaml:"timezone"`
	// Overlap: what a fire time does while a cycle is running: queue (the
	// default: the cycle starts after it) or skip.
	Overlap string `yaml:"overlap"`
	// CatchUp: what the fire times missed while the runner was down do
	// at its start: none, or one (the default) cycle for them all. (Not
	// all: cycles are never closer than min_cycle.)
	CatchUp string `yaml:"catch_up"`
	// MinCycle: the next cycle never starts sooner after the last start.
	MinCycle Duration `yaml:"min_cycle"`
	// MaxCycle bounds a cycle's duration.
	MaxCycle Duration `yaml:"max_cycle"`
}

// Capsules configures the capsule store.
type Capsules struct {
	// MaxChars is the size cap of a capsule's text; 0: the default, 12000.
	MaxChars int `yaml:"max_chars"`
}

// Mailbox configures the file mailboxes.
type Mailbox struct {
	// MaxMessages kept per mailbox; older ones are pruned (FR-031/032).
	MaxMessages int `yaml:"max_messages"`
}

// ExecutionService is the REST service that trades a strategy.
type ExecutionService struct {
	URL string `yaml:"url"`
	// TokenEnv names the environment variable holding the bearer token.
	TokenEnv string `yaml:"token_env"`
	// Timeout is how long an execution step waits for completion.
	Timeout Duration `yaml:"timeout"`
	// PollInterval is the first wait between status polls; it doubles up to
	// ten times this value.
	PollInterval Duration `yaml:"poll_interval"`
	// RequestTimeout bounds one HTTP request.
	RequestTimeout Duration `yaml:"request_timeout"`
	// HeartbeatInterval is how often the runner tells the service it is
	// alive (the dead man's switch, FR-055); 0 sends none.
	HeartbeatInterval Duration `yaml:"heartbeat_interval"`
	// CallbackSecretEnv names the variable holding the secret the service
	// signs its status callbacks with; empty: callbacks are refused.
	CallbackSecretEnv string `yaml:"callback_secret_env"`
}

// Tool declares one tool: the keys every tool has. Its kind is the
// implementation (default: the tool's name); description and parameters
// override the implementation's. The other keys of the section belong to
// the kind, which decodes them into Settings (see ToolKind).
type Tool struct {
	Kind        string `yaml:"kind"`
	Description string `yaml:"description"`
	// Parameters is the JSON Schema of the arguments, written as YAML.
	Parameters JSON `yaml:"parameters"`
	// Timeout of one call; default the kind's, else DefaultToolTimeout.
	Timeout Duration `yaml:"timeout"`
	// Retries of transient failures (timeouts, 5xx, connection errors).
	Retries *Retries `yaml:"retries"`
	Breaker Breaker  `yaml:"breaker"`

	// Settings are the keys of the kind, decoded by the kind's settings
	// type; nil when the configuration was read without its kind.
	Settings ToolSettings `yaml:"-"`
	// Name is the tool's key in tools.
	Name string `yaml:"-"`
}

// Breaker is a tool's circuit breaker: it opens after Failures consecutive
// failed calls and lets one trial call through after OpenFor.
type Breaker struct {
	Failures int      `yaml:"failures"`
	OpenFor  Duration `yaml:"open_for"`
}

// MCPServer is an external MCP server: a stdio command or a streamable-HTTP
// URL. Its tools join the registry as <prefix><tool>.
type MCPServer struct {
	Command []string `yaml:"command"`
	// Env is what a stdio server gets besides the base variables.
	Env Env    `yaml:"env"`
	URL string `yaml:"url"`
	// Prefix of the imported tool names; default "<server name>_".
	Prefix string `yaml:"prefix"`
	// Tools limits which of the server's tools are imported; empty: all.
	Tools []string `yaml:"tools"`
	// Timeout of one call; default 30s.
	Timeout Duration `yaml:"timeout"`
	// BearerEnv names the variable holding a bearer token for a URL server.
	BearerEnv string `yaml:"bearer_env"`

	// Name is the server's key in mcp_servers.
	Name string `yaml:"-"`
}

// Escalation says what happens when a step fails for good (FR-048..051).
type Escalation struct {
	// Policy: halt (the loop stops until an operator resumes it), skip (the
	// step's last known good artifact stands in, when there is one; else
	// halt) or fail (the cycle ends failed; the next one runs on schedule).
	Policy  string  `yaml:"policy"`
	Webhook Webhook `yaml:"webhook"`
}

// Escalation policies.
const (
	PolicyHalt = "halt"
	PolicySkip = "skip"
	PolicyFail = "fail"
)

// Webhook is where operators are notified, with a signed body.
type Webhook struct {
	URL string `yaml:"url"`
	// SecretEnv names the variable holding the HMAC-SHA256 secret.
	SecretEnv string   `yaml:"secret_env"`
	Timeout   Duration `yaml:"timeout"`
}

// Watchdog makes a stalled engine exit, so a supervisor restarts it.
type Watchdog struct {
	// StallGrace is how long past its deadline the engine's current
	// operation may run before the process exits non-zero.
	StallGrace Duration `yaml:"stall_grace"`
}

// Scheduler bounds the graph scheduler, which runs the runs of pipelines:.
type Scheduler struct {
	// MaxConcurrentAttempts bounds the attempts running at once across
	// every run and pipeline of the process; further attempts wait their
	// turn in the order they became runnable.
	MaxConcurrentAttempts int `yaml:"max_concurrent_attempts"`
	// MaxInterruptions is how often one step run may be cut short by the
	// runner stopping before it fails for good: an interruption costs no
	// retry, but a step that kills the runner each time must not loop.
	MaxInterruptions int `yaml:"max_interruptions"`
}

// Budgets bound what a cycle may spend.
type Budgets struct {
	// CycleTokens bounds the model tokens of all attempts of one cycle; 0: none.
	CycleTokens int `yaml:"cycle_tokens"`
}

// Server is the operator HTTP server of agentrunner serve.
type Server struct {
	Listen string `yaml:"listen"`
	// Auth says who may call the API. Without any key or JWT the server
	// only listens on loopback.
	Auth Auth `yaml:"auth"`
	// Public lists endpoint groups served without authentication:
	// "health" (/health/live, /health/ready) and "metrics" (/metrics).
	Public []string `yaml:"public"`
	// MaxBodyBytes bounds a request body.
	MaxBodyBytes int64 `yaml:"max_body_bytes"`
	// ReadHeaderTimeout bounds the wait for a request's headers, from the
	// connection's start or the end of the last response.
	ReadHeaderTimeout Duration `yaml:"read_header_timeout"`
	// ReadTimeout bounds the reading of a whole request, body included.
	ReadTimeout Duration `yaml:"read_timeout"`
	// WriteTimeout bounds the writing of one response; the event stream
	// sets its own deadline for each event instead.
	WriteTimeout Duration `yaml:"write_timeout"`
	// IdleTimeout closes a keep-alive connection that waits this long for
	// its next request.
	IdleTimeout Duration `yaml:"idle_timeout"`
	// MaxHeaderBytes bounds a request's header block.
	MaxHeaderBytes int `yaml:"max_header_bytes"`
	// MaxConnections caps the open connections; the cap in force is also
	// at most half the process's file descriptor limit, so that the engine
	// keeps descriptors for its own work.
	MaxConnections int `yaml:"max_connections"`
}

// Auth holds the API's credentials (FR-099, FR-166).
type Auth struct {
	APIKeys []APIKey `yaml:"api_keys"`
	// JWT, when set, also accepts bearer tokens signed with its key; the
	// token's subject is the operator and its "role" claim the role.
	JWT *JWT `yaml:"jwt"`
	// TrustedProxies are the reverse proxies (addresses or CIDR ranges)
	// whose X-Forwarded-For names the client: behind one, every client
	// shares the proxy's address, and the limit on refused credentials
	// would refuse them all for one client's guesses.
	TrustedProxies []string `yaml:"trusted_proxies"`
}

// ParseProxy reads an entry of trusted_proxies: an address (a range of
// one) or a CIDR range.
func ParseProxy(s string) (netip.Prefix, error) {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p.Masked(), nil
	}
	a, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("want an IP address or a CIDR range such as 10.0.0.0/8, got %q", s)
	}
	a = a.Unmap()
	return netip.PrefixFrom(a, a.BitLen()), nil
}

// APIKey is one named key with a role. The key itself is in the
// environment variable KeyEnv.
type APIKey struct {
	Name   string `yaml:"name"`
	KeyEnv string `yaml:"key_env"`
	Role   string `yaml:"role"`
}

// Roles, each allowed what the one before it is, and more.
const (
	RoleViewer   = "viewer"   // GET
	RoleOperator = "operator" // overrides, inject, mailbox POST
	RoleAdmin    = "admin"    // reload and configuration
)

// Roles lists the roles from least to most allowed.
var Roles = []string{RoleViewer, RoleOperator, RoleAdmin}

// JWT configures bearer tokens.
type JWT struct {
	// Algorithm is HS256 (SecretEnv holds the shared secret) or RS256
	// (PublicKeyFile holds the PEM public key).
	Algorithm     string `yaml:"algorithm"`
	SecretEnv     string `yaml:"secret_env"`
	PublicKeyFile string `yaml:"public_key_file"`
	// Issuer and Audience, when set, must match the token's.
	Issuer   string `yaml:"issuer"`
	Audience string `yaml:"audience"`
}

// Public endpoint groups.
const (
	PublicHealth  = "health"
	PublicMetrics = "metrics"
)

// Events says how long events are kept.
type Events struct {
	// Retention is how long events are kept, and with them the stored
	// prompts and validation reports (never the stored artifacts); 0
	// keeps them forever.
	Retention Duration `yaml:"retention"`
}

// Archive says which finished runs keep their directories, how often the
// others are archived into cycles/history/, and how long archives are
// kept. The store keeps every artifact whatever happens to the files, so
// the API and agents read an archived run's artifacts as before.
type Archive struct {
	// Keep is how many of each pipeline's newest finished runs keep their
	// directories; older ones are archived. 0 archives none.
	Keep int `yaml:"keep"`
	// Every is how often serve and run archive.
	Every Duration `yaml:"every"`
	// Retention deletes old archives; its zero value keeps them all.
	Retention ArchiveRetention `yaml:"retention"`
}

// ArchiveRetention bounds the archives of each pipeline by count, by age
// (from their runs' end), or both.
type ArchiveRetention struct {
	// Count is how many archives of each pipeline are kept, the newest;
	// 0: no bound.
	Count int `yaml:"count"`
	// Age is how long after its run ended an archive is kept; 0: no bound.
	Age Duration `yaml:"age"`
}

// Health configures /health/ready.
type Health struct {
	// MinFreeDisk is the free space, in MiB, the artifacts dir's file
	// system must have.
	MinFreeDiskMiB int64 `yaml:"min_free_disk_mib"`
	// MaxEngineLag is how far past its deadline the engine's current
	// operation may be before the runner is not ready.
	MaxEngineLag Duration `yaml:"max_engine_lag"`
	// ReadyWhenPaused keeps /health/ready at 200 while an operator has
	// paused the workspace (true by default): a pause is deliberate, and
	// an orchestrator that stops routing to, or restarts, a paused runner
	// would undo it or cut the operator off from the API that lifts it.
	// A halted run is never ready: it waits for an operator unasked.
	ReadyWhenPaused bool `yaml:"ready_when_paused"`
}

// Secrets says where the encrypted secrets file is and what decrypts it.
// A variable the configuration names (api_key_env …) is looked up in the
// environment, then in the file a NAME_FILE variable names, then here.
type Secrets struct {
	// File is the age-encrypted secrets file; default secrets.age beside
	// the configuration. A file that does not exist holds no secrets.
	File string `yaml:"file"`
	// IdentityFile holds the age identity that decrypts File, read when
	// AGENTRUNNER_AGE_IDENTITY (or AGENTRUNNER_AGE_IDENTITY_FILE) is not
	// set.
	IdentityFile string `yaml:"identity_file"`
}

// Load reads, decodes, overrides from the environment, fills in defaults and
// validates the configuration at path, and compiles the inputs_schema files
// it names. Any problem makes it return Problems (see Parse for when the
// Config comes with them). It knows no tool kinds: see LoadWith.
func Load(path string) (*Config, error) {
	return LoadWith(path, Options{})
}

// Options say how a configuration is read.
type Options struct {
	// LookupEnv reads environment overrides; nil: os.LookupEnv.
	LookupEnv func(string) (string, bool)
	// ToolKinds decode and check the keys of each tool's section that
	// belong to its kind. Without them those keys are not read and Tool's
	// Settings stay nil: enough for a reader that builds no tool.
	ToolKinds ToolKinds
}

// LoadWith is Load with the tool kinds a runner builds.
func LoadWith(path string, o Options) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, Problems{{Where: path, Message: fmt.Sprintf("cannot read configuration: %v", err)}}
	}
	if o.LookupEnv == nil {
		o.LookupEnv = os.LookupEnv
	}
	cfg, err := ParseWith(path, data, o)
	if cfg == nil {
		return nil, err
	}
	var ps Problems
	errors.As(err, &ps)
	ps = append(ps, cfg.checkCapsuleTexts()...)
	if ps = append(ps, cfg.loadInputSchemas()...); len(ps) > 0 {
		return cfg, ps
	}
	return cfg, nil
}

// Parse is Load for a configuration already in memory; lookupEnv is how
// environment overrides are read (os.LookupEnv, or a map in tests).
//
// When the file decodes but breaks validation rules, Parse returns the
// Config (with defaults) together with the Problems, so that a checker can
// go on to check the files it names; a runner must not use it.
func Parse(path string, data []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	return ParseWith(path, data, Options{LookupEnv: lookupEnv})
}

// ParseWith is Parse with options; o.LookupEnv must be set.
func ParseWith(path string, data []byte, o Options) (*Config, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, Problems{{Where: path, Message: err.Error()}}
	}
	d := &decoder{file: path, lines: map[string]string{}, toolKeys: map[string][][2]*yaml.Node{}}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		return nil, Problems{syntaxProblem(path, err)}
	}
	cfg := &Config{Path: abs, Dir: filepath.Dir(abs)}
	if len(root.Content) == 0 {
		return nil, Problems{{Where: path, Message: "the file is empty"}}
	}
	// A second document would be ignored silently, and with it whatever
	// the user meant by it.
	var extra yaml.Node
	if err := dec.Decode(&extra); err == nil {
		return nil, Problems{{Where: fmt.Sprintf("%s:%d", path, extra.Line), Message: "a second YAML document (after ---): the configuration is one document"}}
	} else if !errors.Is(err, io.EOF) {
		return nil, Problems{syntaxProblem(path, err)}
	}
	d.decode(root.Content[0], reflect.ValueOf(cfg).Elem(), "")
	d.applyEnv(reflect.ValueOf(cfg).Elem(), EnvPrefix, "", o.LookupEnv)
	cfg.lines = d.lines
	d.decodeToolSettings(cfg, o.ToolKinds, o.LookupEnv)
	if len(d.problems) > 0 {
		return nil, d.problems
	}
	cfg.WithDefaults()
	if ps := cfg.validate(); len(ps) > 0 {
		return cfg, ps
	}
	return cfg, nil
}

// yamlSyntaxLine is the line the YAML parser names in a syntax error.
var yamlSyntaxLine = regexp.MustCompile(`^yaml: line ([0-9]+): `)

// syntaxProblem locates a YAML syntax error at file:line, as every other
// problem is, when the parser names the line.
func syntaxProblem(path string, err error) Problem {
	msg := err.Error()
	if m := yamlSyntaxLine.FindStringSubmatch(msg); m != nil && m[1] != "0" {
		return Problem{Where: path + ":" + m[1], Message: "not valid YAML: " + strings.TrimPrefix(msg[len(m[0]):], "yaml: ")}
	}
	return Problem{Where: path, Message: fmt.Sprintf("not valid YAML: %v", err)}
}

// Where returns the source position of a key path: where the key was
// given, else where its closest given parent was, else the file.
func (c *Config) Where(key string) string {
	for key != "" {
		if w, ok := c.lines[key]; ok {
			return w
		}
		i := strings.LastIndexAny(key, ".[")
		if i < 0 {
			break
		}
		key = key[:i]
	}
	return c.Path
}

// Given reports whether a key was given in the file or the environment,
// rather than left to its default.
func (c *Config) Given(key string) bool { return c.given(key) }

// Abs resolves a path of the configuration against its directory.
func (c *Config) Abs(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.Dir, p)
}
