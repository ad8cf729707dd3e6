// Package mock is the deterministic agent runtime for the demo and tests
// (FR-093/094): it returns, for any agent, an output that satisfies the
// agent's own output template, so it works for every pipeline without
// canned files. It works in memory, as a model agent's conversation does:
// it reads no prompt file and writes no output file. Faults can be
// injected to exercise recovery.
package mock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
)

// Fault is a failure the mock acts out instead of doing its work.
type Fault string

// The faults a mock agent can act out.
const (
	// NoFault: return a valid output.
	NoFault Fault = ""
	// Crash: fail as a crashed process would, returning nothing.
	Crash Fault = "crash"
	// Hang: do nothing until the attempt's context ends (a timeout).
	Hang Fault = "hang"
	// Invalid: return an output that breaks the template.
	Invalid Fault = "invalid"
	// Silent: succeed without returning any output.
	Silent Fault = "silent"
)

// Options configure a mock runtime.
type Options struct {
	// Now is the time written into outputs; default time.Now.
	Now func() time.Time
	// Fault decides which fault, if any, an invocation acts out.
	Fault func(inv *agentrunner.Invocation) Fault
}

// Runtime is the mock agent runtime.
type Runtime struct {
	opts Options
}

var _ agentrunner.OutputReturner = (*Runtime)(nil)

// ReturnsOutput marks the mock as working in memory.
func (r *Runtime) ReturnsOutput() {}

// New returns a mock runtime.
func New(opts Options) *Runtime {
	if opts.Now == nil {
		opts.Now = time.Now
	}
	return &Runtime{opts: opts}
}

// Run returns the agent's output, made from its template.
func (r *Runtime) Run(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
	fault := NoFault
	if r.opts.Fault != nil {
		fault = r.opts.Fault(inv)
	}
	switch fault {
	case Crash:
		return nil, agentrunner.Fail(agentrunner.ClassCrash, "mock agent %s crashed (injected fault)", inv.Agent)
	case Hang:
		<-ctx.Done()
		if errors.Is(ctx.Err(), context.DeadlineExceeded) {
			return nil, agentrunner.Fail(agentrunner.ClassTimeout, "mock agent %s hung until its time ran out (injected fault)", inv.Agent)
		}
		return nil, agentrunner.Fail(agentrunner.ClassInterrupted, "mock agent %s hung until it was stopped (injected fault)", inv.Agent)
	case Silent:
		return &agentrunner.RunResult{}, nil
	case Invalid:
		return &agentrunner.RunResult{Output: []byte("not what the template asks for\n")}, nil
	}
	if err := ctx.Err(); err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInterrupted, "mock agent %s: %v", inv.Agent, err)
	}
	tmpl, err := os.ReadFile(inv.TemplatePath)
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassConfig, "mock agent %s: read template: %v", inv.Agent, err)
	}
	out := Generate(tmpl, filepath.Ext(inv.TemplatePath), inv.CycleID, inv.Agent, r.opts.Now().UTC())
	return &agentrunner.RunResult{Output: out}, nil
}

var comment = regexp.MustCompile(`(?s)<!--.*?-->`)

// Generate fills a template the way a diligent agent would: every
// placeholder gets a value and, in markdown, every section left with only
// guidance gets a paragraph. The result is deterministic for its inputs.
func Generate(tmpl []byte, ext, cycleID, agent string, now time.Time) []byte {
	values := artifact.SampleValues(cycleID, agent, now)
	filled := artifact.ExpandPlaceholders(tmpl, values)
	if ext == ".json" {
		return filled
	}
	lines := strings.Split(string(comment.ReplaceAll(filled, nil)), "\n")
	var out []string
	fence := ""
	for i := 0; i < len(lines); i++ {
		line := lines[i]
		out = append(out, line)
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") || strings.HasPrefix(trimmed, "~~~") {
			switch {
			case fence == "":
				fence = trimmed[:3]
			case strings.HasPrefix(trimmed, fence):
				fence = ""
			}
			continue
		}
		if fence != "" || !strings.HasPrefix(line, "##") {
			continue
		}
		if !sectionHasContent(lines[i+1:]) {
			title := strings.TrimSpace(strings.TrimLeft(line, "#"))
			out = append(out, "", fmt.Sprintf("Mock %s output for %q in cycle %s, written at %s.", agent, title, cycleID, now.Format(time.RFC3339)))
		}
	}
	return []byte(squeezeBlankLines(strings.Join(out, "\n")))
}

var blankRun = regexp.MustCompile(`\n{3,}`)

// squeezeBlankLines leaves at most one blank line between blocks, where
// removed comments left several.
func squeezeBlankLines(s string) string {
	return blankRun.ReplaceAllString(s, "\n\n")
}

// sectionHasContent reports whether the lines before the next heading hold
// anything but blanks.
func sectionHasContent(lines []string) bool {
	for _, l := range lines {
		if strings.HasPrefix(l, "#") {
			return false
		}
		if strings.TrimSpace(l) != "" {
			return true
		}
	}
	return false
}
