package webhook

import (
	"encoding/json"
	"math"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// exampleSecret, exampleEvent and exampleSignedAt are the worked example of
// docs/webhooks.md; TestWorkedExample pins what the document shows.
var (
	exampleSecret   = []byte("whsec-example-0123456789abcdef")
	exampleSignedAt = time.Date(2026, 5, 1, 12, 47, 5, 0, time.UTC)
	exampleEvent    = Event{
		Kind:       KindEscalation,
		ID:         "escalation/20260501_120000/research",
		Time:       time.Date(2026, 5, 1, 12, 47, 3, 0, time.UTC),
		Pipeline:   "crypton",
		CycleID:    "20260501_120000",
		Step:       "research",
		Agent:      "research",
		Attempts:   4,
		ErrorClass: "timeout",
		Error:      "attempt 4 ran past its timeout of 30m0s",
		Inputs:     []string{"/srv/crypton/artifacts/cycles/20260501_120000/plan.md"},
		Policy:     PolicySkip,
		Fallback:   "/srv/crypton/artifacts/cycles/20260430_180000/research.md",
	}
)

const (
	exampleBody   = `{"kind":"escalation","id":"escalation/20260501_120000/research","time":"2026-05-01T12:47:03Z","pipeline":"crypton","cycle_id":"20260501_120000","step":"research","agent":"research","attempts":4,"error_class":"timeout","error":"attempt 4 ran past its timeout of 30m0s","inputs":["/srv/crypton/artifacts/cycles/20260501_120000/plan.md"],"policy":"skip","fallback":"/srv/crypton/artifacts/cycles/20260430_180000/research.md"}`
	exampleHeader = "t=1777639625,v1=727a46ce053b0ea29faebecd8b4b8e29ea98ff09271225d69b8f92fee7c41459"
)

// TestWorkedExample pins the example of docs/webhooks.md (checked by hand
// with openssl) and that the document still shows exactly these values.
func TestWorkedExample(t *testing.T) {
	body, err := exampleEvent.Body()
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(exampleBody, string(body)); diff != "" {
		t.Errorf("body (-pinned +got):\n%s", diff)
	}
	if got := Sign(exampleSecret, body, exampleSignedAt); got != exampleHeader {
		t.Errorf("Sign = %s, want %s", got, exampleHeader)
	}
	if err := Verify(exampleSecret, []byte(exampleBody), exampleHeader, exampleSignedAt.Add(time.Minute), 5*time.Minute); err != nil {
		t.Errorf("Verify of the example: %v", err)
	}
	doc, err := os.ReadFile("../docs/webhooks.md")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{exampleBody, exampleHeader, string(exampleSecret), "1777639625"} {
		if !strings.Contains(string(doc), want) {
			t.Errorf("docs/webhooks.md does not show %q", want)
		}
	}
}

func TestBodyFields(t *testing.T) {
	paris := time.FixedZone("CEST", 2*3600)
	tests := []struct {
		name string
		ev   Event
		want map[string]any
	}{
		{
			name: "minimal event leaves out what does not apply; time in UTC",
			ev:   Event{Kind: KindResumed, ID: "resumed/1", Time: time.Date(2026, 5, 1, 14, 0, 0, 500, paris), Pipeline: "p"},
			want: map[string]any{"kind": "resumed", "id": "resumed/1", "time": "2026-05-01T12:00:00.0000005Z", "pipeline": "p"},
		},
		{
			name: "strategy expired with details",
			ev: Event{
				Kind: KindStrategyExpired, ID: "strategy_expired/20260501_120000", Time: time.Date(2026, 5, 1, 18, 0, 0, 0, time.UTC),
				Pipeline: "crypton", CycleID: "20260501_120000",
				Details: map[string]any{"valid_until": "2026-05-01T18:00:00Z", "strategy_id": "s-1"},
			},
			want: map[string]any{
				"kind": "strategy_expired", "id": "strategy_expired/20260501_120000", "time": "2026-05-01T18:00:00Z",
				"pipeline": "crypton", "cycle_id": "20260501_120000",
				"details": map[string]any{"valid_until": "2026-05-01T18:00:00Z", "strategy_id": "s-1"},
			},
		},
		{
			name: "escalation with halt",
			ev: Event{
				Kind: KindEscalation, ID: "e", Time: time.Unix(0, 0), Pipeline: "p", Step: "plan", Agent: "planner",
				Attempts: 1, ErrorClass: "invalid_output", Error: "missing section <Goals> -> retry", Policy: PolicyHalt,
			},
			want: map[string]any{
				"kind": "escalation", "id": "e", "time": "1970-01-01T00:00:00Z", "pipeline": "p", "step": "plan",
				"agent": "planner", "attempts": float64(1), "error_class": "invalid_output",
				"error": "missing section <Goals> -> retry", "policy": "halt",
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			body, err := tt.ev.Body()
			if err != nil {
				t.Fatal(err)
			}
			var got map[string]any
			if err := json.Unmarshal(body, &got); err != nil {
				t.Fatalf("body is not JSON: %v\n%s", err, body)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			again, err := tt.ev.Body()
			if err != nil || string(again) != string(body) {
				t.Errorf("Body is not deterministic:\n%s\n%s", body, again)
			}
		})
	}
}

func TestBodyEscapesNoHTML(t *testing.T) {
	ev := Event{Kind: KindEscalation, ID: "e", Time: time.Unix(1, 0), Pipeline: "p", Step: "s", Policy: PolicyHalt, Error: "a -> b & <c>"}
	body, err := ev.Body()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(body), `"error":"a -> b & <c>"`) {
		t.Errorf("body escapes the error for HTML: %s", body)
	}
}

func TestBodyClipsLongError(t *testing.T) {
	ev := Event{Kind: KindEscalation, ID: "e", Time: time.Unix(1, 0), Pipeline: "p", Step: "s", Policy: PolicyHalt,
		Error: strings.Repeat("é", MaxErrorBytes)} // two bytes each
	body, err := ev.Body()
	if err != nil {
		t.Fatal(err)
	}
	var got Event
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(got.Error, "…") || len(got.Error) > MaxErrorBytes+len("…") {
		t.Errorf("error is %d bytes, want at most %d and an ellipsis", len(got.Error), MaxErrorBytes)
	}
	if strings.ContainsRune(got.Error, '\uFFFD') {
		t.Error("clipping split a character")
	}
	if ev.Error == got.Error {
		t.Error("the error was not shortened")
	}
}

func TestBodyRefusesBadEvents(t *testing.T) {
	valid := Event{Kind: KindEscalation, ID: "e-1", Time: time.Unix(1, 0), Pipeline: "p", Step: "s", Policy: PolicyHalt}
	tests := []struct {
		name   string
		change func(*Event)
		want   string
	}{
		{"no kind", func(e *Event) { e.Kind = "" }, "kind is empty"},
		{"kind with upper case", func(e *Event) { e.Kind = "Escalation" }, "character 1 is not allowed"},
		{"kind with a newline", func(e *Event) { e.Kind = "esc\nx" }, "character 4 is not allowed"},
		{"kind too long", func(e *Event) { e.Kind = strings.Repeat("a", 65) }, "more than 64"},
		{"no id", func(e *Event) { e.ID = "" }, "id is empty"},
		{"id with a newline", func(e *Event) { e.ID = "a\r\nX-Evil: 1" }, "not printable ASCII at byte 2"},
		{"id with a space at the end", func(e *Event) { e.ID = "a " }, "starts or ends with a space"},
		{"id too long", func(e *Event) { e.ID = strings.Repeat("a", MaxIDLen+1) }, "more than 200"},
		{"no time", func(e *Event) { e.Time = time.Time{} }, "time is not set"},
		{"no pipeline", func(e *Event) { e.Pipeline = "" }, "pipeline is empty"},
		{"negative attempts", func(e *Event) { e.Attempts = -1 }, "attempts is -1"},
		{"empty input", func(e *Event) { e.Inputs = []string{"a", ""} }, "inputs[1] is empty"},
		{"empty details key", func(e *Event) { e.Details = map[string]any{"": 1} }, "empty key"},
		{"unknown policy", func(e *Event) { e.Policy = "retry" }, `policy "retry" is not`},
		{"fallback with halt", func(e *Event) { e.Fallback = "x.md" }, "fallback is set but policy is \"halt\""},
		{"escalation without step", func(e *Event) { e.Step = "" }, "names no step"},
		{"escalation without policy", func(e *Event) { e.Policy = "" }, "must say its policy"},
		{"details not encodable", func(e *Event) { e.Details = map[string]any{"x": math.Inf(1)} }, "encode"},
		{"time out of range", func(e *Event) { e.Time = time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC) }, "encode"},
		{"body too large", func(e *Event) { e.Details = map[string]any{"x": strings.Repeat("a", MaxBodyBytes)} }, "more than 262144"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ev := valid
			tt.change(&ev)
			body, err := ev.Body()
			if err == nil {
				t.Fatalf("Body accepted it: %s", body)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
	if _, err := valid.Body(); err != nil {
		t.Fatalf("the valid event is refused: %v", err)
	}
}
