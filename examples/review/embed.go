// Package review embeds the example workspace of a review loop: a writer,
// a reviewer and a fixer, whose loop's cap opens a gate for a person.
// `agentrunner init DIR --example review` writes it out.
package review

import (
	"embed"

	"github.com/agentrunner/agentrunner/examples"
)

// Files is the workspace: agentrunner.yaml, its input schema, the agents'
// scripts, prompts and output templates.
//
//go:embed agentrunner.yaml review.schema.json agents agent_prompts output_templates
var Files embed.FS

// Write writes the workspace into dir and returns the files it wrote;
// without overwrite it writes nothing if any file exists (an
// *examples.ExistsError names them).
func Write(dir string, overwrite bool) ([]string, error) {
	return examples.Write(dir, Files, overwrite, nil)
}
