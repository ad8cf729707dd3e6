package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// agentsWorkspace writes a workspace with a default and two variants of
// Implementing and returns its configuration path.
func agentsWorkspace(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	files := map[string]string{
		"agentrunner.yaml": "version: 1\n",
		"agents/defaults/implementing.yml": "id: implementing-default\nname: Implementation Agent\nstate: Implementing\n" +
			"prompt: Implement.\nmcp_servers: [context7]\nmax_turns: 40\n",
		"agents/variants/implementing.angular.yml": "id: implementing-angular\nextends: implementing-default\n" +
			"name: Angular Implementation Agent\nmatch:\n  files: [angular.json]\nprompt: Implement with Angular.\n",
		"agents/variants/implementing.ts.yml": "id: implementing-ts\nextends: implementing-default\nmatch: {language: typescript}\n",
	}
	for name, text := range files {
		writeFile(t, filepath.Join(dir, name), text)
	}
	return filepath.Join(dir, "agentrunner.yaml")
}

func writeFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestAgentsResolvePrintsTheWinnerTheReasonAndTheCandidates(t *testing.T) {
	cfg := agentsWorkspace(t)
	repo := t.TempDir()
	writeFile(t, filepath.Join(repo, "angular.json"), "{}")
	code, stdout, stderr := cliRun(t, "agents", "resolve", "--state", "Implementing", "--repo", repo, "--language", "typescript", "-c", cfg)
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	want := `agent: implementing-angular (Angular Implementation Agent, variant, from ` + filepath.Join(filepath.Dir(cfg), "agents/variants/implementing.angular.yml") + `)
reason: variant implementing-angular matches files angular.json and is the most specific of 2 matching variants (next: implementing-ts, it matches files); it wins over the default implementing-default
candidates:
  * implementing-angular  variant  matches: files angular.json
    implementing-ts       variant  matches: language typescript
    implementing-default  default  fallback: the default agent of the state
resolved:
  id: implementing-angular
  name: Angular Implementation Agent
  state: Implementing
  prompt: Implement with Angular.
  mcp_servers:
    - context7
  max_turns: 40
  extends: implementing-default
  match:
    files:
      - angular.json
`
	if diff := cmp.Diff(want, stdout); diff != "" {
		t.Errorf("stdout (-want +got):\n%s", diff)
	}
}

func TestAgentsResolveListsTheFilesOfARepository(t *testing.T) {
	cfg := agentsWorkspace(t)
	tests := []struct {
		name  string
		setup func(t *testing.T, repo string)
		want  string
	}{
		{"a walk skips node_modules", func(t *testing.T, repo string) {
			writeFile(t, filepath.Join(repo, "node_modules/angular.json"), "{}")
		}, "implementing-default"},
		{"a walk finds the file", func(t *testing.T, repo string) {
			writeFile(t, filepath.Join(repo, "angular.json"), "{}")
		}, "implementing-angular"},
		{"git leaves out ignored files", func(t *testing.T, repo string) {
			gitInit(t, repo)
			writeFile(t, filepath.Join(repo, ".gitignore"), "angular.json\n")
			writeFile(t, filepath.Join(repo, "angular.json"), "{}")
		}, "implementing-default"},
		{"git lists tracked files", func(t *testing.T, repo string) {
			gitInit(t, repo)
			writeFile(t, filepath.Join(repo, "angular.json"), "{}")
			git(t, repo, "add", "angular.json")
		}, "implementing-angular"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			repo := t.TempDir()
			tt.setup(t, repo)
			code, stdout, stderr := cliRun(t, "agents", "resolve", "--state", "Implementing", "--repo", repo, "-c", cfg)
			if code != exitOK {
				t.Fatalf("exit %d, stderr:\n%s", code, stderr)
			}
			if first, _, _ := strings.Cut(stdout, " ("); first != "agent: "+tt.want {
				t.Errorf("got %q, want agent %s", first, tt.want)
			}
		})
	}
}

func gitInit(t *testing.T, repo string) {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	git(t, repo, "init", "-q")
}

func git(t *testing.T, repo string, args ...string) {
	t.Helper()
	if out, err := exec.Command("git", append([]string{"-C", repo}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
}

func TestAgentsResolveErrors(t *testing.T) {
	cfg := agentsWorkspace(t)
	repo := t.TempDir()
	broken := filepath.Join(t.TempDir(), "agentrunner.yaml")
	writeFile(t, filepath.Join(filepath.Dir(broken), "agents/defaults/planning.yml"), "id: planning-default\nname: Planning\nstate: Planning\nprompt: Plan.\nmax_turn: 3\n")
	tests := []struct {
		name   string
		args   []string
		code   int
		stderr string
	}{
		{"a configuration problem", []string{"--state", "Planning", "--repo", repo, "-c", broken}, exitUsage,
			"agentrunner: the configuration has 1 problem(s):\n  " + filepath.Join(filepath.Dir(broken), "agents/defaults/planning.yml") +
				":5:1: max_turn: unknown key (did you mean \"max_turns\"?)\n"},
		{"no agent for the state", []string{"--state", "Reviewing", "--repo", repo, "-c", cfg}, exitFailure,
			"agentrunner: no agent handles the state \"Reviewing\" (states: Implementing)\n"},
		{"no state", []string{"--repo", repo, "-c", cfg}, exitUsage,
			"agentrunner: --state is required: the state whose agent to resolve\n"},
		{"no repository flag", []string{"--state", "Implementing", "-c", cfg}, exitUsage,
			"agentrunner: --repo is required: the repository the agent works on\n"},
		{"no repository", []string{"--state", "Implementing", "--repo", filepath.Join(repo, "nope"), "-c", cfg}, exitFailure,
			"agentrunner: repository: stat " + filepath.Join(repo, "nope") + ": no such file or directory\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := cliRun(t, append([]string{"agents", "resolve"}, tt.args...)...)
			if code != tt.code {
				t.Errorf("exit %d, want %d", code, tt.code)
			}
			if diff := cmp.Diff(tt.stderr, stderr); diff != "" {
				t.Errorf("stderr (-want +got):\n%s", diff)
			}
		})
	}
}
