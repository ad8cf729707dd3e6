package config

import (
	"fmt"
	"path/filepath"
	"time"
)

// The defaults, all in one place. The README's configuration reference
// lists the same values.
const (
	DefaultName           = "agentrunner"
	DefaultArtifactsDir   = "./artifacts" // FR-158
	DefaultStateDriver    = "sqlite"
	DefaultStateFile      = "state.db" // under artifacts_dir
	DefaultBackupDir      = "backups"  // under artifacts_dir
	DefaultBackupKeep     = 7
	DefaultToolsFile      = "tools.md"
	DefaultMemoryTemplate = "output_templates/memory.md"
	DefaultAgentTimeout   = 30 * time.Minute
	DefaultRetriesMax     = 3 // FR-045
	DefaultKillGrace      = 5 * time.Second
	DefaultEvery          = 6 * time.Hour
	DefaultMinCycle       = 1 * time.Hour  // FR-005
	DefaultMaxCycle       = 24 * time.Hour // FR-006
	DefaultTimezone       = "UTC"          // of a cron schedule
	// DefaultLoopOverlap: a cycle due while one runs starts after it.
	DefaultLoopOverlap = "queue"
	// DefaultPipelineOverlap: a pipeline's scheduled run starts whatever
	// runs (max_concurrent_runs, if set, queues it), as before overlap
	// could be chosen.
	DefaultPipelineOverlap = "allow"
	// DefaultCatchUp: one run stands for all the fire times missed while
	// the runner was down, as an every schedule always did.
	DefaultCatchUp    = "one"
	DefaultCatchUpMax = 10
	// MaxCatchUp bounds catch_up_max: a runner back from a long downtime
	// must not start a flood of runs.
	MaxCatchUp              = 1000
	DefaultMaxMessages      = 5 // FR-031
	DefaultExecutionTimeout = 2 * time.Hour
	DefaultPollInterval     = 30 * time.Second
	DefaultRequestTimeout   = 10 * time.Second
	DefaultListen           = "127.0.0.1:8080"
	DefaultMaxTurns         = 20   // model turns of one attempt
	DefaultMaxTokens        = 4096 // tokens of one model response
	DefaultRepairTurns      = 1    // turns to fix invalid output
	DefaultModelTimeout     = 2 * time.Minute
	DefaultToolTimeout      = 30 * time.Second // web operations (FR-114)
	DefaultToolRetries      = 2
	DefaultToolBackoff      = time.Second
	DefaultBreakerFailures  = 5
	DefaultBreakerOpenFor   = time.Minute
	DefaultMCPTimeout       = 30 * time.Second
	DefaultPolicy           = PolicyHalt
	DefaultWebhookTimeout   = 10 * time.Second
	DefaultHeartbeat        = 30 * time.Second // FR-055
	DefaultStallGrace       = 5 * time.Minute
	// DefaultShutdownGrace: most agent steps that are nearly done finish
	// within it, and systemd's default stop timeout (90s) is longer.
	DefaultShutdownGrace = 30 * time.Second
	// DefaultMaxConcurrentAttempts: agents mostly wait on a model or a
	// child process, so a 2-core runner keeps several busy.
	DefaultMaxConcurrentAttempts = 16
	// DefaultMaxInterruptions bounds the restarts one step run survives.
	DefaultMaxInterruptions = 10
	DefaultMaxBodyBytes     = 1 << 20
	DefaultEventRetention   = 30 * 24 * time.Hour
	DefaultMinFreeDiskMiB   = 1024
	DefaultSecretsFile      = "secrets.age"
	DefaultMaxEngineLag     = time.Minute
	// DefaultArchiveKeep: the last 50 runs of each pipeline stay as
	// directories, 12 days of the learning loop at 4 cycles a day.
	DefaultArchiveKeep  = 50
	DefaultArchiveEvery = time.Hour
	// MinArchiveEvery keeps a pass, which reads every run, from running
	// back to back.
	MinArchiveEvery = time.Minute
	// DefaultMaxArtifactBytes bounds an agent's output: far above any
	// useful artifact, far below what would strain the runner's memory.
	DefaultMaxArtifactBytes = 8 << 20
)

// The API server's connection limits: slow or idle clients are cut off
// long before they matter, and headers stay small (a JWT fits).
const (
	DefaultReadHeaderTimeout = 10 * time.Second
	DefaultReadTimeout       = 30 * time.Second
	DefaultWriteTimeout      = 30 * time.Second
	DefaultIdleTimeout       = 30 * time.Second
	DefaultMaxHeaderBytes    = 32 << 10
	DefaultMaxConnections    = 1024
)

// APIKeyEnvDefaults are the variables model providers read their key from
// when api_key_env is not set, as the official SDKs do.
var APIKeyEnvDefaults = map[string]string{ProviderOpenAI: "OPENAI_API_KEY", ProviderAnthropic: "ANTHROPIC_API_KEY"}

// DefaultBackoff is the wait before the first, second and third retry
// (FR-046); later retries wait as long as the last.
var DefaultBackoff = []time.Duration{5 * time.Minute, 15 * time.Minute, 45 * time.Minute}

// orDefault sets *v to def when the key was not given (in the file or the
// environment) and *v is zero. A key given as zero stays zero, so validation
// can reject "timeout: 0s" instead of silently using the default.
func orDefault[T comparable](c *Config, key string, v *T, def T) {
	var zero T
	if _, given := c.lines[key]; !given && *v == zero {
		*v = def
	}
}

// WithDefaults fills every key not given with its default. It is idempotent.
func (c *Config) WithDefaults() {
	orDefault(c, "name", &c.Name, DefaultName)
	orDefault(c, "artifacts_dir", &c.ArtifactsDir, DefaultArtifactsDir)
	orDefault(c, "state.driver", &c.State.Driver, DefaultStateDriver)
	orDefault(c, "state.path", &c.State.Path, filepath.Join(c.ArtifactsDir, DefaultStateFile))
	orDefault(c, "state.backup.dir", &c.State.Backup.Dir, filepath.Join(c.ArtifactsDir, DefaultBackupDir))
	orDefault(c, "state.backup.keep", &c.State.Backup.Keep, DefaultBackupKeep)
	orDefault(c, "tools_file", &c.ToolsFile, DefaultToolsFile)
	orDefault(c, "memory_template", &c.MemoryTemplate, DefaultMemoryTemplate)
	if c.Providers == nil {
		c.Providers = map[string]*Provider{}
	}
	if c.Providers[ProviderMock] == nil {
		c.Providers[ProviderMock] = &Provider{Kind: ProviderMock}
	}
	for name, p := range c.Providers {
		if p != nil {
			orDefault(c, "providers."+name+".kill_grace", &p.KillGrace, Duration(DefaultKillGrace))
			orDefault(c, "providers."+name+".api_key_env", &p.APIKeyEnv, APIKeyEnvDefaults[p.Kind])
			orDefault(c, "providers."+name+".request_timeout", &p.RequestTimeout, Duration(DefaultModelTimeout))
		}
	}
	orDefault(c, "defaults.max_turns", &c.Defaults.MaxTurns, DefaultMaxTurns)
	orDefault(c, "defaults.max_tokens", &c.Defaults.MaxTokens, DefaultMaxTokens)
	if c.Defaults.RepairTurns == nil {
		n := DefaultRepairTurns
		c.Defaults.RepairTurns = &n
	}
	orDefault(c, "defaults.timeout", &c.Defaults.Timeout, Duration(DefaultAgentTimeout))
	c.Defaults.Retries.withDefaults(Retries{})
	for name, a := range c.Agents {
		if a == nil {
			continue
		}
		a.Name = name
		orDefault(c, "agents."+name+".provider", &a.Provider, c.Defaults.Provider)
		orDefault(c, "agents."+name+".timeout", &a.Timeout, c.Defaults.Timeout)
		orDefault(c, "agents."+name+".model", &a.Model, c.Defaults.Model)
		if p := c.Providers[a.Provider]; p != nil {
			orDefault(c, "agents."+name+".model", &a.Model, p.Model)
		}
		orDefault(c, "agents."+name+".max_turns", &a.MaxTurns, c.Defaults.MaxTurns)
		orDefault(c, "agents."+name+".max_tokens", &a.MaxTokens, c.Defaults.MaxTokens)
		orDefault(c, "agents."+name+".output.max_bytes", &a.Output.MaxBytes, DefaultMaxArtifactBytes)
		if a.RepairTurns == nil {
			a.RepairTurns = c.Defaults.RepairTurns
		}
		if a.Retries == nil {
			a.Retries = &Retries{}
		}
		a.Retries.withDefaults(c.Defaults.Retries)
	}
	c.Pipeline.Name = c.Name
	c.Pipeline.stepDefaults()
	for name, p := range c.Pipelines {
		if p == nil {
			continue
		}
		p.Name = name
		orDefault(c, "pipelines."+name+".run_id", &p.RunID, string(DefaultRunID))
		p.stepDefaults()
	}
	for name, t := range c.Tools {
		if t == nil {
			continue
		}
		t.Name = name
		key := "tools." + name
		orDefault(c, key+".kind", &t.Kind, name)
		orDefault(c, key+".timeout", &t.Timeout, Duration(DefaultToolTimeout))
		if t.Retries == nil {
			t.Retries = &Retries{}
		}
		if t.Retries.Max == nil {
			n := DefaultToolRetries
			t.Retries.Max = &n
		}
		if len(t.Retries.Backoff) == 0 {
			t.Retries.Backoff = []Duration{Duration(DefaultToolBackoff)}
		}
		orDefault(c, key+".breaker.failures", &t.Breaker.Failures, DefaultBreakerFailures)
		orDefault(c, key+".breaker.open_for", &t.Breaker.OpenFor, Duration(DefaultBreakerOpenFor))
	}
	for name, m := range c.MCPServers {
		if m == nil {
			continue
		}
		m.Name = name
		orDefault(c, "mcp_servers."+name+".prefix", &m.Prefix, name+"_")
		orDefault(c, "mcp_servers."+name+".timeout", &m.Timeout, Duration(DefaultMCPTimeout))
	}
	c.scheduleDefaults()
	orDefault(c, "schedule.min_cycle", &c.Schedule.MinCycle, Duration(DefaultMinCycle))
	orDefault(c, "schedule.max_cycle", &c.Schedule.MaxCycle, Duration(DefaultMaxCycle))
	orDefault(c, "mailbox.max_messages", &c.Mailbox.MaxMessages, DefaultMaxMessages)
	orDefault(c, "execution_service.timeout", &c.ExecutionService.Timeout, Duration(DefaultExecutionTimeout))
	orDefault(c, "execution_service.poll_interval", &c.ExecutionService.PollInterval, Duration(DefaultPollInterval))
	orDefault(c, "execution_service.request_timeout", &c.ExecutionService.RequestTimeout, Duration(DefaultRequestTimeout))
	orDefault(c, "server.listen", &c.Server.Listen, DefaultListen)
	orDefault(c, "escalation.policy", &c.Escalation.Policy, DefaultPolicy)
	orDefault(c, "escalation.webhook.timeout", &c.Escalation.Webhook.Timeout, Duration(DefaultWebhookTimeout))
	orDefault(c, "execution_service.heartbeat_interval", &c.ExecutionService.HeartbeatInterval, Duration(DefaultHeartbeat))
	orDefault(c, "watchdog.stall_grace", &c.Watchdog.StallGrace, Duration(DefaultStallGrace))
	orDefault(c, "shutdown.grace", &c.Shutdown.Grace, Duration(DefaultShutdownGrace))
	orDefault(c, "scheduler.max_concurrent_attempts", &c.Scheduler.MaxConcurrentAttempts, DefaultMaxConcurrentAttempts)
	orDefault(c, "scheduler.max_interruptions", &c.Scheduler.MaxInterruptions, DefaultMaxInterruptions)
	orDefault(c, "server.max_body_bytes", &c.Server.MaxBodyBytes, DefaultMaxBodyBytes)
	orDefault(c, "server.read_header_timeout", &c.Server.ReadHeaderTimeout, Duration(DefaultReadHeaderTimeout))
	orDefault(c, "server.read_timeout", &c.Server.ReadTimeout, Duration(DefaultReadTimeout))
	orDefault(c, "server.write_timeout", &c.Server.WriteTimeout, Duration(DefaultWriteTimeout))
	orDefault(c, "server.idle_timeout", &c.Server.IdleTimeout, Duration(DefaultIdleTimeout))
	orDefault(c, "server.max_header_bytes", &c.Server.MaxHeaderBytes, DefaultMaxHeaderBytes)
	orDefault(c, "server.max_connections", &c.Server.MaxConnections, DefaultMaxConnections)
	orDefault(c, "events.retention", &c.Events.Retention, Duration(DefaultEventRetention))
	orDefault(c, "health.min_free_disk_mib", &c.Health.MinFreeDiskMiB, DefaultMinFreeDiskMiB)
	orDefault(c, "health.max_engine_lag", &c.Health.MaxEngineLag, Duration(DefaultMaxEngineLag))
	orDefault(c, "secrets.file", &c.Secrets.File, DefaultSecretsFile)
	orDefault(c, "health.ready_when_paused", &c.Health.ReadyWhenPaused, true)
	orDefault(c, "archive.keep", &c.Archive.Keep, DefaultArchiveKeep)
	orDefault(c, "archive.every", &c.Archive.Every, Duration(DefaultArchiveEvery))
	for i := range c.Server.Auth.APIKeys {
		orDefault(c, fmt.Sprintf("server.auth.api_keys[%d].role", i), &c.Server.Auth.APIKeys[i].Role, RoleViewer)
	}
	if j := c.Server.Auth.JWT; j != nil {
		orDefault(c, "server.auth.jwt.algorithm", &j.Algorithm, "HS256")
	}
}

// stepDefaults names each step and makes agent the default kind.
func (p *Pipeline) stepDefaults() {
	for id, s := range p.Steps {
		if s == nil {
			continue
		}
		s.ID = id
		if s.Kind == "" {
			s.Kind = StepAgent
		}
	}
}

// withDefaults fills r from parent, and parent's gaps from the defaults.
func (r *Retries) withDefaults(parent Retries) {
	if r.Max == nil {
		r.Max = parent.Max
	}
	if r.Max == nil {
		n := DefaultRetriesMax
		r.Max = &n
	}
	if len(r.Backoff) == 0 {
		r.Backoff = parent.Backoff
	}
	if r.InvalidOutput == nil {
		r.InvalidOutput = parent.InvalidOutput
	}
	if len(r.Backoff) == 0 {
		for _, d := range DefaultBackoff {
			r.Backoff = append(r.Backoff, Duration(d))
		}
	}
}

// Policy is a resolved retry policy.
type Policy struct {
	Max     int
	Backoff []time.Duration
	// InvalidOutput: an output refused by its contract is retried too.
	InvalidOutput bool
}

// Wait returns the backoff before retry number n (1-based).
func (p Policy) Wait(n int) time.Duration {
	if len(p.Backoff) == 0 || n < 1 {
		return 0
	}
	return p.Backoff[min(n, len(p.Backoff))-1]
}

func (r *Retries) policy() Policy {
	p := Policy{Max: *r.Max, InvalidOutput: r.InvalidOutput != nil && *r.InvalidOutput}
	for _, d := range r.Backoff {
		p.Backoff = append(p.Backoff, d.D())
	}
	return p
}

// StepPolicy returns the retry policy of a step: the step's own, else its
// agent's, else the defaults.
func (c *Config) StepPolicy(s *Step) Policy {
	parent := c.Defaults.Retries
	if a := c.Agents[s.Agent]; s.Kind == StepAgent && a != nil {
		parent = *a.Retries
	}
	if s.Retries == nil {
		return parent.policy()
	}
	r := *s.Retries
	r.withDefaults(parent)
	return r.policy()
}

// StepPolicyName returns the escalation policy of a step: its own, else
// the configuration's.
func (c *Config) StepPolicyName(s *Step) string {
	if s.OnFailure != "" {
		return s.OnFailure
	}
	return c.Escalation.Policy
}

// StepTimeout returns the time limit of one attempt of a step: the step's
// own (FR-018), else its agent's, else for an execution step the Execution
// Service timeout.
func (c *Config) StepTimeout(s *Step) time.Duration {
	if s.Timeout > 0 {
		return s.Timeout.D()
	}
	switch s.Kind {
	case StepExecution:
		return c.ExecutionService.Timeout.D()
	case StepTasks:
		return DefaultTasksTimeout
	case StepState:
		if c.Backlog != nil && c.Backlog.Timeout > 0 {
			return c.Backlog.Timeout.D()
		}
	}
	if a := c.Agents[s.Agent]; a != nil {
		return a.Timeout.D()
	}
	return c.Defaults.Timeout.D()
}
