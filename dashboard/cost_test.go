package dashboard

import (
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
)

// TestCostOf: input tokens are charged at the input price but for the
// cached ones, charged at the cached price, or the input price when the
// provider names none.
func TestCostOf(t *testing.T) {
	half := 0.5
	full := &config.Prices{InputPerMTok: 2, OutputPerMTok: 8, CachedInputPerMTok: &half}
	tests := []struct {
		name   string
		usage  agentrunner.Usage
		prices *config.Prices
		want   string
	}{
		{"nothing spent", agentrunner.Usage{}, full, "$0"},
		{"input and output", agentrunner.Usage{InputTokens: 1_000_000, OutputTokens: 100_000}, full, "$2.80"},
		{"cached at its price", agentrunner.Usage{InputTokens: 1_000_000, CachedTokens: 200_000, OutputTokens: 100_000}, full, "$2.50"},
		{"cached at the input price", agentrunner.Usage{InputTokens: 1_000_000, CachedTokens: 200_000}, &config.Prices{InputPerMTok: 2}, "$2.00"},
		{"more cached than input", agentrunner.Usage{InputTokens: 10, CachedTokens: 50}, full, "$0.0000"},
		{"a cheap step", agentrunner.Usage{InputTokens: 1200, OutputTokens: 300}, full, "$0.0048"},
		{"cents", agentrunner.Usage{InputTokens: 10_000, OutputTokens: 2_000}, full, "$0.036"},
		{"free", agentrunner.Usage{InputTokens: 5000, OutputTokens: 5000}, &config.Prices{}, "$0"},
	}
	var got, want []string
	for _, tc := range tests {
		got = append(got, tc.name+": "+fmtDollars(costOf(tc.usage, tc.prices)))
		want = append(want, tc.name+": "+tc.want)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("costs (-want +got):\n%s", diff)
	}
}

// TestPricesFor: an attempt is priced by its agent's provider, a state
// step's by backlog.provider, and an agent no longer configured is not
// priced.
func TestPricesFor(t *testing.T) {
	api, state := &config.Prices{InputPerMTok: 3}, &config.Prices{InputPerMTok: 1}
	cfg := &config.Config{
		Providers: map[string]*config.Provider{"api": {Prices: api}, "cheap": {Prices: state}, "local": {}},
		Agents:    map[string]*config.Agent{"writer": {Provider: "api"}, "helper": {Provider: "local"}},
		Backlog:   &config.Backlog{Provider: "cheap"},
	}
	p := &agentrunner.Pipeline{Name: "dev", Steps: map[string]*agentrunner.Step{
		"write": {ID: "write", Kind: "agent"}, "plan": {ID: "plan", Kind: config.StepState}}}
	tests := []struct {
		step, agent string
		want        *config.Prices
	}{
		{"write", "writer", api},
		{"write", "helper", nil},
		{"plan", "Planning", state},
		{"write", "gone", nil},
		{"other", "writer", api},
	}
	price := pricesFor(cfg, p)
	for _, tc := range tests {
		if got := price(&agentrunner.Attempt{Step: tc.step, Agent: tc.agent}); got != tc.want {
			t.Errorf("step %s, agent %s: prices %v, want %v", tc.step, tc.agent, got, tc.want)
		}
	}
	if got := pricesFor(cfg, nil)(&agentrunner.Attempt{Step: "plan", Agent: "writer"}); got != api {
		t.Errorf("without the pipeline: prices %v, want the agent's", got)
	}
}

// spend records a succeeded attempt n of a run's step by agent, with its
// usage, as an attempt's end would.
func spend(t *testing.T, w *world, run, step string, n int, agent string, u agentrunner.Usage) {
	t.Helper()
	a := &agentrunner.Attempt{CycleID: run, Step: step, Number: n, Visit: 1, Agent: agent, Status: agentrunner.AttemptSucceeded, Usage: u}
	if err := w.store.Apply(t.Context(), &agentrunner.Change{Attempts: []*agentrunner.Attempt{a}}); err != nil {
		t.Fatal(err)
	}
}

// TestRunCost: with prices, the run page shows each step's cost and the
// run's next to the tokens, marked as a lower bound when a provider has
// none; without prices, tokens only.
func TestRunCost(t *testing.T) {
	half := 0.5
	priced := func(cfg *config.Config) {
		cfg.Providers = map[string]*config.Provider{"api": {Kind: config.ProviderMock, Prices: &config.Prices{InputPerMTok: 2, OutputPerMTok: 8, CachedInputPerMTok: &half}},
			"local": {Kind: config.ProviderMock}}
		cfg.Agents = map[string]*config.Agent{"writer": {Provider: "api"}, "reviewer": {Provider: "local"}}
	}
	tests := []struct {
		name      string
		configure func(*config.Config)
		reviewer  bool
		want      []string
		wantNot   []string
	}{
		{name: "priced", configure: priced,
			want:    []string{"<dt>Cost</dt>", `<dd id="run-cost">$2.50</dd>`, `<th scope="col">Cost (USD)</th>`, `<td class="cost">$2.50</td>`, `<td class="cost" id="total-cost">$2.50</td>`},
			wantNot: []string{"≥"}},
		{name: "partly priced", configure: priced, reviewer: true,
			want: []string{`<dd id="run-cost">≥ $2.50 <span class="sub">(1 attempts ran on a provider without prices)</span></dd>`,
				`<td class="cost">—</td>`, `<td class="cost" id="total-cost">≥ $2.50</td>`}},
		{name: "no prices", reviewer: true,
			want:    []string{"1,001,000 in, 100,000 out"},
			wantNot: []string{"<dt>Cost</dt>", "Cost (USD)", `class="cost"`, "and cost"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorldWith(t, true, worldSetup{config: tc.configure})
			run := w.startRun(false)
			w.waitFor("the gate", func() bool { return w.gateWaits(run) })
			spend(t, w, run, "draft", 2, "writer", agentrunner.Usage{InputTokens: 1_000_000, CachedTokens: 200_000, OutputTokens: 100_000})
			if tc.reviewer {
				spend(t, w, run, "signoff", 2, "reviewer", agentrunner.Usage{InputTokens: 1000})
			}
			b := w.browser()
			b.login(viewerKey)
			p := b.get("/runs/" + run)
			if p.status != http.StatusOK {
				t.Fatalf("GET the run: %d\n%s", p.status, p.body)
			}
			for _, want := range tc.want {
				if !strings.Contains(p.body, want) {
					t.Errorf("the run page lacks %q", want)
				}
			}
			for _, not := range tc.wantNot {
				if strings.Contains(p.body, not) {
					t.Errorf("the run page has %q", not)
				}
			}
			attempt := b.get("/runs/" + run + "/steps/draft/attempts/2")
			if got, want := strings.Contains(attempt.body, `<dd id="attempt-cost">$2.50</dd>`), tc.configure != nil; got != want {
				t.Errorf("the attempt page shows its cost: %v, want %v", got, want)
			}
		})
	}
}
