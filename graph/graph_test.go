package graph

import (
	"errors"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

// pipeline builds a pipeline of steps, each placed at "p.yaml:<its index+1>".
func pipeline(start string, steps ...*agentrunner.Step) *agentrunner.Pipeline {
	p := &agentrunner.Pipeline{Name: "p", Start: start, Steps: map[string]*agentrunner.Step{}, Where: "p.yaml:1"}
	for i, s := range steps {
		if s.Kind == "" {
			s.Kind = agentrunner.KindAgent
		}
		s.Where = "p.yaml:" + string(rune('2'+i))
		p.Steps[s.ID] = s
	}
	return p
}

func TestSuccessors(t *testing.T) {
	review := &agentrunner.Step{ID: "review", Label: &agentrunner.LabelSource{Pointer: "/verdict"},
		Routes: []agentrunner.Route{{When: "APPROVE", To: "publish"}, {When: "REVISE", To: "fix"}}}
	withDefault := &agentrunner.Step{ID: "review", Label: &agentrunner.LabelSource{Pointer: "/verdict"},
		Routes: []agentrunner.Route{{When: "APPROVE", To: "publish"}, {To: "fix", Otherwise: true}}}
	gateNext := &agentrunner.Step{ID: "sign", Kind: agentrunner.KindGate, Next: "ship"}
	gateRoutes := &agentrunner.Step{ID: "sign", Kind: agentrunner.KindGate,
		Routes: []agentrunner.Route{{When: "approve", To: "ship"}, {When: "reject", To: "fix"}}}
	for _, tt := range []struct {
		name    string
		step    *agentrunner.Step
		label   string
		want    []string
		wantErr string
	}{
		{"next", &agentrunner.Step{ID: "a", Next: "b"}, "", []string{"b"}, ""},
		{"next ignores the label", &agentrunner.Step{ID: "a", Next: "end"}, "anything", []string{"end"}, ""},
		{"then", &agentrunner.Step{ID: "lead", Then: []string{"web", "papers", "code"}}, "", []string{"web", "papers", "code"}, ""},
		{"route", review, "REVISE", []string{"fix"}, ""},
		{"route is exact", review, "revise", nil, `invalid_output: step review: label "revise" matches no route; the routes take "APPROVE", "REVISE"`},
		{"no label", review, "", nil, `invalid_output: step review: the output gives no routing label; the routes take "APPROVE", "REVISE"`},
		{"route before otherwise", withDefault, "APPROVE", []string{"publish"}, ""},
		{"otherwise", withDefault, "MAYBE", []string{"fix"}, ""},
		{"gate next approve", gateNext, "approve", []string{"ship"}, ""},
		{"gate next reject ends the run", gateNext, "reject", nil, ""},
		{"gate next other", gateNext, "route", nil, `invalid_output: step sign: label "route" matches no route; the routes take "approve", "reject"`},
		{"gate routes reject", gateRoutes, "reject", []string{"fix"}, ""},
		{"nothing follows", &agentrunner.Step{ID: "a"}, "", nil, "config: step a has no next, routes or then: nothing follows it"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Successors(tt.step, tt.label)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Successors (-want +got):\n%s", diff)
			}
			if errString(err) != tt.wantErr {
				t.Errorf("err = %q, want %q", errString(err), tt.wantErr)
			}
			if err != nil && agentrunner.ClassOf(err).Retryable() {
				t.Errorf("class %s is retried; the same output would fail again", agentrunner.ClassOf(err))
			}
		})
	}
}

// TestSuccessorsCopiesThen: a caller that changes the branches it got does
// not change the step.
func TestSuccessorsCopiesThen(t *testing.T) {
	s := &agentrunner.Step{ID: "lead", Then: []string{"a", "b"}}
	got, _ := Successors(s, "")
	got[0] = "x"
	if s.Then[0] != "a" {
		t.Error("Successors returned the step's own slice")
	}
}

func errString(err error) string {
	if err == nil {
		return ""
	}
	return err.Error()
}

// loop is a review ⇄ fix loop whose cap opens a gate, after a fan-out of
// two branches that join.
func loop() *agentrunner.Pipeline {
	return pipeline("lead",
		&agentrunner.Step{ID: "lead", Then: []string{"web", "code"}},
		&agentrunner.Step{ID: "web", Next: "merge"},
		&agentrunner.Step{ID: "code", Next: "merge"},
		&agentrunner.Step{ID: "merge", Join: agentrunner.JoinAll, Next: "review"},
		&agentrunner.Step{ID: "review", Label: &agentrunner.LabelSource{Field: "Verdict"}, MaxVisits: 3,
			Routes: []agentrunner.Route{{When: "APPROVE", To: "end"}, {To: "fix", Otherwise: true}},
			OnCap:  agentrunner.CapAction{To: "decide"}},
		&agentrunner.Step{ID: "fix", Next: "review", MaxVisits: 3, OnCap: agentrunner.CapAction{Halt: true}},
		&agentrunner.Step{ID: "decide", Kind: agentrunner.KindGate, Next: "end"},
	)
}

func TestIncoming(t *testing.T) {
	p := loop()
	// Two routes and on_cap of one step to the same step are one incoming step.
	twice := pipeline("a",
		&agentrunner.Step{ID: "a", Label: &agentrunner.LabelSource{Section: "Verdict"}, MaxVisits: 1, OnCap: agentrunner.CapAction{To: "b"},
			Routes: []agentrunner.Route{{When: "X", To: "b"}, {When: "Y", To: "b"}}},
		&agentrunner.Step{ID: "b", Next: "end"})
	for _, tt := range []struct {
		p    *agentrunner.Pipeline
		step string
		want []string
	}{
		{p, "merge", []string{"code", "web"}},
		{p, "review", []string{"fix", "merge"}},
		{p, "decide", []string{"review"}}, // its on_cap edge
		{p, "lead", nil},
		{p, "end", []string{"decide", "review"}},
		{twice, "b", []string{"a"}},
	} {
		if diff := cmp.Diff(tt.want, Incoming(tt.p, tt.step)); diff != "" {
			t.Errorf("Incoming(%s) (-want +got):\n%s", tt.step, diff)
		}
	}
}

func TestCyclic(t *testing.T) {
	self := pipeline("poll", &agentrunner.Step{ID: "poll", Label: &agentrunner.LabelSource{Regex: "state=(\\w+)"},
		Routes: []agentrunner.Route{{When: "done", To: "end"}, {To: "poll", Otherwise: true}}})
	// A cycle only through on_cap is a cycle: the cap's target may lead back.
	capLoop := pipeline("a",
		&agentrunner.Step{ID: "a", Next: "b"},
		&agentrunner.Step{ID: "b", Next: "end", MaxVisits: 1, OnCap: agentrunner.CapAction{To: "c"}},
		&agentrunner.Step{ID: "c", Next: "b"})
	for _, tt := range []struct {
		name string
		p    *agentrunner.Pipeline
		want map[string]bool
	}{
		{"review loop", loop(), map[string]bool{"review": true, "fix": true}},
		{"self loop", self, map[string]bool{"poll": true}},
		{"through on_cap", capLoop, map[string]bool{"b": true, "c": true}},
		{"chain", pipeline("a", &agentrunner.Step{ID: "a", Next: "b"}, &agentrunner.Step{ID: "b", Next: "end"}), map[string]bool{}},
	} {
		if diff := cmp.Diff(tt.want, Cyclic(tt.p)); diff != "" {
			t.Errorf("%s: Cyclic (-want +got):\n%s", tt.name, diff)
		}
	}
}

func TestCheckAcceptsTheShapes(t *testing.T) {
	if err := Check(loop()); err != nil {
		t.Fatal(err)
	}
}

// TestCheckAcceptsAFinalStepOnlyAnOverdueRunReaches: no edge needs to lead
// to the final step, which a run that outlives its max duration is forced
// to.
func TestCheckAcceptsAFinalStepOnlyAnOverdueRunReaches(t *testing.T) {
	p := loop()
	p.Steps["wrapup"] = &agentrunner.Step{ID: "wrapup", Kind: agentrunner.KindAgent, Next: "end", Where: "p.yaml:9"}
	p.Final, p.MaxDuration = "wrapup", time.Hour
	if err := Check(p); err != nil {
		t.Fatal(err)
	}
}

// TestCheck: each fault of a graph built by hand, at its step, in a fixed
// order, as one EINVALID error.
func TestCheck(t *testing.T) {
	for _, tt := range []struct {
		name   string
		change func(p *agentrunner.Pipeline)
		want   Faults
	}{
		{"uncapped loop", func(p *agentrunner.Pipeline) {
			p.Steps["fix"].MaxVisits, p.Steps["fix"].OnCap = 0, agentrunner.CapAction{}
		},
			Faults{{Where: "p.yaml:7", Step: "fix", Key: "max_visits", Message: "an uncapped loop: it is on a loop with review and has no max_visits; every step on a loop needs one"}}},
		{"join loses a branch", func(p *agentrunner.Pipeline) { p.Steps["web"].Next = "end" },
			Faults{{Where: "p.yaml:5", Step: "merge", Key: "join", Message: `a join without its branches: only step "code" leads to it; a join waits for two or more`}}},
		{"unreachable step", func(p *agentrunner.Pipeline) {
			p.Steps["lost"] = &agentrunner.Step{ID: "lost", Kind: agentrunner.KindAgent, Next: "end", Where: "p.yaml:9"}
		}, Faults{{Where: "p.yaml:9", Step: "lost", Message: `unreachable: no edge leads to it from the start step "lead"`}}},
		{"route to nowhere", func(p *agentrunner.Pipeline) { p.Steps["review"].Routes[1].To = "fixx" },
			Faults{
				{Where: "p.yaml:7", Step: "fix", Message: `unreachable: no edge leads to it from the start step "lead"`},
				{Where: "p.yaml:6", Step: "review", Key: "routes", Message: `a route to nowhere: the otherwise route leads to "fixx", which is not a step of the pipeline`},
			}},
		{"empty target", func(p *agentrunner.Pipeline) { p.Steps["code"].Then = []string{"", "web"}; p.Steps["code"].Next = "" },
			Faults{
				{Where: "p.yaml:4", Step: "code", Key: "then", Message: "a then branch leads nowhere: name a step or end"},
				{Where: "p.yaml:5", Step: "merge", Key: "join", Message: `a join without its branches: only step "web" leads to it; a join waits for two or more`},
			}},
		{"two ways on", func(p *agentrunner.Pipeline) { p.Steps["web"].Then = []string{"code", "merge"} },
			Faults{{Where: "p.yaml:3", Step: "web", Message: "it sets more than one of next, routes and then; a step leads on in one of these ways"}}},
		{"gate without a way out", func(p *agentrunner.Pipeline) { p.Steps["decide"].Next = "" },
			Faults{{Where: "p.yaml:8", Step: "decide", Message: "a gate with no way out: give it next (approve goes there, a reject ends the run as failed) or routes for approve and reject"}}},
		{"gate with a label", func(p *agentrunner.Pipeline) {
			p.Steps["decide"].Next = ""
			p.Steps["decide"].Label = &agentrunner.LabelSource{Field: "x"}
			p.Steps["decide"].Routes = []agentrunner.Route{{When: "approve", To: "end"}, {When: "maybe", To: "end"}}
		}, Faults{
			{Where: "p.yaml:8", Step: "decide", Key: "label", Message: "a gate's label is the operator's decision; it takes no label source"},
			{Where: "p.yaml:8", Step: "decide", Key: "routes", Message: `a gate's label is its decision, approve or reject; no decision is "maybe"`},
			{Where: "p.yaml:8", Step: "decide", Key: "routes", Message: "a gate with no way out on reject: add a route {when: reject, to: STEP} or an otherwise route"},
		}},
		{"routes without label", func(p *agentrunner.Pipeline) { p.Steps["review"].Label = nil },
			Faults{{Where: "p.yaml:6", Step: "review", Key: "label", Message: "routes without a label source: say where the routing label is read (label: {pointer, section, field, regex or parser})"}}},
		{"duplicate routes", func(p *agentrunner.Pipeline) {
			p.Steps["review"].Routes = append(p.Steps["review"].Routes, agentrunner.Route{When: "APPROVE", To: "fix"}, agentrunner.Route{To: "end", Otherwise: true})
		}, Faults{
			{Where: "p.yaml:6", Step: "review", Key: "routes", Message: `two routes take the label "APPROVE"; a label leads one way`},
			{Where: "p.yaml:6", Step: "review", Key: "routes", Message: "it has 2 otherwise routes; one is the default"},
		}},
		{"then of one", func(p *agentrunner.Pipeline) { p.Steps["lead"].Then = []string{"web"} },
			Faults{
				{Where: "p.yaml:4", Step: "code", Message: `unreachable: no edge leads to it from the start step "lead"`},
				{Where: "p.yaml:2", Step: "lead", Key: "then", Message: "then starts parallel branches and needs at least two; use next for one successor"},
			}},
		{"then twice", func(p *agentrunner.Pipeline) { p.Steps["lead"].Then = []string{"web", "code", "web"} },
			Faults{{Where: "p.yaml:2", Step: "lead", Key: "then", Message: `then names "web" twice`}}},
		{"start", func(p *agentrunner.Pipeline) { p.Start = "begin" },
			Faults{{Where: "p.yaml:1", Key: "start", Message: `start "begin" is not a step of the pipeline`}}},
		{"no start", func(p *agentrunner.Pipeline) { p.Start = "" },
			Faults{{Where: "p.yaml:1", Key: "start", Message: "start is required: the first step of a run"}}},
		{"reserved", func(p *agentrunner.Pipeline) {
			p.Steps["end"] = &agentrunner.Step{ID: "end", Kind: agentrunner.KindAgent, Next: "lead", Where: "p.yaml:9"}
		}, Faults{{Where: "p.yaml:9", Step: "end", Message: `"end" is reserved: as an edge's target it ends the branch; give the step another name`}}},
		{"join mode", func(p *agentrunner.Pipeline) { p.Steps["merge"].Join = "most" },
			Faults{{Where: "p.yaml:5", Step: "merge", Key: "join", Message: `unknown join "most" (all or any)`}}},
		{"cap", func(p *agentrunner.Pipeline) {
			p.Steps["web"].OnCap = agentrunner.CapAction{Halt: true, To: "code"}
			p.Steps["code"].MaxVisits = -1
		}, Faults{
			{Where: "p.yaml:4", Step: "code", Key: "max_visits", Message: "max_visits must not be negative, got -1"},
			{Where: "p.yaml:3", Step: "web", Key: "on_cap", Message: "on_cap is halt or a step to go to, not both"},
			{Where: "p.yaml:3", Step: "web", Key: "on_cap", Message: "on_cap applies when the step reaches its max_visits, and it has none"},
		}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			p := loop()
			tt.change(p)
			err := Check(p)
			var got Faults
			if !errors.As(err, &got) {
				t.Fatalf("Check = %v, want Faults", err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("faults (-want +got):\n%s", diff)
			}
			if agentrunner.ErrorCode(err) != agentrunner.EINVALID {
				t.Errorf("code %q, want invalid", agentrunner.ErrorCode(err))
			}
			for range 10 {
				if again := Check(p); again.Error() != err.Error() {
					t.Fatalf("a second Check says otherwise:\n%v\n%v", err, again)
				}
			}
		})
	}
}

func TestFaultString(t *testing.T) {
	err := Check(pipeline("a", &agentrunner.Step{ID: "a", Then: []string{"a"}}))
	want := "pipeline p is not a valid graph: p.yaml:2: step a: then starts parallel branches and needs at least two; use next for one successor\n" +
		"p.yaml:2: step a: an uncapped loop: it is on a loop to itself and has no max_visits; every step on a loop needs one"
	if errString(err) != want {
		t.Errorf("err =\n%v\nwant\n%v", err, want)
	}
}
