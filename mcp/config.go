package mcp

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/internal/atomicfile"
)

// ConfigFile is the name of the file WriteConfig writes into an attempt's
// folder.
const ConfigFile = "mcp.json"

// clientConfig is the "mcpServers" file shape that Claude Code
// (--mcp-config), Gemini CLI (settings.json) and other MCP hosts read.
type clientConfig struct {
	MCPServers map[string]stdioServer `json:"mcpServers"`
}

// stdioServer is one server a host starts as a child process.
type stdioServer struct {
	Command string            `json:"command"`
	Args    []string          `json:"args"`
	Env     map[string]string `json:"env"`
}

// WriteConfig writes dir/mcp.json, an MCP client configuration in the
// common "mcpServers" shape understood by Claude Code, Codex CLI and Gemini
// CLI, whose one server "agentrunner" is
// `exe mcp --config CFG --agent A --cycle C --step S --attempt N`: the
// runner's tools, scoped to this attempt. It returns the file's path.
//
// The server's env holds the runner's configuration overrides (the
// AGENTRUNNER_* variables that name a configuration key, see
// config.IsOverride), so the server loads the configuration the runner
// uses even from a host that starts MCP servers with a reduced
// environment. Nothing else of the runner's environment is written: the
// agent can read this file, and an operator may have named secrets
// AGENTRUNNER_* too. The server's tools read their secrets from the
// environment the host gives it, which is the agent's own: a tool that
// needs a key works for a process agent only when the agent's env passes
// that key.
func WriteConfig(dir, exe, configPath string, call agentrunner.ToolCall) (string, error) {
	switch {
	case dir == "":
		return "", errors.New("mcp config: directory is empty")
	case !filepath.IsAbs(exe):
		return "", fmt.Errorf("mcp config: executable %q must be an absolute path (the host may run in another directory)", exe)
	case !filepath.IsAbs(configPath):
		return "", fmt.Errorf("mcp config: configuration path %q must be absolute (the host may run in another directory)", configPath)
	}
	if err := checkCaller(call); err != nil {
		return "", fmt.Errorf("mcp config: %w", err)
	}
	for _, v := range []struct{ what, s string }{
		{"executable", exe}, {"configuration path", configPath},
		{"agent", call.Agent}, {"step", call.Step}, {"cycle", call.CycleID},
	} {
		if strings.ContainsRune(v.s, 0) {
			return "", fmt.Errorf("mcp config: %s %q contains a NUL byte", v.what, v.s)
		}
	}
	if fi, err := os.Stat(dir); err != nil {
		return "", fmt.Errorf("mcp config: %w", err)
	} else if !fi.IsDir() {
		return "", fmt.Errorf("mcp config: %s is not a directory", dir)
	}

	cfg := clientConfig{MCPServers: map[string]stdioServer{
		ServerName: {
			Command: exe,
			Args: []string{
				"mcp",
				"--config", configPath,
				"--agent", call.Agent,
				"--cycle", call.CycleID,
				"--step", call.Step,
				"--attempt", strconv.Itoa(call.Attempt),
			},
			Env: overrides(os.Environ()),
		},
	}}
	data, err := json.MarshalIndent(cfg, "", "  ")
	if err != nil {
		return "", fmt.Errorf("mcp config: encode: %w", err)
	}
	path := filepath.Join(dir, ConfigFile)
	if err := atomicfile.WriteFile(path, append(data, '\n'), 0o600); err != nil {
		return "", fmt.Errorf("mcp config: %w", err)
	}
	return path, nil
}

// overrides returns the configuration overrides in environ; never nil, so
// the file always has an "env" object. A repeated name keeps its last
// value, as in exec.
func overrides(environ []string) map[string]string {
	env := map[string]string{}
	for _, kv := range environ {
		k, v, ok := strings.Cut(kv, "=")
		if ok && config.IsOverride(k) {
			env[k] = v
		}
	}
	return env
}
