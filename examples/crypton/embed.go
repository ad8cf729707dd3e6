// Package crypton embeds the example workspace of the Crypton learning loop,
// which `agentrunner init` and `agentrunner demo` write out.
package crypton

import (
	"embed"
	"fmt"
	"github.com/agentrunner/agentrunner/examples"
)

// Files is the workspace: agentrunner.yaml, tools.md, agent_prompts/ and
// output_templates/.
//
//go:embed agentrunner.yaml tools.md agent_prompts output_templates
var Files embed.FS

// ExistsError lists the files Write would have overwritten.
type ExistsError = examples.ExistsError

// Providers maps the provider kinds `init --provider` offers to the
// example's provider of that kind.
var Providers = map[string]string{"mock": "mock", "openai": "openai", "anthropic": "anthropic", "process": "claude-code"}

// defaultProvider is the line of agentrunner.yaml that sets every agent's
// provider.
const defaultProvider = "  provider: mock "

// Option changes the workspace Write writes.
type Option func(*options)

type options struct{ parallel bool }

// Parallel writes the loop with Research and Analyze on parallel branches
// after Plan, joined by Synthesize (FR-168/169), and its agents' inputs and
// prompts to match: the analysis reads the last cycle's research.
func Parallel(o *options) { o.parallel = true }

// Write writes the workspace into dir and returns the files it wrote, with
// every agent on the provider of the given kind ("" keeps mock), in the
// shape the options give (by default, the chain). Without overwrite it
// writes nothing if any file exists, and returns an *ExistsError naming
// them.
func Write(dir string, overwrite bool, kind string, opts ...Option) ([]string, error) {
	var o options
	for _, opt := range opts {
		opt(&o)
	}
	provider := "mock"
	if kind != "" {
		var ok bool
		if provider, ok = Providers[kind]; !ok {
			return nil, fmt.Errorf("unknown provider %q (choose mock, openai, anthropic or process)", kind)
		}
	}
	return examples.Write(dir, Files, overwrite, func(path string, data []byte) ([]byte, error) {
		if o.parallel && parallelEdits[path] != nil {
			var err error
			if data, err = applyEdits(path, data, parallelEdits[path]); err != nil {
				return nil, err
			}
		}
		if path != "agentrunner.yaml" {
			return data, nil
		}
		return examples.SetProvider(data, defaultProvider, provider)
	})
}
