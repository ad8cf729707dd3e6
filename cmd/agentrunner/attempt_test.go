package main

import (
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
)

// remoteStoredFile is the store's copy of a file attempt n of step wrote
// in the halted cycle.
func remoteStoredFile(step string, n int, kind agentrunner.FileKind, name, body string) *agentrunner.StoredFile {
	return &agentrunner.StoredFile{RunID: remoteHaltedID, Step: step, Visit: 1, Attempt: n, Kind: kind, Name: name,
		Data: []byte(body), SHA256: artifact.Hash([]byte(body)), CreatedAt: remoteNow.Add(-30 * time.Minute)}
}

// TestRemoteAttempt: attempt prints an attempt's stored prompt, or with
// --validation its validation report, byte for byte; what the store does
// not have is a failure that says why, a bad number a usage error.
func TestRemoteAttempt(t *testing.T) {
	prompt := "# Synthesize\n\nRead research.md.\n"
	report := "strategy.json: positions[0].size: must be > 0\n"
	files := &agentrunner.Change{Files: []*agentrunner.StoredFile{
		remoteStoredFile("synthesize", 1, agentrunner.FilePrompt, "prompt.md", prompt),
		remoteStoredFile("synthesize", 1, agentrunner.FileValidation, "validation.txt", report),
	}}
	f := newRemoteFixture(t, append(remoteHistory(), files)...)
	t.Setenv(envServer, f.url)
	t.Setenv(envAPIKey, remoteViewerKey)
	tests := []struct {
		name   string
		args   []string
		code   int
		stdout string
		stderr []string
	}{
		{"prompt", []string{"attempt", remoteHaltedID, "synthesize", "1"}, exitOK, prompt, nil},
		{"validation report", []string{"attempt", remoteHaltedID, "synthesize", "1", "--validation"}, exitOK, report, nil},
		{"no stored prompt", []string{"attempt", remoteHaltedID, "execute", "1"}, exitFailure, "",
			[]string{"attempt 1 of step execute of run " + remoteHaltedID + " has no stored prompt", "(not_found)"}},
		{"no such attempt", []string{"attempt", remoteHaltedID, "synthesize", "2", "--validation"}, exitFailure, "",
			[]string{"run " + remoteHaltedID + ` has no attempt 2 of step "synthesize"`, "(not_found)"}},
		{"attempt 0", []string{"attempt", remoteHaltedID, "synthesize", "0"}, exitUsage, "", []string{"N: want an attempt number from 1"}},
		{"missing number", []string{"attempt", remoteHaltedID, "synthesize"}, exitUsage, "", []string{"accepts 3 arg(s)"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, stdout, stderr := cliRun(t, tt.args...)
			if code != tt.code || stdout != tt.stdout {
				t.Errorf("exit %d, want %d; stdout %q, want %q; stderr:\n%s", code, tt.code, stdout, tt.stdout, stderr)
			}
			for _, m := range tt.stderr {
				if !strings.Contains(stderr, m) {
					t.Errorf("stderr does not mention %q:\n%s", m, stderr)
				}
			}
		})
	}
}
