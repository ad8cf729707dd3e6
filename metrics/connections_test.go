package metrics

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestConnections: the API server's connection counters are read at each
// scrape, with the pipeline label.
func TestConnections(t *testing.T) {
	m := New(Options{Pipeline: "crypton"})
	st := Connections{Limit: 128, Open: 40, Unauthenticated: 32, Evicted: 268, AtLimit: 3,
		Refused: map[string]int64{"unauthorized": 150, "misdirected": 2}}
	m.WatchConnections(func() Connections { return st })
	want := map[string]float64{
		`agentrunner_http_connections{authenticated="true",pipeline="crypton"}`:           8,
		`agentrunner_http_connections{authenticated="false",pipeline="crypton"}`:          32,
		`agentrunner_http_connection_limit{pipeline="crypton"}`:                           128,
		`agentrunner_http_connections_evicted_total{pipeline="crypton"}`:                  268,
		`agentrunner_http_connection_limit_reached_total{pipeline="crypton"}`:             3,
		`agentrunner_http_requests_refused_total{code="misdirected",pipeline="crypton"}`:  2,
		`agentrunner_http_requests_refused_total{code="unauthorized",pipeline="crypton"}`: 150,
	}
	got := snapshot(t, m.Registry())
	for k := range got {
		if _, ok := want[k]; !ok {
			delete(got, k)
		}
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("(-want +got):\n%s", diff)
	}
	st.Open, st.Unauthenticated, st.Evicted = 10, 2, 300
	got = snapshot(t, m.Registry())
	if got[`agentrunner_http_connections{authenticated="false",pipeline="crypton"}`] != 2 || got[`agentrunner_http_connections_evicted_total{pipeline="crypton"}`] != 300 {
		t.Errorf("a later scrape does not read the counters again: %v", got)
	}
}
