package agent

import (
	"context"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
)

// TestOutputSizeCap: an output larger than the agent's output.max_bytes
// (by default config.DefaultMaxArtifactBytes, 8 MiB) is refused as
// invalid output, with an error that gives its size and the cap, and
// nothing of it is published or stored; an output of exactly the cap is
// accepted.
func TestOutputSizeCap(t *testing.T) {
	for _, tt := range []struct {
		name string
		cap  int // 0: the default
		size int
		want string // the error; empty: accepted
	}{
		{"over the default cap", 0, config.DefaultMaxArtifactBytes + 1,
			"the agent's research.md is 8388609 bytes or more, over output.max_bytes (8388608)"},
		{"over a configured cap", 4096, 4097, "the agent's research.md is 4097 bytes or more, over output.max_bytes (4096)"},
		{"at the cap", 4096, 4096, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			research := e.ws.Agents["research"]
			if research.Output.MaxBytes != config.DefaultMaxArtifactBytes {
				t.Fatalf("research's output.max_bytes is %d, want the default %d", research.Output.MaxBytes, config.DefaultMaxArtifactBytes)
			}
			if tt.cap > 0 {
				research.Output.MaxBytes = tt.cap
			}
			res, err := e.kind(t, padded(e, tt.size), nil).Run(context.Background(), e.attempt(t))
			stored := storedFile(res, agentrunner.FileArtifact)
			if tt.want == "" {
				if err != nil || stored == nil || len(stored.Data) != tt.size || len(res.Output) != tt.size {
					t.Fatalf("an output of %d bytes, the cap: %v, stored %+v, want it accepted", tt.size, err, stored)
				}
				return
			}
			if agentrunner.ClassOf(err) != agentrunner.ClassInvalidOutput || !strings.HasSuffix(err.Error(), ": "+tt.want) {
				t.Fatalf("error %v (class %s), want invalid output: %s", err, agentrunner.ClassOf(err), tt.want)
			}
			if len(res.Output) != 0 || res.Path != "" {
				t.Errorf("the refused output was published (Output %d bytes, Path %q)", len(res.Output), res.Path)
			}
			for _, f := range res.Files {
				if f.Kind == agentrunner.FileArtifact {
					t.Errorf("the refused output is stored as artifact %s (%d bytes)", f.Name, len(f.Data))
				}
			}
		})
	}
}

// padded is the mock agent, its valid output padded at its end to size
// bytes.
func padded(e *env, size int) agentrunner.Runtime {
	return agentFunc(func(ctx context.Context, inv *agentrunner.Invocation) (*agentrunner.RunResult, error) {
		res, err := e.files.Run(ctx, inv)
		if err != nil {
			return res, err
		}
		data, err := os.ReadFile(inv.OutputPath)
		if err != nil {
			return res, err
		}
		pad := size - len(data) - 1
		if pad < 0 {
			return res, fmt.Errorf("the mock's output is %d bytes, over %d", len(data), size)
		}
		data = append(data, strings.Repeat("x", pad)+"\n"...)
		return res, os.WriteFile(inv.OutputPath, data, 0o644)
	})
}
