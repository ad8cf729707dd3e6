package agentdef

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

const okDir = "testdata/ok"

// refinePrompt uses template variables and JSON braces, which Load accepts.
const refinePrompt = `You refine {backlogItem.title} with {context.language} in mind; answer {"questions": []}.`

func loadOK(t *testing.T) *Set {
	t.Helper()
	s, err := Load(okDir)
	if err != nil {
		t.Fatalf("Load(%s): %v", okDir, err)
	}
	return s
}

func TestLoadInheritsEveryUnsetField(t *testing.T) {
	s := loadOK(t)
	v := func(f string) string { return okDir + "/agents/variants/" + f }
	implOutput := &Output{Type: "implementation", Schema: "# Implementation"}
	tests := []struct {
		id   string
		want Agent
	}{
		{"planning-default", Agent{
			ID: "planning-default", Name: "Planning Agent", State: "Planning",
			Description: "Breaks down tasks into actionable implementation steps",
			Prompt:      "You are a planning agent.\n",
			Output:      &Output{Type: "plan", Schema: "# Implementation Plan\n"},
			MCPServers:  []string{"context7"}, MaxTurns: 30,
			File: okDir + "/agents/defaults/planning.yml",
		}},
		{"refining-default", Agent{
			ID: "refining-default", Name: "Refining Agent", BacklogState: "Refining",
			Prompt: refinePrompt, File: okDir + "/agents/defaults/refining.yml",
		}},
		// Sets name, state, description, prompt and mcp_servers; inherits
		// output and max_turns.
		{"implementing-angular", Agent{
			ID: "implementing-angular", Name: "Angular Implementation Agent", State: "Implementing",
			Description: "Implements features using Angular best practices",
			Prompt:      "You are an Angular implementation agent.",
			Output:      implOutput, MCPServers: []string{"angular-cli", "primeng"}, MaxTurns: 50,
			Extends: "implementing-default",
			Match:   &Match{Framework: "angular", Files: []string{"angular.json", "package.json"}},
			File:    v("implementing.angular.yml"), Variant: true,
		}},
		// Sets nothing but its match: inherits every field.
		{"implementing-angular-files", Agent{
			ID: "implementing-angular-files", Name: "Implementation Agent", State: "Implementing",
			Description: "Implements the plan", Prompt: "You implement the plan.",
			Output: implOutput, MCPServers: []string{"context7", "git"}, MaxTurns: 50,
			Extends: "implementing-default", Match: &Match{Files: []string{"angular.json"}},
			File: v("implementing.angular-files.yml"), Variant: true,
		}},
		// Inherits through a chain; output replaces the parent's as a
		// whole (no schema is left of it).
		{"implementing-angular-pkg", Agent{
			ID: "implementing-angular-pkg", Name: "Angular Implementation Agent", State: "Implementing",
			Description: "Implements features using Angular best practices",
			Prompt:      "You are an Angular implementation agent.",
			Output:      &Output{Type: "general"}, MCPServers: []string{"angular-cli", "primeng"}, MaxTurns: 50,
			Extends: "implementing-angular", Match: &Match{Files: []string{"angular.json", "package.json"}},
			File: v("implementing.angular-pkg.yml"), Variant: true,
		}},
		// An empty mcp_servers replaces the parent's list.
		{"implementing-ts", Agent{
			ID: "implementing-ts", Name: "Implementation Agent", State: "Implementing",
			Description: "Implements the plan", Prompt: "You implement the plan.",
			Output: implOutput, MCPServers: []string{}, MaxTurns: 10,
			Extends: "implementing-default", Match: &Match{Language: "typescript"},
			File: v("implementing.typescript.yml"), Variant: true,
		}},
		// backlog_state replaces the parent's state: one setting.
		{"splitting-from-planning", Agent{
			ID: "splitting-from-planning", Name: "Planning Agent", BacklogState: "Splitting",
			Description: "Breaks down tasks into actionable implementation steps",
			Prompt:      "You are a planning agent.\n",
			Output:      &Output{Type: "plan", Schema: "# Implementation Plan\n"},
			MCPServers:  []string{"context7"}, MaxTurns: 30,
			Extends: "planning-default", Match: &Match{Framework: "dotnet"},
			File: v("planning-to-splitting.yml"), Variant: true,
		}},
		{"refining-strict", Agent{
			ID: "refining-strict", Name: "Strict Refining Agent", BacklogState: "Refining",
			Description: "Refines with strict acceptance criteria", Prompt: refinePrompt,
			Extends: "refining-default", Match: &Match{Language: "csharp"},
			File: v("refining.strict.yml"), Variant: true,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.id, func(t *testing.T) {
			got := s.Agent(tt.id)
			if got == nil {
				t.Fatalf("no agent %s", tt.id)
			}
			if diff := cmp.Diff(&tt.want, got); diff != "" {
				t.Errorf("agent %s (-want +got):\n%s", tt.id, diff)
			}
		})
	}
	var ids []string
	for _, a := range s.Agents() {
		ids = append(ids, a.ID)
	}
	want := []string{"implementing-angular", "implementing-angular-files", "implementing-angular-pkg", "implementing-default",
		"implementing-dotnet", "implementing-go-a", "implementing-go-b", "implementing-ng", "implementing-react", "implementing-ts",
		"planning-default", "refining-default", "refining-strict", "splitting-from-planning"}
	if diff := cmp.Diff(want, ids); diff != "" {
		t.Errorf("Agents (-want +got):\n%s", diff)
	}
}

func TestResolvePicksTheMostSpecificVariant(t *testing.T) {
	s := loadOK(t)
	tests := []struct {
		name  string
		state string
		ctx   Context
		want  string
		why   string
	}{
		{"no variant matches: the default", "Implementing", Context{Language: "python"},
			"implementing-default", "implementing-default is the default agent of Implementing; none of its 9 variants matches"},
		{"a state without variants", "Planning", Context{Language: "go"},
			"planning-default", "planning-default is the default agent of Planning and it has no variants"},
		{"a language match beats the default", "Implementing", Context{Language: "TypeScript"},
			"implementing-ts", "variant implementing-ts matches language typescript; it wins over the default implementing-default"},
		{"a framework match beats a language match", "Implementing", Context{Language: "typescript", Framework: "react"},
			"implementing-react", "variant implementing-react matches framework react and is the most specific of 2 matching variants (next: implementing-ts, it matches a framework); it wins over the default implementing-default"},
		{"a files match beats a framework match", "Implementing", Context{Framework: "angular", Files: []string{"angular.json", "src/main.ts"}},
			"implementing-angular-files", "variant implementing-angular-files matches files angular.json and is the most specific of 2 matching variants (next: implementing-ng, it matches files); it wins over the default implementing-default"},
		{"files and framework beat files alone", "Implementing", Context{Framework: "angular", Files: []string{"angular.json", "package.json"}},
			"implementing-angular", "variant implementing-angular matches files angular.json, package.json and framework angular and is the most specific of 4 matching variants (next: implementing-angular-pkg, it matches a framework); it wins over the default implementing-default"},
		{"more conditions win", "Implementing", Context{Files: []string{"angular.json", "package.json"}},
			"implementing-angular-pkg", "variant implementing-angular-pkg matches files angular.json, package.json and is the most specific of 2 matching variants (next: implementing-angular-files, it has more conditions (2 to 1)); it wins over the default implementing-default"},
		{"equally specific: the smaller id", "Implementing", Context{Language: "go"},
			"implementing-go-a", "variant implementing-go-a matches language go and is the most specific of 2 matching variants (next: implementing-go-b, equally specific, the smaller id wins); it wins over the default implementing-default"},
		{"a files pattern", "Implementing", Context{Files: []string{"App.csproj"}},
			"implementing-dotnet", "variant implementing-dotnet matches files *.csproj; it wins over the default implementing-default"},
		{"a pattern does not reach into folders", "Implementing", Context{Files: []string{"src/App.csproj"}},
			"implementing-default", "implementing-default is the default agent of Implementing; none of its 9 variants matches"},
		{"a backlog state", "Refining", Context{Language: "csharp"},
			"refining-strict", "variant refining-strict matches language csharp; it wins over the default refining-default"},
		{"a backlog state without a default", "Splitting", Context{Framework: "dotnet"},
			"splitting-from-planning", "variant splitting-from-planning matches framework dotnet"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, r, err := s.Resolve(tt.state, tt.ctx)
			if err != nil {
				t.Fatal(err)
			}
			if a.ID != tt.want || r.Winner != tt.want {
				t.Errorf("Resolve = %s (reason winner %s), want %s", a.ID, r.Winner, tt.want)
			}
			if r.Why != tt.why {
				t.Errorf("Why =\n%s\nwant\n%s", r.Why, tt.why)
			}
			if r.Variant != a.Variant {
				t.Errorf("Reason.Variant = %v for agent %s", r.Variant, a.ID)
			}
		})
	}
}

func TestResolveListsTheCandidates(t *testing.T) {
	s := loadOK(t)
	_, r, err := s.Resolve("Implementing", Context{Language: "typescript", Framework: "angular", Files: []string{"angular.json"}})
	if err != nil {
		t.Fatal(err)
	}
	want := []Candidate{
		{ID: "implementing-angular-files", Variant: true, Matched: true, Detail: "files angular.json"},
		{ID: "implementing-ng", Variant: true, Matched: true, Detail: "framework Angular"},
		{ID: "implementing-ts", Variant: true, Matched: true, Detail: "language typescript"},
		{ID: "implementing-angular", Variant: true, Detail: "no file package.json in the repository"},
		{ID: "implementing-angular-pkg", Variant: true, Detail: "no file package.json in the repository"},
		{ID: "implementing-dotnet", Variant: true, Detail: "no file *.csproj in the repository"},
		{ID: "implementing-go-a", Variant: true, Detail: "language go, not typescript"},
		{ID: "implementing-go-b", Variant: true, Detail: "language go, not typescript"},
		{ID: "implementing-react", Variant: true, Detail: "framework react, not angular"},
		{ID: "implementing-default", Matched: true, Detail: "the default agent of the state"},
	}
	if diff := cmp.Diff(want, r.Candidates); diff != "" {
		t.Errorf("Candidates (-want +got):\n%s", diff)
	}
}

func TestResolveErrors(t *testing.T) {
	s := loadOK(t)
	tests := []struct {
		state string
		ctx   Context
		want  string
	}{
		{"Reviewing", Context{}, `no agent handles the state "Reviewing" (states: Implementing, Planning, Refining, Splitting)`},
		{"Splitting", Context{Framework: "angular"}, `no variant of state "Splitting" matches and it has no default agent (in agents/defaults)`},
	}
	for _, tt := range tests {
		_, _, err := s.Resolve(tt.state, tt.ctx)
		if err == nil || err.Error() != tt.want {
			t.Errorf("Resolve(%s) error = %v, want %s", tt.state, err, tt.want)
		}
	}
}

func TestLoadReportsEveryProblemWithItsPlace(t *testing.T) {
	tests := []struct {
		dir  string
		want []string
	}{
		{"unknown_key", []string{
			`agents/defaults/planning.yml:5:1: mcp_server: unknown key (did you mean "mcp_servers"?)`,
			`agents/defaults/planning.yml:9:3: output: unknown key "format" (known keys: type, schema)`,
		}},
		{"wrong_type", []string{
			`agents/defaults/planning.yml:5:12: max_turns: want a positive integer, got the string "thirty"`,
			`agents/defaults/planning.yml:6:14: mcp_servers: want a list of strings, got the string "context7"`,
			`agents/variants/planning.go.yml:4:13: match.language: want a string, got a list`,
			`agents/variants/planning.go.yml:5:9: output: want a mapping, got the string "plan"`,
		}},
		{"missing", []string{
			`agents/defaults/planning.yml:1:1: name: missing required key`,
			`agents/defaults/planning.yml:1:1: prompt: missing required key`,
			`agents/defaults/refining.yml:1:1: id: missing required key`,
			`agents/variants/planning.go.yml:1:1: match: missing required key: a variant says which repositories it is for`,
		}},
		{"both_states", []string{
			`agents/defaults/planning.yml:4:1: backlog_state: an agent has either state (a task agent) or backlog_state (a backlog item agent), not both`,
		}},
		{"unknown_extends", []string{
			`agents/variants/planning.go.yml:2:1: extends: no agent has id "planing-default" (did you mean "planning-default"?)`,
		}},
		{"cycle", []string{
			`agents/variants/a.yml:2:1: extends: extends forms a cycle: planning-a → planning-b → planning-c → planning-a`,
			`agents/variants/self.yml:2:1: extends: extends forms a cycle: planning-self → planning-self`,
		}},
		{"duplicates", []string{
			`agents/defaults/planning.yml:5:1: name: duplicate key (first at line 2)`,
			`agents/defaults/planning2.yml:1:1: state: state "Planning" already has the default agent "planning-default" (testdata/duplicates/agents/defaults/planning.yml:1:1); put other agents for it in agents/variants`,
			`agents/defaults/planning2.yml:5:1: match: only variants (agents/variants) have match; a default agent is the one used when no variant matches`,
			`agents/variants/planning.go.yml:1:1: id: duplicate id "planning-default" (first at testdata/duplicates/agents/defaults/planning.yml:1:1)`,
		}},
		{"syntax", []string{
			`agents/defaults/empty.yml: the file is empty; want one agent (id, name, state, prompt …)`,
			`agents/defaults/planning.yml:3: mapping values are not allowed in this context`,
		}},
		{"prompt_vars", []string{
			// A folded block does not keep the prompt's lines: the key's place.
			`agents/defaults/implementing.yml:4:1: prompt: line 1, column 15 of the prompt: unknown variable {artifacts.plans} (did you mean {artifacts.plan}?)`,
			// A literal block, indented more on one line and with non-ASCII text.
			`agents/defaults/planning.yml:7:14: prompt: unknown variable {task.titel} (did you mean {task.title}?)`,
			`agents/defaults/planning.yml:9:16: prompt: unknown variable {context.lang} (did you mean {context.language}?)`,
			// A literal block with an indentation indicator.
			`agents/defaults/refining.yml:6:7: prompt: {task.title}: a backlog item agent (backlog_state) has no task, so its prompt cannot use {task.…} variables`,
			// Escapes in a double-quoted value: the key's place.
			`agents/defaults/reviewing.yml:4:1: prompt: line 1, column 9 of the prompt: unknown variable {task.titel} (did you mean {task.title}?)`,
			// A plain one-line value.
			`agents/defaults/splitting.yml:4:41: prompt: unknown variable {context.lang} (did you mean {context.language}?)`,
			`agents/defaults/splitting.yml:4:61: prompt: {task.title}: a backlog item agent (backlog_state) has no task, so its prompt cannot use {task.…} variables`,
			// A single-quoted one-line value.
			`agents/defaults/testing.yml:4:15: prompt: unknown variable {task.titel} (did you mean {task.title}?)`,
			// Moving to a backlog state with a task agent's prompt; the
			// variants that inherit a prompt and its scope (refining-strict,
			// splitting-go) add nothing.
			`agents/variants/splitting.planning.yml:3:1: prompt: the prompt inherited from "planning-default" uses ` +
				`{task.titel} (testdata/prompt_vars/agents/defaults/planning.yml:7:14), {task.title} (testdata/prompt_vars/agents/defaults/planning.yml:10:17), ` +
				`but a backlog item agent has no task: give this agent a prompt of its own`,
		}},
		{"no_defaults", []string{
			`agents/defaults: the folder is missing; it holds the default agent of each state, one .yml file each`,
		}},
		{"empty_defaults", []string{
			`agents/defaults: the folder has no .yml files; it holds the default agent of each state, one .yml file each`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			dir := "testdata/" + tt.dir
			s, err := Load(dir)
			if s != nil {
				t.Errorf("Load returned a set with its error")
			}
			var ps Problems
			if !errors.As(err, &ps) {
				t.Fatalf("Load error = %v (%T), want Problems", err, err)
			}
			var got []string
			for _, p := range ps {
				got = append(got, strings.TrimPrefix(p.String(), dir+"/"))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}

func TestLoadPlacesPromptProblems(t *testing.T) {
	const head = "id: planning-default\nname: Planning\nstate: Planning\n"
	tests := []struct {
		name  string
		files map[string]string // agents/… → content
		want  []string
	}{
		{"CRLF line breaks", map[string]string{
			"defaults/planning.yml": strings.ReplaceAll(head+"prompt: |\n  Hi\n  Hi {task.titel}\n", "\n", "\r\n"),
		}, []string{`defaults/planning.yml:6:6: prompt: unknown variable {task.titel} (did you mean {task.title}?)`}},
		{"a tab in a literal block", map[string]string{
			"defaults/planning.yml": head + "prompt: |\n  a\tb {task.titel}\n",
		}, []string{`defaults/planning.yml:5:7: prompt: unknown variable {task.titel} (did you mean {task.title}?)`}},
		{"a plain value over two lines", map[string]string{
			"defaults/planning.yml": head + "prompt: Hi\n  {task.titel}\n",
		}, []string{`defaults/planning.yml:4:1: prompt: line 1, column 4 of the prompt: unknown variable {task.titel} (did you mean {task.title}?)`}},
		{"a backlog item agent inheriting a folded prompt", map[string]string{
			"defaults/planning.yml":  head + "prompt: >\n  Plan\n  {task.title}.\n",
			"variants/splitting.yml": "id: splitting-go\nextends: planning-default\nbacklog_state: Splitting\nmatch: {language: go}\n",
		}, []string{`variants/splitting.yml:3:1: prompt: the prompt inherited from "planning-default" uses {task.title} ` +
			`(DIR/agents/defaults/planning.yml:4:1, line 1, column 6 of the prompt), but a backlog item agent has no task: give this agent a prompt of its own`}},
		{"a task agent inheriting a backlog item agent's prompt", map[string]string{
			"defaults/refining.yml": "id: refining-default\nname: Refining\nbacklog_state: Refining\nprompt: Refine {backlogItem.title}.\n",
			"variants/planning.yml": "id: planning-go\nextends: refining-default\nstate: Planning\nmatch: {language: go}\n",
		}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			for name, content := range tt.files {
				p := filepath.Join(dir, "agents", filepath.FromSlash(name))
				if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			_, err := Load(dir)
			var got []string
			var ps Problems
			if err != nil && !errors.As(err, &ps) {
				t.Fatalf("Load error = %v (%T), want Problems", err, err)
			}
			for _, p := range ps {
				s := strings.ReplaceAll(p.String(), filepath.ToSlash(dir), "DIR")
				got = append(got, strings.TrimPrefix(s, "DIR/agents/"))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
