package prompt

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/examples/crypton"
	"github.com/agentrunner/agentrunner/workspace"
)

var update = flag.Bool("update", false, "rewrite the testdata/*.golden files with the current output")

// root is where the prompts' paths point; the files need not exist, as
// prompts name paths without reading them.
const root = "/srv/crypton/artifacts"

// loadExample writes the shipped example workspace into a fresh directory
// and loads it, so the prompts are built from the identity and tools.md
// the example really ships.
func loadExample(t *testing.T) *workspace.Workspace {
	t.Helper()
	dir := t.TempDir()
	if _, err := crypton.Write(dir, true, ""); err != nil {
		t.Fatalf("write example workspace: %v", err)
	}
	cfg, err := config.Load(filepath.Join(dir, config.FileName))
	if err != nil {
		t.Fatalf("load example configuration: %v", err)
	}
	ws, err := workspace.Load(cfg)
	if err != nil {
		t.Fatalf("load example workspace: %v", err)
	}
	return ws
}

// planContext is the plan agent's context as the engine builds it, with
// every path under root instead of the temporary directory.
func planContext(t *testing.T) Context {
	t.Helper()
	ws := loadExample(t)
	plan := ws.Agents["plan"]
	tools := make([]Tool, len(plan.Tools))
	for i, name := range plan.Tools {
		tools[i] = Tool{Name: name, Section: ws.Tools[name]}
	}
	attempt := root + "/attempts/20260221_140000/plan-2"
	return Context{
		CycleID: "20260221_140000", Step: "plan", Agent: "plan", Attempt: 2,
		Identity:    plan.Identity,
		Tools:       tools,
		MailboxPath: root + "/mailboxes/mailbox.plan",
		MaxMessages: ws.Config.Mailbox.MaxMessages,
		Inputs: []agentrunner.Input{
			{Name: "your memory (plan/memory.md)", Path: root + "/plan/memory.md"},
			{Name: "evaluation of the past 7 days (cycle 20260221_080000)", Path: root + "/cycles/20260221_080000/evaluation.md"},
			{Name: "evaluation of the past 7 days (cycle 20260221_020000)", Path: root + "/cycles/20260221_020000/evaluation.md"},
		},
		TemplatePath: "/srv/crypton/output_templates/plan.md",
		OutputPath:   attempt + "/plan.md",
	}
}

// bareContext is an agent with no tools and no inputs that writes JSON.
func bareContext() Context {
	attempt := root + "/attempts/20260221_140000/decide-1"
	return Context{
		CycleID: "20260221_140000", Step: "decide", Agent: "decider", Attempt: 1,
		Identity:     "# Decider\n\nYou decide, from nothing but your mailbox, whether to trade today.\n\n## Rules\n\n- Say no when unsure.\n\n",
		MailboxPath:  root + "/mailboxes/mailbox.decider",
		MaxMessages:  3,
		TemplatePath: "/srv/crypton/templates/decision.json",
		SchemaPath:   "/srv/crypton/templates/decision.schema.json",
		OutputPath:   attempt + "/decision.json",
	}
}

func TestBuildGolden(t *testing.T) {
	tests := []struct {
		name string
		ctx  func(t *testing.T) Context
	}{
		{"plan", planContext},
		{"no_tools_no_inputs_json", func(*testing.T) Context { return bareContext() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Build(tt.ctx(t))
			golden := filepath.Join("testdata", tt.name+".golden")
			if *update {
				if err := os.MkdirAll("testdata", 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(golden, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(golden)
			if err != nil {
				t.Fatalf("%v (run the test with -update to create it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("Build differs from %s (-want +got; rerun with -update if the change is intended):\n%s", golden, diff)
			}
		})
	}
}

// lineAt returns the offset of the first line equal to line at or after
// offset from, or -1.
func lineAt(s, line string, from int) int {
	if from < 0 || from > len(s) {
		return -1
	}
	if strings.HasPrefix(s[from:], line+"\n") && (from == 0 || s[from-1] == '\n') {
		return from
	}
	i := strings.Index(s[from:], "\n"+line+"\n")
	if i < 0 {
		return -1
	}
	return from + i + 1
}

// assertOrder checks that the parts of a prompt come in the order of
// FR-150, each found once after the part before it: identity, tools (each
// tool's section in the given order), mailbox, inputs, output template,
// output. It reports the first part that is missing or out of place.
func assertOrder(t *testing.T, c Context, prompt string) {
	t.Helper()
	identityHeading, _, _ := strings.Cut(c.Identity, "\n")
	parts := []string{identityHeading, "# Run context", "## Tools"}
	for _, tool := range c.Tools {
		parts = append(parts, "### "+tool.Name)
	}
	parts = append(parts, "## Mailbox", "## Inputs", "## Output template", "## Output")

	// The identity may have headings of its own ("## Output contract"), so
	// the prompt's headings are looked for after the run context starts.
	pos := 0
	for i, part := range parts {
		at := lineAt(prompt, part, pos)
		if at < 0 {
			t.Errorf("part %q is missing, or not after %q", part, parts[max(i-1, 0)])
			return
		}
		if i == 0 && at != 0 {
			t.Errorf("the prompt does not start with the identity %q", part)
		}
		pos = at + len(part)
		if i >= 1 && lineAt(prompt, part, pos) >= 0 {
			t.Errorf("part %q appears twice", part)
		}
	}
}

func TestBuildOrder(t *testing.T) {
	tests := []struct {
		name string
		ctx  func(t *testing.T) Context
	}{
		{"plan", planContext},
		{"no tools, no inputs, JSON", func(*testing.T) Context { return bareContext() }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.ctx(t)
			assertOrder(t, c, Build(c))
		})
	}
}

func TestBuildContent(t *testing.T) {
	plan := planContext(t)
	bare := bareContext()
	tests := []struct {
		name       string
		prompt     string
		has, lacks []string
	}{
		{
			name:   "plan",
			prompt: Build(plan),
			has: []string{
				`You are the plan agent, running step "plan" of cycle 20260221_140000 (attempt 2).`,
				"You may use these tools: web_search, web_fetch, bird, technical_indicators, memory_append, memory_search.",
				"Your mailbox: " + plan.MailboxPath,
				"It holds the 5 most recent messages for you",
				"- your memory (plan/memory.md): " + root + "/plan/memory.md\n",
				"- evaluation of the past 7 days (cycle 20260221_080000): " + root + "/cycles/20260221_080000/evaluation.md\n",
				"Template: " + plan.TemplatePath + "\n",
				"Write your result to exactly this file: " + plan.OutputPath,
				"Keep every heading of the template exactly as written",
			},
			lacks: []string{"JSON Schema:", "\n## web_search", "current_position", "No input artifacts", "no tools"},
		},
		{
			name:   "bare",
			prompt: Build(bare),
			has: []string{
				"You have no tools in this step.",
				"It holds the 3 most recent messages for you",
				"No input artifacts for this step.",
				"JSON Schema: " + bare.SchemaPath + "\n",
				"validates against the schema",
			},
			lacks: []string{"You may use these tools", "### ", "Keep every heading", "## Run inputs"},
		},
		{
			name: "run inputs",
			prompt: Build(func() Context {
				c := bareContext()
				c.RunInputs = map[string]any{"topic": "durable agents\nat scale", "pages": 3, "draft": true}
				return c
			}()),
			has: []string{"## Run inputs\n\nThe run was started with these inputs:\n\n- draft: true\n- pages: 3\n- topic: durable agents at scale\n"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, s := range tt.has {
				if !strings.Contains(tt.prompt, s) {
					t.Errorf("prompt lacks %q", s)
				}
			}
			for _, s := range tt.lacks {
				if strings.Contains(tt.prompt, s) {
					t.Errorf("prompt has %q", s)
				}
			}
		})
	}
}

func TestDemote(t *testing.T) {
	tests := []struct {
		name string
		in   string
		want string
	}{
		{"heading", "## web_search\n\nSearches the web.", "### web_search\n\nSearches the web."},
		{"every level", "# a\n## b\n### c", "## a\n### b\n#### c"},
		{"text untouched", "Use `## x` in text.\n**Parameters**", "Use `## x` in text.\n**Parameters**"},
		{
			name: "backtick fence",
			in:   "## tool\n```markdown\n## inside\n# also inside\n```\n## after",
			want: "### tool\n```markdown\n## inside\n# also inside\n```\n### after",
		},
		{
			name: "tilde fence",
			in:   "## tool\n~~~\n## inside\n~~~\n## after",
			want: "### tool\n~~~\n## inside\n~~~\n### after",
		},
		{
			name: "tilde does not close a backtick fence",
			in:   "```\n## inside\n~~~\n## still inside\n```\n## after",
			want: "```\n## inside\n~~~\n## still inside\n```\n### after",
		},
		{
			name: "indented fence",
			in:   "  ```\n## inside\n  ```\n## after",
			want: "  ```\n## inside\n  ```\n### after",
		},
		{
			name: "unclosed fence runs to the end",
			in:   "## tool\n```\n## inside",
			want: "### tool\n```\n## inside",
		},
		{"empty", "", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, demote(tt.in)); diff != "" {
				t.Errorf("demote(%q) (-want +got):\n%s", tt.in, diff)
			}
		})
	}
}
