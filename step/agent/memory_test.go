package agent

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/runtime/mock"
)

// returner is an agent that works in memory and returns out, or its mock
// output when out is nil; it records the invocation it was given.
type returner struct {
	*mock.Runtime
	out []byte
	inv *agentrunner.Invocation
}

func (r *returner) Run(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
	r.inv = inv
	if r.out != nil {
		return &agentrunner.RunResult{Output: r.out}, nil
	}
	return r.Runtime.Run(ctx, inv)
}

var _ agentrunner.OutputReturner = (*returner)(nil)

// TestAnAgentInMemoryMakesNoFile: an agent whose runtime returns its
// output gets no attempt folder, no prompt file and no output file; the
// prompt it was given and its artifact are handed to the scheduler to
// commit, and the artifact's view is written from the stored bytes.
func TestAnAgentInMemoryMakesNoFile(t *testing.T) {
	e := newEnv(t)
	a := e.attempt(t)
	os.Remove(a.Dir)
	rt := &returner{Runtime: e.mock}
	res, err := e.kind(t, rt, nil).Run(context.Background(), a)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(a.Dir); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("the attempt folder %s exists (%v), want none", a.Dir, err)
	}
	prompt := storedFile(res, agentrunner.FilePrompt)
	if prompt == nil || string(prompt.Data) != rt.inv.Prompt || !strings.Contains(rt.inv.Prompt, "plan.md") {
		t.Errorf("the stored prompt %+v is not the prompt the agent was given", prompt)
	}
	f := storedFile(res, agentrunner.FileArtifact)
	if f == nil || f.Name != "research.md" || f.From != "" || len(f.Data) == 0 || string(f.Data) != string(res.Output) {
		t.Errorf("stored artifact %+v, want research.md with the returned bytes and no file to move", f)
	}
}

// TestAReturnedOutputIsCheckedAsAWrittenOne: what an agent in memory
// returns meets the same contract and size cap as a file, and returning
// nothing is no output.
func TestAReturnedOutputIsCheckedAsAWrittenOne(t *testing.T) {
	tests := []struct {
		name, out, inError string
		maxBytes           int
	}{
		{name: "nothing returned", inError: "the agent returned no research.md"},
		{name: "breaks the contract", out: "# nothing\n", inError: "missing section"},
		{name: "over the cap", out: strings.Repeat("x", 101), maxBytes: 100, inError: "research.md is 101 bytes, over output.max_bytes (100)"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			if tt.maxBytes > 0 {
				e.ws.Agents["research"].Output.MaxBytes = tt.maxBytes
			}
			a := e.attempt(t)
			os.Remove(a.Dir)
			out := []byte(tt.out)
			rt := agentrunner.Runtime(&returner{Runtime: e.mock, out: out})
			if tt.out == "" {
				rt = &returner{Runtime: mock.New(mock.Options{Fault: func(*agentrunner.Invocation) mock.Fault { return mock.Silent }})}
			}
			res, err := e.kind(t, rt, nil).Run(context.Background(), a)
			if agentrunner.ClassOf(err) != agentrunner.ClassInvalidOutput || !strings.Contains(err.Error(), tt.inError) {
				t.Fatalf("error %v, want invalid output saying %q", err, tt.inError)
			}
			if f := storedFile(res, agentrunner.FileArtifact); f != nil {
				t.Errorf("an invalid output is stored as the artifact: %+v", f)
			}
			if _, err := os.Stat(a.Dir); !errors.Is(err, fs.ErrNotExist) {
				t.Errorf("the attempt folder %s exists (%v), want none", a.Dir, err)
			}
		})
	}
}
