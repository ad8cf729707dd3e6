package config

import (
	"fmt"
	"maps"
	"math"
	"net"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
)

// namePattern is what agent, step and provider names must look like: they
// become file and directory names.
var namePattern = regexp.MustCompile(`^[a-z][a-z0-9_-]{0,62}$`)

// envNamePattern is what the name of an environment variable must look like.
var envNamePattern = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]*$`)

var deliveryKinds = []string{"forward", "backward", "broadcast", "status"}

type validator struct {
	c        *Config
	problems Problems
}

func (v *validator) add(key, format string, args ...any) {
	v.problems = append(v.problems, Problem{Where: v.c.Where(key), Key: key, Message: fmt.Sprintf(format, args...)})
}

// validate checks everything that can be checked without reading other
// files; the workspace package checks the files the configuration names.
func (c *Config) validate() Problems {
	v := &validator{c: c}
	if c.Version != 1 {
		v.add("version", "must be 1, got %d", c.Version)
	}
	if c.State.Driver != DefaultStateDriver {
		v.add("state.driver", "unknown driver %q (supported: sqlite)", c.State.Driver)
	}
	v.backup()
	for _, name := range slices.Sorted(maps.Keys(c.Providers)) {
		v.provider(name, c.Providers[name])
	}
	for _, name := range slices.Sorted(maps.Keys(c.Agents)) {
		v.agent(name, c.Agents[name])
	}
	if c.HasLoop() {
		v.pipeline()
	}
	v.graphs()
	v.backlog()
	if c.Schedule.Cron == "" && c.Schedule.Every <= 0 {
		v.add("schedule.every", "must be positive")
	}
	v.loopSchedule()
	if c.Schedule.MaxCycle <= 0 {
		v.add("schedule.max_cycle", "must be positive")
	} else if c.Schedule.MinCycle > c.Schedule.MaxCycle {
		v.add("schedule.min_cycle", "%s is longer than schedule.max_cycle %s", c.Schedule.MinCycle, c.Schedule.MaxCycle)
	}
	if c.Capsules.MaxChars < 0 || c.Capsules.MaxChars > 1<<20 {
		v.add("capsules.max_chars", "must be from 1 to %d characters (0: 12000), got %d", 1<<20, c.Capsules.MaxChars)
	}
	if c.Mailbox.MaxMessages < 1 {
		v.add("mailbox.max_messages", "must be at least 1, got %d", c.Mailbox.MaxMessages)
	}
	for _, name := range slices.Sorted(maps.Keys(c.Tools)) {
		v.tool(name, c.Tools[name])
	}
	for _, name := range slices.Sorted(maps.Keys(c.MCPServers)) {
		v.mcpServer(name, c.MCPServers[name])
	}
	v.escalation()
	if c.Watchdog.StallGrace <= 0 {
		v.add("watchdog.stall_grace", "must be positive")
	}
	if c.Scheduler.MaxConcurrentAttempts <= 0 {
		v.add("scheduler.max_concurrent_attempts", "must be positive, got %d", c.Scheduler.MaxConcurrentAttempts)
	}
	if c.Scheduler.MaxInterruptions <= 0 {
		v.add("scheduler.max_interruptions", "must be positive, got %d", c.Scheduler.MaxInterruptions)
	}
	if c.Budgets.CycleTokens < 0 {
		v.add("budgets.cycle_tokens", "must not be negative")
	}
	v.executionService()
	v.server()
	v.archive()
	if _, _, err := net.SplitHostPort(c.Server.Listen); err != nil {
		v.add("server.listen", "want host:port, got %q", c.Server.Listen)
	}
	return v.problems
}

func (v *validator) provider(name string, p *Provider) {
	key := "providers." + name
	if !namePattern.MatchString(name) {
		v.add(key, "provider names are lower-case letters, digits, _ and -")
	}
	if p == nil {
		v.add(key, "is empty")
		return
	}
	switch p.Kind {
	case ProviderMock:
		if len(p.Command) > 0 {
			v.add(key+".command", "only process providers take a command")
		}
	case ProviderProcess:
		if len(p.Command) == 0 || p.Command[0] == "" {
			v.add(key+".command", "a process provider needs a command (an argv list)")
		}
	case ProviderOpenAI, ProviderAnthropic:
		if len(p.Command) > 0 {
			v.add(key+".command", "only process providers take a command")
		}
		if p.BaseURL != "" {
			v.url(key+".base_url", p.BaseURL)
		}
		if !envNamePattern.MatchString(p.APIKeyEnv) {
			v.add(key+".api_key_env", "%q is not an environment variable name (give the name of the variable that holds the key, not the key)", p.APIKeyEnv)
		}
		if p.RequestTimeout <= 0 {
			v.add(key+".request_timeout", "must be positive")
		}
	case "":
		v.add(key+".kind", "is required (mock, process, openai or anthropic)")
	default:
		v.add(key+".kind", "unknown kind %q (supported: mock, process, openai, anthropic)", p.Kind)
	}
	if p.Kind != ProviderProcess && !p.Env.empty() {
		v.add(key+".env", "only process providers start a process that takes an environment")
	}
	v.env(key+".env", p.Env)
	v.prices(key+".prices", p.Prices)
}

// prices checks that each price given is a number of dollars, not
// negative, NaN or infinite (which the environment can spell).
func (v *validator) prices(key string, p *Prices) {
	if p == nil {
		return
	}
	for _, price := range []struct {
		key string
		v   *float64
	}{{"input_per_mtok", &p.InputPerMTok}, {"output_per_mtok", &p.OutputPerMTok}, {"cached_input_per_mtok", p.CachedInputPerMTok}} {
		if price.v != nil && !(*price.v >= 0 && !math.IsInf(*price.v, 1)) {
			v.add(key+"."+price.key, "must be a number of US dollars per million tokens, 0 or more, got %v", *price.v)
		}
	}
}

// empty reports whether e gives nothing.
func (e Env) empty() bool { return len(e.Pass) == 0 && len(e.Set) == 0 }

// secretWords are the parts of a variable name (split at "_") that say it
// holds a secret, so its value must not be written in the file.
var secretWords = []string{"KEY", "APIKEY", "TOKEN", "SECRET", "SECRETS", "PASSWORD", "PASSWD", "PASSPHRASE", "CREDENTIAL", "CREDENTIALS", "COOKIE", "AUTH"}

// looksSecret reports whether a variable set in the file looks like a
// secret: by its name, or by a URL value carrying a password.
func looksSecret(name, value string) bool {
	for _, w := range strings.Split(strings.ToUpper(name), "_") {
		if slices.Contains(secretWords, w) {
			return true
		}
	}
	u, err := url.Parse(value)
	if err != nil || u.User == nil {
		return false
	}
	_, hasPassword := u.User.Password()
	return hasPassword
}

// reservedEnv reports whether a variable is the runner's to give: the
// AGENTRUNNER_* ones it sets for each attempt (and its own configuration
// overrides and secrets named so), and PWD.
func reservedEnv(name string) bool {
	return strings.HasPrefix(strings.ToUpper(name), EnvPrefix+"_") || name == "PWD"
}

// env checks what a child process is given: names, and no secret written
// in the file.
func (v *validator) env(key string, e Env) { CheckEnv(v.add, key, e) }

// CheckEnv reports what is wrong with the env of a child process at key:
// names, the runner's own variables, and secrets written in the file.
func CheckEnv(add Reporter, key string, e Env) {
	for i, name := range e.Pass {
		k := fmt.Sprintf("%s.pass[%d]", key, i)
		switch {
		case !envNamePattern.MatchString(name):
			add(k, "%q is not an environment variable name (letters, digits and _, not starting with a digit)", name)
		case reservedEnv(name):
			add(k, "%s is the runner's own: it sets the AGENTRUNNER_* variables and PWD an agent gets", name)
		case slices.Contains(e.Pass[:i], name):
			add(k, "%s is passed twice", name)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(e.Set)) {
		k := key + ".set." + name
		switch value := e.Set[name]; {
		case !envNamePattern.MatchString(name):
			add(k, "%q is not an environment variable name (letters, digits and _, not starting with a digit)", name)
		case reservedEnv(name):
			add(k, "%s is the runner's own: it sets the AGENTRUNNER_* variables and PWD an agent gets", name)
		case slices.Contains(e.Pass, name):
			add(k, "%s is both passed and set", name)
		case looksSecret(name, value):
			add(k, "%s looks like a secret: do not write it in the file; put it in the runner's environment and pass it by name (env: {pass: [%s]})", name, name)
		case strings.IndexByte(value, 0) >= 0:
			add(k, "the value contains a NUL byte")
		}
	}
}

func (v *validator) retries(key string, r *Retries) {
	if r == nil {
		return
	}
	if r.Max != nil && *r.Max < 0 {
		v.add(key+".max", "must not be negative")
	}
	for i, d := range r.Backoff {
		if d <= 0 {
			v.add(fmt.Sprintf("%s.backoff[%d]", key, i), "must be positive")
		}
	}
}

// plainFile reports whether name is a bare file name (no directories).
func plainFile(name string) bool {
	return name != "" && name != "." && name != ".." && !strings.ContainsAny(name, `/\`) && filepath.Base(name) == name
}

func (v *validator) agent(name string, a *Agent) {
	key := "agents." + name
	if !namePattern.MatchString(name) {
		v.add(key, "agent names are lower-case letters, digits, _ and - (they name mailboxes and folders)")
	}
	if a == nil {
		v.add(key, "is empty")
		return
	}
	if a.Identity == "" {
		v.add(key+".identity", "is required: the agent's identity prompt file (FR-148)")
	}
	switch {
	case a.Provider == "":
		v.add(key+".provider", "is required (set it here or in defaults.provider)")
	case v.c.Providers[a.Provider] == nil:
		v.add(key+".provider", "unknown provider %q (defined: %s)", a.Provider, strings.Join(slices.Sorted(maps.Keys(v.c.Providers)), ", "))
	}
	if a.Timeout <= 0 {
		v.add(key+".timeout", "must be positive")
	}
	v.retries(key+".retries", a.Retries)
	if p := v.c.Providers[a.Provider]; p != nil && (p.Kind == ProviderOpenAI || p.Kind == ProviderAnthropic) {
		if a.Model == "" {
			v.add(key+".model", "is required for an agent on a %s provider (set it here or in defaults.model)", p.Kind)
		}
		// Written so that NaN, which compares false with everything, fails.
		if a.Temperature != nil && !(*a.Temperature >= 0 && *a.Temperature <= 2) {
			v.add(key+".temperature", "must be between 0 and 2, got %v", *a.Temperature)
		}
		if a.MaxTokens < 1 {
			v.add(key+".max_tokens", "must be at least 1")
		}
		if a.MaxTurns < 1 {
			v.add(key+".max_turns", "must be at least 1")
		}
		if a.RepairTurns != nil && *a.RepairTurns < 0 {
			v.add(key+".repair_turns", "must not be negative")
		}
		if a.ToolBudget < 0 {
			v.add(key+".tool_budget", "must not be negative (0: no budget), got %d", a.ToolBudget)
		}
	}
	if a.TokenBudget < 0 {
		v.add(key+".token_budget", "must not be negative")
	}
	if p := v.c.Providers[a.Provider]; p != nil && p.Kind != ProviderProcess && !a.Env.empty() {
		v.add(key+".env", "only agents on a process provider run as a process that takes an environment")
	}
	v.env(key+".env", a.Env)
	seen := map[string]bool{}
	for i, t := range a.Tools {
		tk := fmt.Sprintf("%s.tools[%d]", key, i)
		switch {
		case t == "" || seen[t]:
			v.add(tk, "empty or repeated tool %q", t)
		case v.c.Tools[t] == nil && v.mcpTool(t) == "":
			v.add(tk, "tool %q is not declared under tools (nor imported from an MCP server by its prefix)", t)
		}
		seen[t] = true
	}
	out := a.Output
	switch {
	case !plainFile(out.File):
		v.add(key+".output.file", "must be a file name without directories, got %q", out.File)
	case out.Template == "":
		v.add(key+".output.template", "is required: the output template (FR-153)")
	case filepath.Ext(out.Template) != filepath.Ext(out.File):
		v.add(key+".output.template", "template %q and artifact %q must have the same extension", out.Template, out.File)
	case filepath.Ext(out.File) != ".md" && filepath.Ext(out.File) != ".json":
		v.add(key+".output.file", "artifacts are markdown (.md) or JSON (.json), got %q", out.File)
	case out.Schema != "" && filepath.Ext(out.File) != ".json":
		v.add(key+".output.schema", "a schema only applies to a JSON artifact")
	}
	if out.MaxBytes < 1 {
		v.add(key+".output.max_bytes", "must be at least 1, got %d", out.MaxBytes)
	}
	for i, in := range a.Inputs {
		ik := fmt.Sprintf("%s.inputs[%d]", key, i)
		switch {
		case in.Document && (in.Artifact != "" || in.Memory != "" || in.History != nil):
			v.add(ik, "set exactly one of artifact, memory or document")
		case in.Document:
		case (in.Artifact == "") == (in.Memory == ""):
			v.add(ik, "set exactly one of artifact, memory or document")
		case in.Memory != "":
			if m := v.c.Agents[in.Memory]; m == nil || !m.Memory {
				v.add(ik+".memory", "%q is not an agent with memory: true", in.Memory)
			}
			if in.History != nil {
				v.add(ik+".history", "applies to artifacts, not memory")
			}
		case !plainFile(in.Artifact):
			v.add(ik+".artifact", "must be a file name, got %q", in.Artifact)
		case in.History != nil && in.History.Last < 0:
			v.add(ik+".history.last", "must not be negative")
		case in.History != nil && in.History.Last == 0 && in.History.Within == 0:
			v.add(ik+".history", "set last, within or both")
		}
	}
}

// toolNamePattern is what providers accept as a function name.
var toolNamePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// BuiltinTools are the tools every model agent gets for its own files; they
// cannot be declared.
var BuiltinTools = []string{"filesystem_read", "filesystem_tree"}

func (v *validator) tool(name string, t *Tool) {
	key := "tools." + name
	if t == nil {
		v.add(key, "is empty")
		return
	}
	if !toolNamePattern.MatchString(name) {
		v.add(key, "tool names are letters, digits, _ and -, at most 64 (as model providers require)")
	}
	if slices.Contains(BuiltinTools, name) {
		v.add(key, "%q is a built-in tool of every model agent and cannot be declared", name)
	}
	if t.Timeout <= 0 {
		v.add(key+".timeout", "must be positive")
	}
	v.retries(key+".retries", t.Retries)
	if t.Breaker.Failures < 0 {
		v.add(key+".breaker.failures", "must not be negative (0 disables the breaker)")
	}
	if t.Breaker.Failures > 0 && t.Breaker.OpenFor <= 0 {
		v.add(key+".breaker.open_for", "must be positive")
	}
	if len(t.Parameters) > 0 && (t.Parameters[0] != '{') {
		v.add(key+".parameters", "must be a JSON Schema object")
	}
	v.problems = append(v.problems, v.c.toolProblems[name]...)
	if t.Settings != nil {
		report := func(sub, format string, args ...any) {
			v.add(strings.TrimSuffix(JoinKey(key, sub), "."), format, args...)
		}
		t.Settings.Check(report)
		if in, ok := t.Settings.(ToolSettingsInConfig); ok {
			in.CheckIn(v.c, report)
		}
	}
}

func (v *validator) mcpServer(name string, m *MCPServer) {
	key := "mcp_servers." + name
	if m == nil {
		v.add(key, "is empty")
		return
	}
	switch {
	case (len(m.Command) == 0) == (m.URL == ""):
		v.add(key, "set exactly one of command (a stdio server) or url (a streamable-HTTP server)")
	case m.URL != "":
		v.url(key+".url", m.URL)
	}
	if m.URL != "" && !m.Env.empty() {
		v.add(key+".env", "only a command (stdio) server is a process that takes an environment")
	}
	v.env(key+".env", m.Env)
	if m.BearerEnv != "" && !envNamePattern.MatchString(m.BearerEnv) {
		v.add(key+".bearer_env", "%q is not an environment variable name", m.BearerEnv)
	}
	if !toolNamePattern.MatchString(m.Prefix + "x") {
		v.add(key+".prefix", "must be letters, digits, _ and -, got %q", m.Prefix)
	}
	if m.Timeout <= 0 {
		v.add(key+".timeout", "must be positive")
	}
}

// MinBackupEvery is the shortest time between two scheduled backups: each
// reads the whole database, and backups are named to the second.
const MinBackupEvery = time.Minute

// backup checks serve's schedule of backups.
func (v *validator) backup() {
	b := v.c.State.Backup
	if b.Every != 0 && b.Every.D() < MinBackupEvery {
		v.add("state.backup.every", "must be at least %s, or 0 for no scheduled backups, got %s", MinBackupEvery, b.Every)
	}
	if b.Keep < 1 {
		v.add("state.backup.keep", "must be at least 1, got %d", b.Keep)
	}
	if b.Dir == "" {
		v.add("state.backup.dir", "must not be empty")
	}
}

// archive checks the archive's settings.
func (v *validator) archive() {
	a := v.c.Archive
	if a.Keep < 0 {
		v.add("archive.keep", "must not be negative (0 archives nothing), got %d", a.Keep)
	}
	if a.Every.D() < MinArchiveEvery {
		v.add("archive.every", "must be at least %s, got %s", MinArchiveEvery, a.Every)
	}
	if a.Retention.Count < 0 {
		v.add("archive.retention.count", "must not be negative (0 keeps every archive), got %d", a.Retention.Count)
	}
}

var policies = []string{PolicyHalt, PolicySkip, PolicyFail}

// server checks the API's settings, its credentials, retention and health.
func (v *validator) server() {
	s := v.c.Server
	names := map[string]bool{}
	for i, k := range s.Auth.APIKeys {
		key := fmt.Sprintf("server.auth.api_keys[%d]", i)
		switch {
		case k.Name == "":
			v.add(key+".name", "is required: it names the caller in the audit log")
		case names[k.Name]:
			v.add(key+".name", "%q is used by another key", k.Name)
		}
		names[k.Name] = true
		if !envNamePattern.MatchString(k.KeyEnv) {
			v.add(key+".key_env", "want the name of the environment variable holding the key, got %q", k.KeyEnv)
		}
		if !slices.Contains(Roles, k.Role) {
			v.add(key+".role", "unknown role %q (supported: viewer, operator, admin)", k.Role)
		}
	}
	if j := s.Auth.JWT; j != nil {
		switch j.Algorithm {
		case "HS256":
			if !envNamePattern.MatchString(j.SecretEnv) {
				v.add("server.auth.jwt.secret_env", "HS256 needs the name of the environment variable holding the secret, got %q", j.SecretEnv)
			}
			if j.PublicKeyFile != "" {
				v.add("server.auth.jwt.public_key_file", "is for RS256; HS256 uses secret_env")
			}
		case "RS256":
			if j.PublicKeyFile == "" {
				v.add("server.auth.jwt.public_key_file", "RS256 needs the PEM file of the public key")
			}
			if j.SecretEnv != "" {
				v.add("server.auth.jwt.secret_env", "is for HS256; RS256 uses public_key_file")
			}
		default:
			v.add("server.auth.jwt.algorithm", "unknown algorithm %q (supported: HS256, RS256)", j.Algorithm)
		}
	}
	for i, p := range s.Auth.TrustedProxies {
		if _, err := ParseProxy(p); err != nil {
			v.add(fmt.Sprintf("server.auth.trusted_proxies[%d]", i), "%v", err)
		}
	}
	for i, p := range s.Public {
		if p != PublicHealth && p != PublicMetrics {
			v.add(fmt.Sprintf("server.public[%d]", i), "unknown endpoint group %q (supported: health, metrics)", p)
		}
	}
	if s.MaxBodyBytes < 1024 {
		v.add("server.max_body_bytes", "must be at least 1024, got %d", s.MaxBodyBytes)
	}
	v.connections(s)
	if v.c.Events.Retention < 0 {
		v.add("events.retention", "must not be negative (0 keeps events forever)")
	}
	if v.c.Health.MinFreeDiskMiB < 0 {
		v.add("health.min_free_disk_mib", "must not be negative")
	}
	if v.c.Health.MaxEngineLag <= 0 {
		v.add("health.max_engine_lag", "must be positive")
	}
}

// Bounds of the server's connection settings: below them no real client
// gets through, above them the setting protects nothing.
const (
	minHeaderBytes = 4 << 10
	maxHeaderBytes = 1 << 20
	minConnections = 8
)

// connections checks the server's timeouts and connection limits.
func (v *validator) connections(s Server) {
	for _, t := range []struct {
		key string
		d   Duration
	}{
		{"server.read_header_timeout", s.ReadHeaderTimeout},
		{"server.read_timeout", s.ReadTimeout},
		{"server.write_timeout", s.WriteTimeout},
		{"server.idle_timeout", s.IdleTimeout},
	} {
		if t.d <= 0 {
			v.add(t.key, "must be positive, got %s", t.d)
		}
	}
	if s.ReadHeaderTimeout > 0 && s.ReadTimeout > 0 && s.ReadHeaderTimeout > s.ReadTimeout {
		v.add("server.read_header_timeout", "%s is longer than server.read_timeout %s, which bounds the headers too", s.ReadHeaderTimeout, s.ReadTimeout)
	}
	if s.MaxHeaderBytes < minHeaderBytes || s.MaxHeaderBytes > maxHeaderBytes {
		v.add("server.max_header_bytes", "must be from %d to %d, got %d", minHeaderBytes, maxHeaderBytes, s.MaxHeaderBytes)
	}
	if s.MaxConnections < minConnections {
		v.add("server.max_connections", "must be at least %d, got %d", minConnections, s.MaxConnections)
	}
}

func (v *validator) escalation() {
	e := v.c.Escalation
	if !slices.Contains(policies, e.Policy) {
		v.add("escalation.policy", "unknown policy %q (supported: halt, skip, fail)", e.Policy)
	}
	w := e.Webhook
	if w.URL != "" {
		v.url("escalation.webhook.url", w.URL)
		if w.SecretEnv == "" {
			v.add("escalation.webhook.secret_env", "is required with a webhook url: bodies are signed (give the name of the variable holding the secret)")
		}
	}
	if w.SecretEnv != "" && !envNamePattern.MatchString(w.SecretEnv) {
		v.add("escalation.webhook.secret_env", "%q is not an environment variable name", w.SecretEnv)
	}
	if w.Timeout <= 0 {
		v.add("escalation.webhook.timeout", "must be positive")
	}
}

// mcpTool returns the MCP server whose prefix a tool name has, if any.
func (v *validator) mcpTool(tool string) string {
	for _, name := range slices.Sorted(maps.Keys(v.c.MCPServers)) {
		if m := v.c.MCPServers[name]; m != nil && m.Prefix != "" && strings.HasPrefix(tool, m.Prefix) {
			return name
		}
	}
	return ""
}

// url checks an http(s) URL.
func (v *validator) url(key, raw string) { CheckURL(v.add, key, raw) }

// CheckURL reports at key a raw URL that is not http(s) with a host.
func CheckURL(add Reporter, key, raw string) {
	if u, err := url.Parse(raw); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		add(key, "want an http or https URL, got %q", raw)
	}
}

func (v *validator) pipeline() {
	c := v.c
	p := c.Pipeline
	if len(p.Steps) == 0 {
		v.add("pipeline.steps", "the pipeline needs at least one step")
		return
	}
	if p.Start == "" {
		v.add("pipeline.start", "is required: the first step of a cycle")
	}
	v.viewMode("pipeline", &p)
	for _, k := range graphPipelineKeys {
		if c.given("pipeline." + k) {
			v.add("pipeline."+k, "applies to pipelines under pipelines: only; the learning loop's cycles have timestamp ids, run one at a time and follow schedule:")
		}
	}
	for _, id := range slices.Sorted(maps.Keys(p.Steps)) {
		s := p.Steps[id]
		key := "pipeline.steps." + id
		if !namePattern.MatchString(id) {
			v.add(key, "step names are lower-case letters, digits, _ and - (they name folders)")
		}
		if s == nil {
			v.add(key, "is empty")
			continue
		}
		if s.Next == "" && len(s.Then) == 0 {
			v.add(key+".next", `is required: a step name or "end" (or then: [STEP, STEP] for parallel branches)`)
		}
		v.retries(key+".retries", s.Retries)
		if s.OnFailure != "" && !slices.Contains(policies, s.OnFailure) {
			v.add(key+".on_failure", "unknown policy %q (supported: halt, skip, fail)", s.OnFailure)
		}
		v.loopOnly(key)
		switch s.Kind {
		case StepAgent:
			v.agentStep(key, s)
		case StepGate:
			v.add(key+".kind", "gate steps run in graphs, and pipeline: is the learning loop, a chain: move the pipeline under pipelines: (pipelines: {NAME: {start, steps}}) to use gates")
		case StepCapsule:
			v.add(key+".kind", "capsule steps run in graphs, and pipeline: is the learning loop, a chain: move the pipeline under pipelines: (pipelines: {NAME: {start, steps}}) to use them")
		case StepExecution:
			v.executionStep(key, s)
		default:
			v.add(key+".kind", "unknown step kind %q (supported: agent, execution)", s.Kind)
		}
		v.deliveries(key, s)
	}
	if len(v.problems) > 0 || p.Start == "" {
		return // the graph check below would only repeat what is already said
	}
	if again := c.chainLoop(); again != "" {
		v.add("pipeline", "step %q is reached twice in one cycle: a loop within a cycle needs a cap, which the learning loop's chain does not have (graphs under pipelines: do: max_visits)", again)
		return
	}
	before := len(v.problems)
	v.checkGraph("pipeline", c.Loop())
	if p.Final != "" && p.Steps[p.Final] == nil {
		v.add("pipeline.final", "final step %q is not a step", p.Final)
	}
	if len(v.problems) == before {
		v.loopJoins(c.LoopSteps())
	}
	if len(v.problems) == before {
		v.dataflow(c.LoopSteps())
	}
}

// executionStep checks an execution step: the JSON artifact it hands to
// the Execution Service, and where its validity window is read.
func (v *validator) executionStep(key string, s *Step) {
	if s.Agent != "" {
		v.add(key+".agent", "an execution step runs no agent")
	}
	if s.Artifact == "" {
		v.add(key+".artifact", "is required: the artifact handed to the Execution Service")
	} else if filepath.Ext(s.Artifact) != ".json" {
		v.add(key+".artifact", "must be a JSON artifact, got %q", s.Artifact)
	}
	for _, ptr := range []struct{ k, v string }{{"from", s.Validity.From}, {"until", s.Validity.Until}} {
		if ptr.v != "" && !strings.HasPrefix(ptr.v, "/") {
			v.add(key+".validity."+ptr.k, "must be a JSON pointer such as /validity/valid_until, got %q", ptr.v)
		}
	}
}

// agentStep checks an agent step's agent.
func (v *validator) agentStep(key string, s *Step) {
	if s.Agent == "" {
		v.add(key+".agent", "is required for an agent step")
	} else if v.c.Agents[s.Agent] == nil {
		v.add(key+".agent", "unknown agent %q", s.Agent)
	}
	if s.Artifact != "" || s.Validity != (Validity{}) {
		v.add(key, "artifact and validity apply to execution steps only")
	}
}

// deliveries checks the messages a step deposits when it succeeds.
func (v *validator) deliveries(key string, s *Step) {
	for i, d := range s.Deliver {
		dk := fmt.Sprintf("%s.deliver[%d]", key, i)
		if !slices.Contains(deliveryKinds, d.Kind) {
			v.add(dk+".kind", "unknown kind %q (supported: %s)", d.Kind, strings.Join(deliveryKinds, ", "))
		}
		if len(d.To) == 0 {
			v.add(dk+".to", "names no agent")
		}
		for _, to := range d.To {
			if v.c.Agents[to] == nil {
				v.add(dk+".to", "unknown agent %q", to)
			}
		}
		if d.Section != "" && d.Field != "" {
			v.add(dk, "set section (markdown) or field (JSON), not both")
		}
		if d.Field != "" && !strings.HasPrefix(d.Field, "/") {
			v.add(dk+".field", "must be a JSON pointer, got %q", d.Field)
		}
		if out := v.stepOutput(s); out != "" {
			if d.Section != "" && filepath.Ext(out) != ".md" {
				v.add(dk+".section", "quotes a markdown section, but the step produces %s", out)
			}
			if d.Field != "" && filepath.Ext(out) != ".json" {
				v.add(dk+".field", "quotes a JSON field, but the step produces %s", out)
			}
		}
	}
}

// stepOutput is the artifact a step produces, if any.
func (v *validator) stepOutput(s *Step) string {
	if a := v.c.Agents[s.Agent]; s.Kind == StepAgent && a != nil {
		return a.Output.File
	}
	return ""
}

// dataflow checks that every artifact is produced once, and before the
// steps that read it from the current cycle: by a step that leads to
// them, not by one on a parallel branch, which may not have written it yet.
func (v *validator) dataflow(order []string) {
	c := v.c
	flow := loopFlow{producer: map[string]string{}, before: c.loopBefore(order)}
	for _, id := range order {
		if out := v.producesFile(id); out != "" && flow.producer[out] == "" {
			flow.producer[out] = id
		}
	}
	for _, id := range order {
		s := c.Pipeline.Steps[id]
		key := "pipeline.steps." + id
		if s.Kind == StepExecution {
			v.readsEarlier(key+".artifact", s.Artifact, id, flow, "%q is not produced by an earlier step", s.Artifact)
			continue
		}
		a := c.Agents[s.Agent]
		for i, in := range a.Inputs {
			if in.Artifact == "" || in.History != nil {
				continue
			}
			v.readsEarlier(fmt.Sprintf("agents.%s.inputs[%d].artifact", a.Name, i), in.Artifact, id, flow, "%q is not produced by a step before %q", in.Artifact, id)
		}
		if prev := flow.producer[a.Output.File]; prev != id {
			v.add(key, "produces %q, which step %q already produces", a.Output.File, prev)
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Agents)) {
		for i, in := range c.Agents[name].Inputs {
			if in.History != nil && flow.producer[in.Artifact] == "" && !c.graphProduces(in.Artifact) {
				v.add(fmt.Sprintf("agents.%s.inputs[%d].artifact", name, i), "no step produces %q", in.Artifact)
			}
		}
	}
}

// loopFlow is what the dataflow check knows of the learning loop: the
// first step (in LoopSteps order) that produces each artifact, and the
// steps ended before each step starts.
type loopFlow struct {
	producer map[string]string
	before   map[string]map[string]bool
}

// readsEarlier reports at key that step reads file from the cycle while
// no step that ends before it produces it; otherwise says why.
func (v *validator) readsEarlier(key, file, step string, flow loopFlow, otherwise string, args ...any) {
	p := flow.producer[file]
	switch {
	case p != "" && flow.before[step][p]:
	case p != "" && p != step && !flow.before[p][step]:
		v.add(key, "%q is produced by step %s, which runs in parallel with %s: it may not be written yet when %s starts; read the last cycle's (history: {last: 1}) or join both branches before %s",
			file, p, step, step, step)
	default:
		v.add(key, otherwise, args...)
	}
}

// producesFile is the artifact a step of the learning loop publishes into
// the cycle, "" for an execution step.
func (v *validator) producesFile(id string) string {
	s := v.c.Pipeline.Steps[id]
	if s.Kind == StepExecution {
		return ""
	}
	return v.c.Agents[s.Agent].Output.File
}

// ExecutionStep is the configuration key of the first execution step of
// the workspace's pipelines, "" if none has one.
func (c *Config) ExecutionStep() string {
	for _, id := range slices.Sorted(maps.Keys(c.Pipeline.Steps)) {
		if s := c.Pipeline.Steps[id]; s != nil && s.Kind == StepExecution {
			return "pipeline.steps." + id
		}
	}
	for _, name := range slices.Sorted(maps.Keys(c.Pipelines)) {
		p := c.Pipelines[name]
		if p == nil {
			continue
		}
		for _, id := range slices.Sorted(maps.Keys(p.Steps)) {
			if s := p.Steps[id]; s != nil && s.Kind == StepExecution {
				return "pipelines." + name + ".steps." + id
			}
		}
	}
	return ""
}

func (v *validator) executionService() {
	es := v.c.ExecutionService
	if es.URL == "" {
		if key := v.c.ExecutionStep(); key != "" {
			v.add(key, "an execution step hands its artifact to the Execution Service: set execution_service.url")
		}
	} else if u, err := url.Parse(es.URL); err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		v.add("execution_service.url", "want an http or https URL, got %q", es.URL)
	}
	if es.TokenEnv != "" && !envNamePattern.MatchString(es.TokenEnv) {
		v.add("execution_service.token_env", "%q is not an environment variable name (give the name of the variable that holds the token, not the token)", es.TokenEnv)
	}
	if es.PollInterval <= 0 || es.RequestTimeout <= 0 || es.Timeout <= 0 {
		v.add("execution_service", "timeout, poll_interval and request_timeout must be positive")
	}
	if es.HeartbeatInterval < 0 {
		v.add("execution_service.heartbeat_interval", "must not be negative (0 sends no heartbeat)")
	}
	if es.CallbackSecretEnv != "" && !envNamePattern.MatchString(es.CallbackSecretEnv) {
		v.add("execution_service.callback_secret_env", "%q is not an environment variable name", es.CallbackSecretEnv)
	}
}

// chainLoop returns the first step of the learning loop that leads back
// to itself from its start, along next and its parallel branches (then),
// "" if none. Two branches that meet at a join are no loop.
func (c *Config) chainLoop() string {
	state := map[string]int{} // 1: on the path walked, 2: done
	var visit func(id string) string
	visit = func(id string) string {
		switch state[id] {
		case 1:
			return id
		case 2:
			return ""
		}
		state[id] = 1
		for _, to := range c.loopNext(id) {
			if again := visit(to); again != "" {
				return again
			}
		}
		state[id] = 2
		return ""
	}
	if c.Pipeline.Steps[c.Pipeline.Start] == nil {
		return ""
	}
	return visit(c.Pipeline.Start)
}

// loopNext returns the steps a step of the learning loop leads to: its
// next, or its parallel branches (then); end and unknown steps are left
// out.
func (c *Config) loopNext(id string) []string {
	s := c.Pipeline.Steps[id]
	if s == nil {
		return nil
	}
	next := s.Then
	if len(next) == 0 {
		next = []string{s.Next}
	}
	var out []string
	for _, to := range next {
		if to != EndStep && c.Pipeline.Steps[to] != nil {
			out = append(out, to)
		}
	}
	return out
}

// loopReach returns the steps of the learning loop reached from its
// start, in the order a breadth-first walk finds them.
func (c *Config) loopReach() []string {
	var out []string
	seen := map[string]bool{}
	for queue := []string{c.Pipeline.Start}; len(queue) > 0; queue = queue[1:] {
		id := queue[0]
		if seen[id] || c.Pipeline.Steps[id] == nil {
			continue
		}
		seen[id] = true
		out = append(out, id)
		queue = append(queue, c.loopNext(id)...)
	}
	return out
}

// LoopSteps returns the steps of the learning loop's pipeline in an order
// a cycle may run them: from its start, each step after every step that
// leads to it (a topological order; a join comes after all its branches,
// the branches of a fan-out in the order then names them); nil without a
// loop. The graph was checked by Load: a Config built by hand that loops
// is walked once around.
func (c *Config) LoopSteps() []string {
	reach := c.loopReach()
	waits := map[string]int{} // step → edges into it not walked yet
	for _, id := range reach {
		for _, to := range c.loopNext(id) {
			waits[to]++
		}
	}
	var order []string
	done := map[string]bool{}
	for len(order) < len(reach) {
		queue := []string{firstUndone(reach, done)} // the start, or where a loop stalled the walk
		for ; len(queue) > 0; queue = queue[1:] {
			id := queue[0]
			if done[id] {
				continue
			}
			done[id] = true
			order = append(order, id)
			for _, to := range c.loopNext(id) {
				if waits[to]--; waits[to] == 0 {
					queue = append(queue, to)
				}
			}
		}
	}
	return order
}

// LoopStages returns the steps of LoopSteps in stages: a step starts a new
// stage when a step of the current one leads to it, else it runs in
// parallel with the current stage's steps and joins it. A chain is one
// step a stage.
func (c *Config) LoopStages() [][]string {
	order := c.LoopSteps()
	before := c.loopBefore(order)
	var stages [][]string
	for _, id := range order {
		last := len(stages) - 1
		if last >= 0 && !slices.ContainsFunc(stages[last], func(s string) bool { return before[id][s] }) {
			stages[last] = append(stages[last], id)
			continue
		}
		stages = append(stages, []string{id})
	}
	return stages
}

// firstUndone is the first step of ids not done.
func firstUndone(ids []string, done map[string]bool) string {
	for _, id := range ids {
		if !done[id] {
			return id
		}
	}
	return ""
}

// loopBefore returns, for each step of the learning loop, the steps that
// have ended before it starts in every cycle, given the order of
// LoopSteps: those that lead to it, and theirs. A join: any waits for one
// branch only, so before it is only what is before all its branches.
func (c *Config) loopBefore(order []string) map[string]map[string]bool {
	before := map[string]map[string]bool{}
	for _, id := range order {
		for _, to := range c.loopNext(id) {
			mine := maps.Clone(before[id])
			if mine == nil {
				mine = map[string]bool{}
			}
			mine[id] = true
			prev, seen := before[to]
			switch {
			case !seen:
				before[to] = mine
			case c.Pipeline.Steps[to].Join == string(agentrunner.JoinAny):
				maps.DeleteFunc(prev, func(k string, _ bool) bool { return !mine[k] })
			default:
				maps.Copy(prev, mine)
			}
		}
	}
	return before
}

// loopJoins refuses a step of the learning loop that parallel branches
// lead to without join: it would run once for each branch, and a step
// runs once per cycle.
func (v *validator) loopJoins(order []string) {
	from := map[string][]string{}
	for _, id := range order {
		for _, to := range v.c.loopNext(id) {
			from[to] = append(from[to], id)
		}
	}
	for _, id := range order {
		if len(from[id]) > 1 && v.c.Pipeline.Steps[id].Join == "" {
			v.add("pipeline.steps."+id, "steps %s lead to it, on parallel branches: give it join: all, so that it runs once per cycle, after all of them", strings.Join(from[id], ", "))
		}
	}
}
