// Package researchlead embeds the example workspace of spec 4's lead
// agent: a ReAct lead that plans with a to-do list, runs sub-agents in
// parallel as durable child runs, reads their reports and writes the
// answer. `agentrunner init DIR --example research-lead` writes it out.
package researchlead

import (
	"cmp"
	"embed"
	"fmt"

	"github.com/agentrunner/agentrunner/examples"
)

// Files is the workspace: agentrunner.yaml, the lead's input schema, the
// two roles' prompts, the output templates and tools.md.
//
//go:embed agentrunner.yaml inputs.schema.json README.md tools.md agent_prompts output_templates
var Files embed.FS

// Providers maps the provider kinds `init --provider` offers to the
// example's provider of that kind.
var Providers = map[string]string{"openai": "openai", "anthropic": "anthropic"}

// DefaultProvider is the kind the example is written with when none is
// chosen.
const DefaultProvider = "openai"

// defaultProvider is the line of agentrunner.yaml that names the agents'
// provider.
const defaultProvider = "  provider: openai "

// Write writes the workspace into dir and returns the files it wrote,
// with both roles on the provider of the given kind ("" is
// DefaultProvider). Without overwrite it writes nothing if any file
// exists (an *examples.ExistsError names them).
func Write(dir string, overwrite bool, kind string) ([]string, error) {
	provider, ok := Providers[cmp.Or(kind, DefaultProvider)]
	if !ok {
		return nil, fmt.Errorf("unknown provider %q (choose openai or anthropic)", kind)
	}
	return examples.Write(dir, Files, overwrite, func(path string, data []byte) ([]byte, error) {
		if path != "agentrunner.yaml" {
			return data, nil
		}
		return examples.SetProvider(data, defaultProvider, provider)
	})
}
