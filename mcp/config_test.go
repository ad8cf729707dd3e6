package mcp

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
)

func TestWriteConfig(t *testing.T) {
	t.Setenv("AGENTRUNNER_ARTIFACTS_DIR", "/srv/loop/artifacts")
	t.Setenv("AGENTRUNNER_SCHEDULE_EVERY", "4h")
	t.Setenv("AGENTRUNNER_AGENTS_RESEARCH_PROVIDER", "claude")
	t.Setenv("MCPTEST_UNRELATED", "not copied")
	// Secrets an operator named AGENTRUNNER_*: the agent can read the file.
	t.Setenv("AGENTRUNNER_KEY_ALICE", "alice-api-key")
	t.Setenv("AGENTRUNNER_WEBHOOK_SECRET", "webhook-secret")
	t.Setenv("AGENTRUNNER_TEST_SECRET", "test-secret")
	dir := t.TempDir()
	exe := filepath.Join(dir, "bin", "agentrunner")
	cfgPath := filepath.Join(dir, "agentrunner.yaml")

	path, err := WriteConfig(dir, exe, cfgPath, agentrunner.ToolCall{Agent: "research", Step: "research-2", CycleID: "20260101_000000", Attempt: 3})
	if err != nil {
		t.Fatalf("WriteConfig: %v", err)
	}
	if path != filepath.Join(dir, "mcp.json") {
		t.Errorf("path = %s, want dir/mcp.json", path)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if fi.Mode().Perm() != 0o600 {
		t.Errorf("mode = %v, want 0600", fi.Mode().Perm())
	}
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var got any
	if err := json.Unmarshal(data, &got); err != nil {
		t.Fatalf("mcp.json is not JSON: %v\n%s", err, data)
	}
	want := map[string]any{
		"mcpServers": map[string]any{
			"agentrunner": map[string]any{
				"command": exe,
				"args": []any{
					"mcp", "--config", cfgPath, "--agent", "research", "--cycle", "20260101_000000",
					"--step", "research-2", "--attempt", "3",
				},
				"env": map[string]any{
					"AGENTRUNNER_ARTIFACTS_DIR":            "/srv/loop/artifacts",
					"AGENTRUNNER_SCHEDULE_EVERY":           "4h",
					"AGENTRUNNER_AGENTS_RESEARCH_PROVIDER": "claude",
				},
			},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mcp.json (-want +got):\n%s", diff)
	}

	// Written again for a retry, it is replaced whole.
	if _, err := WriteConfig(dir, exe, cfgPath, agentrunner.ToolCall{Agent: "research", Step: "research-2", CycleID: "20260101_000000", Attempt: 4}); err != nil {
		t.Fatal(err)
	}
	data, _ = os.ReadFile(path)
	if !strings.Contains(string(data), `"--attempt",`+"\n"+`        "4"`) {
		t.Errorf("rewritten file:\n%s", data)
	}
}

func TestWriteConfigErrors(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	exe, cfgPath := filepath.Join(dir, "agentrunner"), filepath.Join(dir, "agentrunner.yaml")
	call := agentrunner.ToolCall{Agent: "a", Step: "s", CycleID: "c", Attempt: 1}
	tests := []struct {
		name, dir, exe, cfg string
		call                agentrunner.ToolCall
		want                string
	}{
		{"empty dir", "", exe, cfgPath, call, "directory is empty"},
		{"missing dir", filepath.Join(dir, "nope"), exe, cfgPath, call, "no such file or directory"},
		{"dir is a file", file, exe, cfgPath, call, "is not a directory"},
		{"relative exe", dir, "agentrunner", cfgPath, call, `executable "agentrunner" must be an absolute path`},
		{"relative config", dir, exe, "agentrunner.yaml", call, `configuration path "agentrunner.yaml" must be absolute`},
		{"no agent", dir, exe, cfgPath, agentrunner.ToolCall{Step: "s", CycleID: "c", Attempt: 1}, "caller has no agent"},
		{"attempt 0", dir, exe, cfgPath, agentrunner.ToolCall{Agent: "a", Step: "s", CycleID: "c"}, "caller attempt must be 1 or more"},
		{"nul in agent", dir, exe, cfgPath, agentrunner.ToolCall{Agent: "a\x00", Step: "s", CycleID: "c", Attempt: 1}, "contains a NUL byte"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := WriteConfig(tt.dir, tt.exe, tt.cfg, tt.call)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("WriteConfig = %v, want an error containing %q", err, tt.want)
			}
		})
	}
	if entries, _ := os.ReadDir(dir); len(entries) != 1 {
		t.Errorf("failed writes left files: %v", entries)
	}
}
