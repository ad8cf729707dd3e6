package main

import (
	"bytes"
	"encoding/json"
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/engine"
	"github.com/agentrunner/agentrunner/examples/crypton"
	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// cliExampleFiles is what init writes: the configuration, five identities,
// tools.md and seven templates (the JSON Schema among them).
var cliExampleFiles = []string{
	"agent_prompts/analysis_agent.md",
	"agent_prompts/evaluation_agent.md",
	"agent_prompts/plan_agent.md",
	"agent_prompts/research_agent.md",
	"agent_prompts/synthesis_agent.md",
	"agentrunner.yaml",
	"output_templates/analysis.md",
	"output_templates/evaluation.md",
	"output_templates/memory.md",
	"output_templates/plan.md",
	"output_templates/research.md",
	"output_templates/strategy.json",
	"output_templates/strategy.schema.json",
	"tools.md",
}

// cliRun runs one command line in-process and returns its exit status and
// output.
func cliRun(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code = run(t.Context(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

// cliExample writes the example workspace into a fresh directory through
// init and returns the directory.
func cliExample(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "ws")
	if code, _, stderr := cliRun(t, "init", dir); code != exitOK {
		t.Fatalf("init %s: exit %d, stderr:\n%s", dir, code, stderr)
	}
	return dir
}

// cliConfigPath is the configuration file of a workspace written by init.
func cliConfigPath(dir string) string { return filepath.Join(dir, "agentrunner.yaml") }

// cliFiles lists every file under dir, relative and slash-separated, sorted.
func cliFiles(t *testing.T, dir string) []string {
	t.Helper()
	var files []string
	err := filepath.WalkDir(dir, func(path string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		rel, err := filepath.Rel(dir, path)
		files = append(files, filepath.ToSlash(rel))
		return err
	})
	if err != nil {
		t.Fatalf("list %s: %v", dir, err)
	}
	slices.Sort(files)
	return files
}

// cliEdit replaces the one occurrence of old in the file with new.
func cliEdit(t *testing.T, path, old, new string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if n := strings.Count(string(data), old); n != 1 {
		t.Fatalf("%s has %q %d times, want once", path, old, n)
	}
	if err := os.WriteFile(path, []byte(strings.Replace(string(data), old, new, 1)), 0o644); err != nil {
		t.Fatal(err)
	}
}

// cliLine returns the 1-based number of the first line of the file that
// contains needle, at or after the first line that contains anchor.
func cliLine(t *testing.T, path, anchor, needle string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	start := slices.IndexFunc(lines, func(l string) bool { return strings.Contains(l, anchor) })
	if start < 0 {
		t.Fatalf("%s has no line with %q", path, anchor)
	}
	for i := start; i < len(lines); i++ {
		if strings.Contains(lines[i], needle) {
			return i + 1
		}
	}
	t.Fatalf("%s has no line with %q after %q", path, needle, anchor)
	return 0
}

// cliStatus runs status --json and decodes it.
func cliStatus(t *testing.T, configPath string) *engine.Status {
	t.Helper()
	code, stdout, stderr := cliRun(t, "status", "-c", configPath, "--json")
	if code != exitOK {
		t.Fatalf("status: exit %d, stderr:\n%s", code, stderr)
	}
	var st engine.Status
	if err := json.Unmarshal([]byte(stdout), &st); err != nil {
		t.Fatalf("status --json printed no JSON status: %v\n%s", err, stdout)
	}
	return &st
}

func TestInitWritesTheExample(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "ws")
	code, stdout, stderr := cliRun(t, "init", dir)
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	if diff := cmp.Diff(cliExampleFiles, cliFiles(t, dir)); diff != "" {
		t.Errorf("files written (-want +got):\n%s", diff)
	}
	for _, f := range cliExampleFiles {
		want, err := crypton.Files.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		got, err := os.ReadFile(filepath.Join(dir, f))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s differs from the embedded example", f)
		}
		if !strings.Contains(stdout, f) {
			t.Errorf("stdout does not list %s:\n%s", f, stdout)
		}
	}
}

func TestInitRefusesToOverwriteWithoutForce(t *testing.T) {
	dir := cliExample(t)
	cfg := cliConfigPath(dir)
	if err := os.WriteFile(cfg, []byte("# edited by the operator\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	code, _, stderr := cliRun(t, "init", dir)
	if code != exitUsage {
		t.Errorf("second init: exit %d, want %d", code, exitUsage)
	}
	for _, f := range cliExampleFiles {
		if !strings.Contains(stderr, f) {
			t.Errorf("stderr does not name the existing %s:\n%s", f, stderr)
		}
	}
	if !strings.Contains(stderr, "--force") {
		t.Errorf("stderr does not mention --force:\n%s", stderr)
	}
	if got, _ := os.ReadFile(cfg); string(got) != "# edited by the operator\n" {
		t.Errorf("init without --force changed agentrunner.yaml to:\n%s", got)
	}

	if code, _, stderr := cliRun(t, "init", "--force", dir); code != exitOK {
		t.Fatalf("init --force: exit %d, stderr:\n%s", code, stderr)
	}
	want, _ := crypton.Files.ReadFile("agentrunner.yaml")
	if got, _ := os.ReadFile(cfg); !bytes.Equal(got, want) {
		t.Errorf("init --force did not restore agentrunner.yaml; got:\n%s", got)
	}
}

// One existing file is enough to refuse, and the refusal writes nothing.
func TestInitRefusesBeforeWritingAnything(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "tools.md"), []byte("# my tools\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cliRun(t, "init", dir)
	if code != exitUsage {
		t.Errorf("exit %d, want %d", code, exitUsage)
	}
	if !strings.Contains(stderr, "tools.md") || strings.Contains(stderr, "agentrunner.yaml") {
		t.Errorf("stderr should name tools.md and only it:\n%s", stderr)
	}
	if diff := cmp.Diff([]string{"tools.md"}, cliFiles(t, dir)); diff != "" {
		t.Errorf("files after a refused init (-want +got):\n%s", diff)
	}
}

func TestValidateAcceptsTheExample(t *testing.T) {
	dir := cliExample(t)
	code, stdout, stderr := cliRun(t, "validate", "-c", cliConfigPath(dir))
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	const pipeline = "plan → research → analyze → synthesize → execute → evaluate → end"
	if !strings.Contains(stdout, "is valid") || !strings.Contains(stdout, "5 agents") || !strings.Contains(stdout, pipeline) {
		t.Errorf("stdout should say the configuration is valid, with 5 agents and the pipeline %s:\n%s", pipeline, stdout)
	}
}

// TestValidateSaysEachProblemOnce: a broken graph, found by both the
// configuration's validation and the workspace loader, is one problem.
func TestValidateSaysEachProblemOnce(t *testing.T) {
	dir := cliExample(t)
	t.Setenv("AGENTRUNNER_PIPELINE_STEPS_SYNTHESIZE_NEXT", "evaluate")
	code, _, stderr := cliRun(t, "validate", "-c", cliConfigPath(dir))
	if code != exitFailure || strings.Count(stderr, `step execute: unreachable: no edge leads to it from the start step "plan"`) != 1 || !strings.Contains(stderr, "has 1 problem(s)") {
		t.Errorf("exit %d, want 1 and the problem once:\n%s", code, stderr)
	}
}

// cliProblem is one problem line of the CLI's report, as parsed back.
type cliProblem struct {
	File string
	Line int
	Key  string
	// Mentions is a substring of the message, in expectations only.
	Mentions string
}

// cliProblemLine is "  file:line:col: key: message".
var cliProblemLine = regexp.MustCompile(`^  (.+):(\d+):(\d+): (\S+): (.+)$`)

func TestValidateListsEveryProblemWithItsLine(t *testing.T) {
	dir := cliExample(t)
	cfg := cliConfigPath(dir)
	if err := os.Remove(filepath.Join(dir, "agent_prompts/plan_agent.md")); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(filepath.Join(dir, "output_templates/research.md")); err != nil {
		t.Fatal(err)
	}
	tools, err := os.ReadFile(filepath.Join(dir, "tools.md"))
	if err != nil {
		t.Fatal(err)
	}
	start := bytes.Index(tools, []byte("## bird\n"))
	end := bytes.Index(tools[start+1:], []byte("\n## "))
	if start < 0 || end < 0 {
		t.Fatal("tools.md of the example has no ## bird section followed by another")
	}
	tools = append(tools[:start:start], tools[start+1+end+1:]...)
	if err := os.WriteFile(filepath.Join(dir, "tools.md"), tools, 0o644); err != nil {
		t.Fatal(err)
	}

	code, _, stderr := cliRun(t, "validate", "-c", cfg)
	if code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	want := []cliProblem{
		{cfg, cliLine(t, cfg, "  plan:", "identity:"), "agents.plan.identity", "agent_prompts/plan_agent.md does not exist"},
		{cfg, cliLine(t, cfg, "  plan:", "tools:"), "agents.plan.tools[2]", `"## bird"`},
		{cfg, cliLine(t, cfg, "  research:", "output:"), "agents.research.output.template", "output_templates/research.md does not exist"},
		{cfg, cliLine(t, cfg, "  research:", "tools:"), "agents.research.tools[2]", `"## bird"`},
	}
	lines := strings.Split(strings.TrimSpace(stderr), "\n")
	if len(lines) == 0 || !strings.Contains(lines[0], "4 problem(s)") {
		t.Errorf("stderr should start with the number of problems:\n%s", stderr)
	}
	var got []cliProblem
	for _, l := range lines[1:] {
		m := cliProblemLine.FindStringSubmatch(l)
		if m == nil {
			t.Errorf("problem line without file:line:col: key: %q", l)
			continue
		}
		n, _ := strconv.Atoi(m[2])
		p := cliProblem{File: m[1], Line: n, Key: m[4]}
		for _, w := range want {
			if w.Key == p.Key && strings.Contains(m[5], w.Mentions) {
				p.Mentions = w.Mentions
			}
		}
		got = append(got, p)
	}
	byKey := func(ps []cliProblem) {
		slices.SortFunc(ps, func(a, b cliProblem) int { return strings.Compare(a.Key, b.Key) })
	}
	byKey(got)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("problems (-want +got):\n%s\nstderr:\n%s", diff, stderr)
	}
}

func TestMalformedConfigurationStartsNothing(t *testing.T) {
	tests := []struct {
		name     string
		old, new string            // edit of agentrunner.yaml
		env      map[string]string // environment overrides
		// where is the expected location; a line found by the text given
		// (lineOf) when it is in the file.
		lineOf  string
		where   string
		mention string
	}{
		{
			name: "unknown key", old: "  every: 6h\n", new: "  every: 6h\n  evrey: 12h\n",
			lineOf: "evrey:", mention: `schedule: unknown key "evrey" (did you mean "every"?)`,
		},
		{
			name: "wrong type", old: "max_messages: 5", new: "max_messages: [5]",
			lineOf: "max_messages:", mention: "mailbox.max_messages: want an integer, got a list",
		},
		{
			name: "bad duration", old: "  every: 6h\n", new: "  every: 6 hours\n",
			lineOf: "every: 6 hours", mention: `schedule.every: invalid duration "6 hours"`,
		},
		{
			name: "bad duration from the environment", env: map[string]string{"AGENTRUNNER_DEFAULTS_TIMEOUT": "soon"},
			where: "environment variable AGENTRUNNER_DEFAULTS_TIMEOUT", mention: `defaults.timeout: invalid duration "soon"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for k, v := range tt.env {
				t.Setenv(k, v)
			}
			dir := cliExample(t)
			cfg := cliConfigPath(dir)
			if tt.old != "" {
				cliEdit(t, cfg, tt.old, tt.new)
			}
			where := tt.where
			if tt.lineOf != "" {
				where = cfg + ":" + strconv.Itoa(cliLine(t, cfg, tt.lineOf, tt.lineOf)) + ":"
			}
			before := cliFiles(t, dir)

			code, _, stderr := cliRun(t, "run", "--once", "-c", cfg)
			if code != exitUsage {
				t.Errorf("exit %d, want %d", code, exitUsage)
			}
			if !strings.Contains(stderr, "1 problem(s)") || !strings.Contains(stderr, where) || !strings.Contains(stderr, tt.mention) {
				t.Errorf("stderr should report one problem at %s: %s; got:\n%s", where, tt.mention, stderr)
			}
			if _, err := os.Stat(filepath.Join(dir, "artifacts")); !os.IsNotExist(err) {
				t.Errorf("the artifacts dir exists after a refused run (err %v)", err)
			}
			if diff := cmp.Diff(before, cliFiles(t, dir)); diff != "" {
				t.Errorf("files changed by a refused run (-before +after):\n%s", diff)
			}
		})
	}
}

func TestStatusOfAFreshWorkspaceIsIdleAndCreatesNothing(t *testing.T) {
	dir := cliExample(t)
	st := cliStatus(t, cliConfigPath(dir))
	want := &engine.Status{Pipeline: "crypton", CurrentState: agentrunner.StateIdle,
		Schedules: []engine.ScheduleStatus{{Pipeline: "crypton", Schedule: "every 6h0m0s", Overlap: agentrunner.OverlapQueue, CatchUp: agentrunner.CatchUpOne}}}
	if diff := cmp.Diff(want, st, cmpopts.IgnoreFields(engine.Status{}, "NextScheduledTime"), cmpopts.IgnoreFields(engine.ScheduleStatus{}, "NextFireTime")); diff != "" {
		t.Errorf("status (-want +got):\n%s", diff)
	}
	if st.NextScheduledTime.IsZero() {
		t.Error("next_scheduled_time is zero; want now")
	}
	if diff := cmp.Diff(cliExampleFiles, cliFiles(t, dir)); diff != "" {
		t.Errorf("status changed the workspace (-want +got):\n%s", diff)
	}

	code, stdout, stderr := cliRun(t, "status", "-c", cliConfigPath(dir))
	if code != exitOK {
		t.Fatalf("status: exit %d, stderr:\n%s", code, stderr)
	}
	if !regexp.MustCompile(`(?m)^current state:\s+Idle$`).MatchString(stdout) {
		t.Errorf("status should print the state Idle:\n%s", stdout)
	}
}

func TestUsageErrorsExit2(t *testing.T) {
	tests := []struct {
		name    string
		args    []string
		mention string
	}{
		{"unknown command", []string{"frobnicate"}, `unknown command "frobnicate"`},
		{"misspelt command", []string{"statsu"}, "did you mean status?"},
		{"unknown flag", []string{"run", "--bogus"}, "unknown flag: --bogus"},
		{"flag without its value", []string{"validate", "-c"}, "flag needs an argument"},
		{"missing argument", []string{"init"}, "accepts 1 arg(s), received 0"},
		{"extra argument", []string{"status", "extra"}, `unknown command "extra" for "agentrunner status"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			code, _, stderr := cliRun(t, tt.args...)
			if code != exitUsage {
				t.Errorf("%v: exit %d, want %d", tt.args, code, exitUsage)
			}
			if !strings.Contains(stderr, tt.mention) {
				t.Errorf("%v: stderr should mention %q:\n%s", tt.args, tt.mention, stderr)
			}
		})
	}
}

// With no command the root prints its help and succeeds, as before it got
// its own argument check.
func TestNoCommandPrintsHelp(t *testing.T) {
	code, stdout, stderr := cliRun(t)
	if code != exitOK {
		t.Fatalf("exit %d, stderr:\n%s", code, stderr)
	}
	for _, c := range []string{"init", "validate", "run", "serve", "demo", "status"} {
		if !regexp.MustCompile(`(?m)^\s+` + c + `\s`).MatchString(stdout) {
			t.Errorf("help does not list the command %s:\n%s", c, stdout)
		}
	}
}

func TestRequireLoopback(t *testing.T) {
	tests := []struct {
		listen string
		ok     bool
	}{
		{"127.0.0.1:8080", true},
		{"127.0.0.2:8080", true},
		{"[::1]:8080", true},
		{"localhost:8080", true},
		{"0.0.0.0:8080", false},
		{":8080", false}, // every interface
		{"[::]:8080", false},
		{"192.168.1.10:8080", false},
		{"example.com:8080", false},
		{"127.0.0.1", false}, // no port
	}
	for _, tt := range tests {
		err := requireLoopback(tt.listen)
		if (err == nil) != tt.ok {
			t.Errorf("requireLoopback(%q) = %v, want ok=%v", tt.listen, err, tt.ok)
		}
	}
}

// TestValidateReportsConfigurationAndFileProblemsTogether: a configuration
// that breaks a rule still gets its files checked, so one run lists both.
func TestValidateReportsConfigurationAndFileProblemsTogether(t *testing.T) {
	dir := cliExample(t)
	cfg := cliConfigPath(dir)
	cliEdit(t, cfg, "    timeout: 15m\n", "    timeout: 0s\n")
	if err := os.Remove(filepath.Join(dir, "agent_prompts/evaluation_agent.md")); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := cliRun(t, "validate", "-c", cfg)
	if code != exitFailure {
		t.Errorf("exit %d, want %d", code, exitFailure)
	}
	for _, want := range []string{"agents.synthesis.timeout: must be positive", "agents.evaluation.identity: file agent_prompts/evaluation_agent.md does not exist"} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, stderr)
		}
	}
}
