// Package reviewloop embeds the example workspace of spec 3's featurev3:
// a design review loop and an implement ⇄ verify loop, each capped with a
// gate for a person, and capsule steps that checkpoint the reviewed plan
// and record each round. `agentrunner init DIR --example review-loop`
// writes it out.
package reviewloop

import (
	"embed"

	"github.com/agentrunner/agentrunner/examples"
)

// Files is the workspace: agentrunner.yaml, its input schema, the agents'
// scripts and their library, prompts, output templates and the capsules'
// text templates.
//
//go:embed agentrunner.yaml inputs.schema.json README.md agents agent_prompts capsule_templates lib output_templates
var Files embed.FS

// Write writes the workspace into dir and returns the files it wrote;
// without overwrite it writes nothing if any file exists (an
// *examples.ExistsError names them).
func Write(dir string, overwrite bool) ([]string, error) {
	return examples.Write(dir, Files, overwrite, nil)
}
