// Package devpipeline embeds the example workspace of spec 5's agent
// pipeline: backlog items are refined and split into tasks, and each task
// is planned and implemented in its own git worktree, by agents configured
// in YAML (agents/defaults and agents/variants). `agentrunner init DIR
// --example dev-pipeline` writes it out.
package devpipeline

import (
	"embed"
	"fmt"

	"github.com/agentrunner/agentrunner/examples"
)

// Files is the workspace: agentrunner.yaml, the README, the agents' YAML
// files and the scripts that stand in for them offline.
//
//go:embed agentrunner.yaml README.md agents
var Files embed.FS

// Providers maps the provider kinds `init --provider` offers to the
// example's provider of that kind: process is the shell scripts.
var Providers = map[string]string{"process": "scripts", "openai": "openai", "anthropic": "anthropic", "claude-code": "claude-code"}

// backlogProvider is the line of agentrunner.yaml, in its backlog section,
// that names the agents' provider.
const backlogProvider = "  provider: scripts "

// Write writes the workspace into dir and returns the files it wrote,
// with every agent on the provider of the given kind ("" keeps the
// scripts). Without overwrite it writes nothing if any file exists (an
// *examples.ExistsError names them).
func Write(dir string, overwrite bool, kind string) ([]string, error) {
	provider := "scripts"
	if kind != "" {
		var ok bool
		if provider, ok = Providers[kind]; !ok {
			return nil, fmt.Errorf("unknown provider %q (choose process, claude-code, openai or anthropic)", kind)
		}
	}
	return examples.Write(dir, Files, overwrite, func(path string, data []byte) ([]byte, error) {
		if path != "agentrunner.yaml" {
			return data, nil
		}
		return examples.SetProvider(data, backlogProvider, provider)
	})
}
