// Package artifact checks agent output artifacts against their output
// contracts before the engine accepts them (FR-019..024, FR-155/156,
// FR-171..175).
//
// A contract is derived from the agent's output template: a markdown
// template requires its sections (and the tables in them) to be present,
// filled and free of {{placeholders}}; a JSON template requires well-formed
// JSON that satisfies the step's JSON Schema. Validation reports every
// problem at once, so one retry or one look at the log can fix them all.
package artifact

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentrunner/agentrunner"
)

// Problem is one way an artifact breaks its contract. It says where, so an
// operator or the agent on its next attempt can fix exactly that spot.
type Problem struct {
	// Line is the 1-based line in the artifact, or in the template when
	// InTemplate is set (a missing section); 0 if none.
	Line int
	// Column is the 1-based column (in characters) on Line, 0 if none; set
	// for JSON syntax errors.
	Column int
	// InTemplate reports that Line is a line of the template, not of the
	// artifact: the problem is something the artifact lacks.
	InTemplate bool
	// Pointer is the JSON pointer of the offending value, for JSON
	// artifacts ("" for markdown, and for the root of a JSON document).
	Pointer string
	Message string
}

// String renders the problem with its location first: "line 12: …",
// "/validity/valid_until (line 7): …", "… (template line 14)", or just the
// message when there is no location.
func (p Problem) String() string {
	if p.InTemplate && p.Line > 0 {
		return fmt.Sprintf("%s (template line %d)", p.Message, p.Line)
	}
	var loc string
	switch {
	case p.Pointer != "" && p.Line > 0:
		loc = fmt.Sprintf("%s (line %d)", p.Pointer, p.Line)
	case p.Pointer != "":
		loc = p.Pointer
	case p.Line > 0 && p.Column > 0:
		loc = fmt.Sprintf("line %d, column %d", p.Line, p.Column)
	case p.Line > 0:
		loc = fmt.Sprintf("line %d", p.Line)
	}
	if loc == "" {
		return p.Message
	}
	return loc + ": " + p.Message
}

// ValidationError lists every problem of one artifact, so the error that
// rejects an artifact carries all that is wrong with it, not just the first.
type ValidationError struct {
	Artifact string
	Problems []Problem
}

// Error names the artifact and lists all problems, one per line.
func (e *ValidationError) Error() string {
	var b strings.Builder
	noun := "problems"
	if len(e.Problems) == 1 {
		noun = "problem"
	}
	fmt.Fprintf(&b, "artifact %s breaks its contract (%d %s):", e.Artifact, len(e.Problems), noun)
	for _, p := range e.Problems {
		b.WriteString("\n  ")
		b.WriteString(p.String())
	}
	return b.String()
}

// Contract checks an artifact's bytes. Validate returns every problem found
// (nil when the artifact is valid), never only the first. Implementations
// are safe for concurrent use.
type Contract interface {
	Validate(data []byte) []Problem
}

// Check validates data against c and returns a *ValidationError naming the
// artifact when it breaks the contract, nil when it is valid. It is the
// one-call form the engine uses before accepting an artifact.
func Check(c Contract, artifact string, data []byte) error {
	problems := c.Validate(data)
	if len(problems) == 0 {
		return nil
	}
	return &ValidationError{Artifact: artifact, Problems: problems}
}

// Load builds the contract for an output template: a .md (or .markdown)
// template gives a *MarkdownContract; a .json template gives a
// *JSONContract from the JSON Schema at schemaPath, or, with schemaPath "",
// one that accepts any well-formed JSON. Errors are EINVALID and name the
// file and what is wrong with it.
func Load(templatePath, schemaPath string) (Contract, error) {
	template, err := os.ReadFile(templatePath)
	if err != nil {
		return nil, &agentrunner.Error{Code: agentrunner.EINVALID,
			Message: fmt.Sprintf("output template %s is unreadable", templatePath), Err: err}
	}
	switch ext := strings.ToLower(filepath.Ext(templatePath)); ext {
	case ".md", ".markdown":
		if schemaPath != "" {
			return nil, agentrunner.Errorf(agentrunner.EINVALID,
				"output template %s: a JSON Schema (%s) applies only to .json templates", templatePath, schemaPath)
		}
		c, err := NewMarkdownContract(template)
		if err != nil {
			return nil, &agentrunner.Error{Code: agentrunner.EINVALID,
				Message: fmt.Sprintf("output template %s", templatePath), Err: err}
		}
		return c, nil
	case ".json":
		if schemaPath == "" {
			return &JSONContract{}, nil
		}
		schema, err := os.ReadFile(schemaPath)
		if err != nil {
			return nil, &agentrunner.Error{Code: agentrunner.EINVALID,
				Message: fmt.Sprintf("JSON Schema %s for output template %s is unreadable", schemaPath, templatePath), Err: err}
		}
		c, err := NewJSONContract(schema, schemaPath)
		if err != nil {
			return nil, &agentrunner.Error{Code: agentrunner.EINVALID,
				Message: fmt.Sprintf("output template %s", templatePath), Err: err}
		}
		return c, nil
	default:
		return nil, agentrunner.Errorf(agentrunner.EINVALID,
			"output template %s: unsupported type %q, want .md or .json", templatePath, ext)
	}
}

// Hash returns the lowercase hex SHA-256 of data. Artifact hashes go into
// idempotency keys and the API, so equal content always yields equal keys.
func Hash(data []byte) string {
	sum := sha256.Sum256(data)
	return hex.EncodeToString(sum[:])
}

// isBlank reports whether data holds nothing but whitespace.
func isBlank(data []byte) bool { return len(bytes.TrimSpace(data)) == 0 }

// problemEmpty is the one problem of an empty artifact.
var problemEmpty = Problem{Message: "artifact is empty"}
