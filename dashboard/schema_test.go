package dashboard

import (
	"net/http"
	"regexp"
	"strconv"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/workspace"
)

// planSchema is the output schema of the test's planner: a plan has a
// goal and at least one step.
const planSchema = `{"type": "object", "required": ["goal", "steps"], "additionalProperties": false,
  "properties": {"goal": {"type": "string", "minLength": 1}, "steps": {"type": "array", "minItems": 1, "items": {"type": "string"}}}}`

// planWorkspace is a workspace whose agent planner writes plan.json by
// planSchema, and whose agent notes writes notes.json without a schema.
func planWorkspace(t *testing.T) *workspace.Workspace {
	t.Helper()
	c, err := artifact.NewJSONContract([]byte(planSchema), "templates/plan.schema.json")
	if err != nil {
		t.Fatal(err)
	}
	return &workspace.Workspace{Agents: map[string]*workspace.Agent{
		"planner": {Agent: &config.Agent{Name: "planner", Output: config.Output{File: "plan.json", Template: "templates/plan.json", Schema: "templates/plan.schema.json"}},
			Schema: []byte(planSchema), Contract: c},
		"notes": {Agent: &config.Agent{Name: "notes", Output: config.Output{File: "notes.json", Template: "templates/notes.json"}}, Contract: &artifact.JSONContract{}},
	}}
}

// schemaProblems are the problems the artifact page lists under a JSON
// artifact, or nil when it shows no check.
var schemaResult = regexp.MustCompile(`(?s)<section class="card" aria-labelledby="schema-h">.*?</section>`)
var schemaItem = regexp.MustCompile(`<li><code>([^<]*)</code></li>`)

func schemaProblemsOf(body string) (checked bool, problems []string) {
	sec := schemaResult.FindString(body)
	if sec == "" {
		return false, nil
	}
	for _, m := range schemaItem.FindAllStringSubmatch(sec, -1) {
		problems = append(problems, m[1])
	}
	return true, problems
}

// TestArtifactSchemaProblems: a JSON artifact whose agent has an output
// schema is checked against it on its page, each problem listed with its
// place in the text shown; a valid one has none; an artifact of an agent
// without a schema, or of no agent, is not checked.
func TestArtifactSchemaProblems(t *testing.T) {
	w := newWorldWith(t, true, worldSetup{workspace: planWorkspace(t)})
	run := w.startRun(false)
	w.waitFor("the gate", func() bool { return w.gateWaits(run) })
	tests := []struct {
		name, file, content string
		checked             bool
		want                []string
	}{
		{name: "valid", file: "plan.json", content: `{"goal": "ship", "steps": ["build", "test"]}`, checked: true},
		{name: "breaks the schema", file: "plan.json", content: `{"goal": "", "steps": [], "owner": "me"}`, checked: true,
			want: []string{
				"line 1: additional properties &#39;owner&#39; not allowed",
				"/goal (line 2): minLength: got 0, want 1",
				"/steps (line 3): minItems: got 0, want 1",
			}},
		{name: "not JSON", file: "plan.json", content: `{"goal": "ship",`, checked: true,
			want: []string{"line 1, column 16: invalid JSON: unexpected end of JSON input"}},
		{name: "no schema", file: "notes.json", content: `{"anything": true}`},
		{name: "no agent", file: "other.json", content: `{"goal": 1}`},
	}
	b := w.browser()
	b.login(viewerKey)
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			spend(t, w, run, "draft", 10+i, "planner", agentrunner.Usage{})
			storeArtifact(t, w, run, "draft", 10+i, tc.file, tc.content)
			p := b.get("/runs/" + run + "/artifacts/" + tc.file + "?step=draft&attempt=" + strconv.Itoa(10+i))
			if p.status != http.StatusOK {
				t.Fatalf("GET the artifact: %d\n%s", p.status, p.body)
			}
			checked, got := schemaProblemsOf(p.body)
			if checked != tc.checked {
				t.Fatalf("checked: %v, want %v", checked, tc.checked)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("problems (-want +got):\n%s", diff)
			}
		})
	}
}
