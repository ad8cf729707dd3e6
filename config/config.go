// Package config reads agentrunner.yaml: strict decoding with file:line
// errors, environment overrides (FR-073), documented defaults and validation
// that reports every problem at once (FR-072..074).
package config

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"strings"

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
	Defaults         AgentDefaults     `yaml:"defaults"`
	Agents           map[string]*Agent `yaml:"agents"`
	Pipeline         Pipeline          `yaml:"pipeline"`
	Schedule         Schedule          `yaml:"schedule"`
	Mailbox          Mailbox           `yaml:"mailbox"`
	ExecutionService ExecutionService  `yaml:"execution_service"`
	Server           Server            `yaml:"server"`

	// Path is the file the configuration was read from.
	Path string `yaml:"-"`
	// Dir is the directory relative paths are resolved against.
	Dir string `yaml:"-"`
	// lines maps key paths to their source position.
	lines map[string]string
}

// State says where the durable state lives.
type State struct {
	// Driver is the store: sqlite (the embedded default).
	Driver string `yaml:"driver"`
	// Path of the SQLite database; default <artifacts_dir>/state.db.
	Path string `yaml:"path"`
}

// Provider is a way to run agents.
type Provider struct {
	// Kind: mock (deterministic offline agents) or process (a child process,
	// e.g. a coding-agent CLI).
	Kind string `yaml:"kind"`
	// Command is the argv of a process agent; see runtime/process for the
	// {placeholders} it may contain.
	Command []string `yaml:"command"`
	// Env adds variables to a process agent's environment.
	Env map[string]string `yaml:"env"`
	// KillGrace is the time between SIGTERM and SIGKILL on timeout.
	KillGrace Duration `yaml:"kill_grace"`
}

// Provider kinds.
const (
	ProviderMock    = "mock"
	ProviderProcess = "process"
)

// Retries is a retry policy (FR-045/046).
type Retries struct {
	// Max is how many times a failed step is retried (so Max+1 attempts).
	Max *int `yaml:"max"`
	// Backoff is the wait before each retry; the last one repeats.
	Backoff []Duration `yaml:"backoff"`
}

// AgentDefaults are inherited by every agent.
type AgentDefaults struct {
	Provider string   `yaml:"provider"`
	Timeout  Duration `yaml:"timeout"`
	Retries  Retries  `yaml:"retries"`
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
}

// Pipeline is the graph of steps one cycle runs.
type Pipeline struct {
	Start string           `yaml:"start"`
	Steps map[string]*Step `yaml:"steps"`
}

// Step kinds.
const (
	StepAgent     = "agent"
	StepExecution = "execution"
)

// EndStep as a step's next ends the cycle.
const EndStep = "end"

// Step is one node of the pipeline.
type Step struct {
	// Kind: agent (default) runs Agent; execution hands Artifact to the
	// Execution Service and waits for it.
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

	// ID is the step's key in pipeline.steps.
	ID string `yaml:"-"`
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
	// MinCycle: the next cycle never starts sooner after the last start.
	MinCycle Duration `yaml:"min_cycle"`
	// MaxCycle bounds a cycle's duration.
	MaxCycle Duration `yaml:"max_cycle"`
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
}

// Server is the operator HTTP server of agentrunner serve.
type Server struct {
	Listen string `yaml:"listen"`
}

// Load reads, decodes, overrides from the environment, fills in defaults and
// validates the configuration at path. Any problem makes it return Problems
// (see Parse for when the Config comes with them).
func Load(path string) (*Config, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, Problems{{Where: path, Message: fmt.Sprintf("cannot read configuration: %v", err)}}
	}
	return Parse(path, data, os.LookupEnv)
}

// Parse is Load for a configuration already in memory; lookupEnv is how
// environment overrides are read (os.LookupEnv, or a map in tests).
//
// When the file decodes but breaks validation rules, Parse returns the
// Config (with defaults) together with the Problems, so that a checker can
// go on to check the files it names; a runner must not use it.
func Parse(path string, data []byte, lookupEnv func(string) (string, bool)) (*Config, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, Problems{{Where: path, Message: err.Error()}}
	}
	d := &decoder{file: path, lines: map[string]string{}}
	var root yaml.Node
	dec := yaml.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&root); err != nil {
		return nil, Problems{{Where: path, Message: fmt.Sprintf("not valid YAML: %v", err)}}
	}
	cfg := &Config{Path: abs, Dir: filepath.Dir(abs)}
	if len(root.Content) == 0 {
		return nil, Problems{{Where: path, Message: "the file is empty"}}
	}
	d.decode(root.Content[0], reflect.ValueOf(cfg).Elem(), "")
	d.applyEnv(reflect.ValueOf(cfg).Elem(), EnvPrefix, "", lookupEnv)
	cfg.lines = d.lines
	if len(d.problems) > 0 {
		return nil, d.problems
	}
	cfg.WithDefaults()
	if ps := cfg.validate(); len(ps) > 0 {
		return cfg, ps
	}
	return cfg, nil
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

// Abs resolves a path of the configuration against its directory.
func (c *Config) Abs(p string) string {
	if p == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(c.Dir, p)
}
