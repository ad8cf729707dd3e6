// Package signalflow embeds the example workspace of spec 2's
// signal-routed flow: six roles whose SIGNAL BLOCKs name the next, one
// cycle document that the runner keeps and archives, and an iteration
// cap. `agentrunner init DIR --example signal-flow` writes it out.
package signalflow

import (
	"embed"
	"fmt"

	"github.com/agentrunner/agentrunner/examples"
)

// Files is the workspace: agentrunner.yaml, its input schema, the agents'
// scripts and their libraries, the prompts of model agents, the output
// template and the docs/ tree of spec 2's layout.
//
//go:embed agentrunner.yaml inputs.schema.json README.md agents agent_prompts docs lib output_templates
var Files embed.FS

// Providers maps the provider kinds `init --provider` offers to the
// example's provider of that kind: process is the shell scripts.
var Providers = map[string]string{"process": "scripts", "openai": "openai", "anthropic": "anthropic"}

// defaultProvider is the line of agentrunner.yaml that names the agents'
// provider.
const defaultProvider = "  provider: scripts "

// Write writes the workspace into dir and returns the files it wrote,
// with every agent on the provider of the given kind ("" keeps the
// scripts). Without overwrite it writes nothing if any file exists (an
// *examples.ExistsError names them).
func Write(dir string, overwrite bool, kind string) ([]string, error) {
	provider := "scripts"
	if kind != "" {
		var ok bool
		if provider, ok = Providers[kind]; !ok {
			return nil, fmt.Errorf("unknown provider %q (choose process, openai or anthropic)", kind)
		}
	}
	return examples.Write(dir, Files, overwrite, func(path string, data []byte) ([]byte, error) {
		if path != "agentrunner.yaml" {
			return data, nil
		}
		return examples.SetProvider(data, defaultProvider, provider)
	})
}
