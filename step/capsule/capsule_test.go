package capsule_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	capsules "github.com/agentrunner/agentrunner/capsule"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/sqlite"
	capsulestep "github.com/agentrunner/agentrunner/step/capsule"
	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 11, 24, 12, 0, 0, 0, time.UTC)

// checkpoint is a template with the six sections, from the run's
// request and plan.
const checkpoint = `## Objective
{{artifact:request.md#Objective}}

## Status
Checkpoint of run {{run_id}}, visit {{visit}}.

## Decisions
{{artifact:plan.md}}

## Next actions
- implement the plan

## Key locations
- engine/

## Open questions
- none
`

// env is a workspace's configuration and a real store, with one run.
type env struct {
	dir   string
	cfg   *config.Config
	store *sqlite.Store
	svc   *capsules.Service
	run   *agentrunner.Run
	files int
}

func newEnv(t *testing.T) *env {
	t.Helper()
	dir := t.TempDir()
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	e := &env{dir: dir, cfg: &config.Config{Name: "ws", Dir: dir}, store: store}
	e.svc = capsules.NewService(store, capsules.Options{Clock: clocktest.New(t0)})
	e.run = &agentrunner.Run{ID: "review-loop-000001", Pipeline: "review-loop", Dir: filepath.Join(dir, "runs", "review-loop-000001")}
	return e
}

// commit stores a version of one of the run's artifacts, as a step's
// success does.
func (e *env) commit(t *testing.T, name, data string) {
	t.Helper()
	e.files++
	f := &agentrunner.StoredFile{RunID: e.run.ID, Step: "s", Visit: e.files, Attempt: 1, Kind: agentrunner.FileArtifact,
		Name: name, Data: []byte(data), SHA256: artifact.Hash([]byte(data)), CreatedAt: t0.Add(time.Duration(e.files) * time.Second)}
	if err := e.store.Apply(context.Background(), &agentrunner.Change{Files: []*agentrunner.StoredFile{f}}); err != nil {
		t.Fatal(err)
	}
}

// step writes the template and returns a capsule step that renders it.
func (e *env) step(t *testing.T, template string, spec config.CapsuleStep) *config.Step {
	t.Helper()
	spec.Text = "checkpoint.md"
	if err := os.WriteFile(filepath.Join(e.dir, spec.Text), []byte(template), 0o644); err != nil {
		t.Fatal(err)
	}
	return &config.Step{ID: "checkpoint", Kind: config.StepCapsule, Capsule: &spec}
}

// attempt runs one attempt of the step's visit.
func (e *env) attempt(t *testing.T, s *config.Step, visit int, late bool) (*agentrunner.StepResult, error) {
	t.Helper()
	k, err := capsulestep.New(capsulestep.Options{Config: e.cfg, Store: e.store, Capsules: e.svc, Clock: clocktest.New(t0)})
	if err != nil {
		t.Fatal(err)
	}
	return k.Run(context.Background(), &agentrunner.StepAttempt{
		Run: e.run, Step: &agentrunner.Step{ID: s.ID, Kind: s.Kind, Config: s},
		StepRun: &agentrunner.StepRun{RunID: e.run.ID, Step: s.ID, Visit: visit}, RunDir: e.run.Dir, Late: late,
	})
}

const (
	request = "# Request\n\n## Objective\nAdd rate limits to the API.\n\n## Acceptance checks\n- 429 past the limit\n"
	plan    = "# Plan\n\n- add a token bucket per key\n"
)

// TestACapsuleStepRendersItsTemplate: each case commits artifacts, runs
// one attempt and wants the capsule's text (also the step's artifact),
// or the failure's class and a phrase of its message.
func TestACapsuleStepRendersItsTemplate(t *testing.T) {
	for _, tt := range []struct {
		name      string
		artifacts map[string]string
		template  string
		spec      config.CapsuleStep
		late      bool
		want      string // the text; "" when the attempt fails
		workspace string
		class     agentrunner.ErrorClass
		says      string
	}{
		{
			name: "renders", artifacts: map[string]string{"request.md": request, "plan.md": plan}, template: checkpoint,
			spec: config.CapsuleStep{Name: "feature-{run_id}", Phase: "checkpoint"}, workspace: "ws",
			want: strings.NewReplacer("{{artifact:request.md#Objective}}", "Add rate limits to the API.", "{{run_id}}", "review-loop-000001",
				"{{visit}}", "2", "{{artifact:plan.md}}", strings.TrimSpace(plan)).Replace(checkpoint),
		},
		{
			name: "in a workspace of its own", artifacts: map[string]string{"request.md": request, "plan.md": plan}, template: checkpoint,
			spec: config.CapsuleStep{Name: "feature", Workspace: "features"}, workspace: "features", want: "Checkpoint of run review-loop-000001, visit 2.",
		},
		{
			name: "a missing artifact", artifacts: map[string]string{"request.md": request}, template: checkpoint,
			spec: config.CapsuleStep{Name: "feature-{run_id}"}, class: agentrunner.ClassConfig, says: "takes the artifact plan.md, which run review-loop-000001 has not produced",
		},
		{
			name: "a missing artifact of a late run", artifacts: map[string]string{"request.md": request}, template: checkpoint, late: true,
			spec: config.CapsuleStep{Name: "feature-{run_id}"}, workspace: "ws", want: "(missing: the run ran out of time before plan.md was produced)",
		},
		{
			name: "a missing section", artifacts: map[string]string{"request.md": "# Request\n\nAdd rate limits.\n", "plan.md": plan}, template: checkpoint,
			spec: config.CapsuleStep{Name: "feature-{run_id}"}, class: agentrunner.ClassInvalidOutput, says: `request.md of run review-loop-000001 has no section "Objective"`,
		},
		{
			name: "a lint failure", artifacts: map[string]string{"request.md": request, "plan.md": plan}, template: strings.Replace(checkpoint, "## Key locations\n", "", 1),
			spec: config.CapsuleStep{Name: "feature-{run_id}"}, class: agentrunner.ClassInvalidOutput, says: "lacks the section(s) ## Key locations",
		},
		{
			name: "a name the store refuses", artifacts: map[string]string{"request.md": request, "plan.md": plan}, template: checkpoint,
			spec: config.CapsuleStep{Name: "feature-{run_id}", Tags: []string{""}}, class: agentrunner.ClassConfig, says: "tags[0] is empty",
		},
	} {
		t.Run(tt.name, func(t *testing.T) {
			e := newEnv(t)
			for name, data := range tt.artifacts {
				e.commit(t, name, data)
			}
			res, err := e.attempt(t, e.step(t, tt.template, tt.spec), 2, tt.late)
			if tt.want == "" {
				if agentrunner.ClassOf(err) != tt.class || err == nil || !strings.Contains(err.Error(), tt.says) {
					t.Fatalf("error %v (class %s), want class %s saying %q", err, agentrunner.ClassOf(err), tt.class, tt.says)
				}
				if cs, _ := e.store.Capsules(context.Background(), agentrunner.CapsuleFilter{}); len(cs) != 0 {
					t.Errorf("a failed attempt stored %d capsule(s)", len(cs))
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			c, err := e.svc.Fetch(context.Background(), tt.workspace, strings.ReplaceAll(tt.spec.Name, "{run_id}", e.run.ID))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(c.Text, tt.want) || c.Version != 1 || c.RunID != e.run.ID || c.Phase != tt.spec.Phase {
				t.Errorf("stored %+v, want version 1 of run %s, phase %q, with the text %q", c, e.run.ID, tt.spec.Phase, tt.want)
			}
			wantFile := []*agentrunner.StoredFile{{Kind: agentrunner.FileArtifact, Name: "checkpoint.capsule.md", Data: []byte(c.Text)}}
			if diff := cmp.Diff(wantFile, res.Files); diff != "" || string(res.Output) != c.Text || res.Path != filepath.Join(e.run.Dir, "checkpoint.capsule.md") {
				t.Errorf("the step's artifact (-want +got):\n%s\noutput %q at %s", diff, res.Output, res.Path)
			}
		})
	}
}

// TestACapsuleStepStoresANewVersionOnlyWhenItsTextChanged: a repeated
// attempt (after a crash) finds its text live and writes nothing; a new
// verification committed in between makes the next version.
func TestACapsuleStepStoresANewVersionOnlyWhenItsTextChanged(t *testing.T) {
	e := newEnv(t)
	e.commit(t, "request.md", request)
	s := e.step(t, checkpoint, config.CapsuleStep{Name: "feature-{run_id}", Phase: "checkpoint", Tags: []string{"feature"}})
	for i, round := range []struct {
		plan    string // committed before the attempt; "" commits nothing
		visit   int
		version int
		changed bool
	}{
		{plan: plan, visit: 1, version: 1, changed: true},
		{visit: 1, version: 1},                                                             // the same attempt again
		{plan: plan + "- verified: PARTIAL, retry\n", visit: 2, version: 2, changed: true}, // the text changed
		{plan: plan + "- verified: PARTIAL, retry\n", visit: 2, version: 2},                // a new copy, the same bytes
	} {
		if round.plan != "" {
			e.commit(t, "plan.md", round.plan)
		}
		res, err := e.attempt(t, s, round.visit, false)
		if err != nil {
			t.Fatalf("round %d: %v", i+1, err)
		}
		var stored *agentrunner.Event
		for _, ev := range res.Events {
			if ev.Type == capsulestep.EventStored {
				stored = ev
			}
		}
		if stored == nil {
			t.Fatalf("round %d: no %s event in %v", i+1, capsulestep.EventStored, res.Events)
		}
		d := stored.Details
		if d["version"] != round.version || d["changed"] != round.changed || d["name"] != "feature-"+e.run.ID || d["workspace"] != "ws" || d["id"] == int64(0) {
			t.Errorf("round %d: event details %v, want version %d, changed %v", i+1, d, round.version, round.changed)
		}
		c, err := e.svc.Fetch(context.Background(), "ws", "feature-"+e.run.ID)
		if err != nil || c.Version != round.version || string(res.Output) != c.Text {
			t.Errorf("round %d: the live capsule %+v (%v), want version %d holding the step's output", i+1, c, err, round.version)
		}
	}
}
