// Package crypton embeds the example workspace of the Crypton learning loop,
// which `agentrunner init` and `agentrunner demo` write out.
package crypton

import "embed"

// Files is the workspace: agentrunner.yaml, tools.md, agent_prompts/ and
// output_templates/.
//
//go:embed agentrunner.yaml tools.md agent_prompts output_templates
var Files embed.FS
