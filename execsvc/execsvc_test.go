package execsvc

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// strategyFile is a strategy.json as the Synthesize step writes it: pretty
// printed, with a trailing newline and characters encoding/json escapes.
const strategyFile = "{\n  \"positions\": [{\"symbol\": \"BTC\", \"weight\": 0.5}],\n  \"note\": \"enter when price < 100 & volume > 2x\"\n}\n"

func sha(b []byte) string {
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

func TestNewSubmissionHashesTrimmedBytes(t *testing.T) {
	s, err := NewSubmission("20261122_140000", []byte(strategyFile))
	if err != nil {
		t.Fatal(err)
	}
	trimmed := strings.TrimSpace(strategyFile)
	want := Submission{CycleID: "20261122_140000", SHA256: sha([]byte(trimmed)), Strategy: json.RawMessage(trimmed)}
	if diff := cmp.Diff(want, s); diff != "" {
		t.Errorf("submission (-want +got):\n%s", diff)
	}
}

func TestNewSubmissionRejects(t *testing.T) {
	tests := []struct {
		name, cycleID, strategy, wantErr string
	}{
		{"empty cycle", "", `{}`, "cycle_id is empty"},
		{"control char in cycle", "2026\n", `{}`, "not printable ASCII"},
		{"long cycle", strings.Repeat("1", 201), `{}`, "more than 200"},
		{"array", "c1", `[1]`, "not a JSON object"},
		{"string", "c1", `"x"`, "not a JSON object"},
		{"broken", "c1", `{"a":`, "not a JSON object"},
		{"empty", "c1", "  \n", "strategy is missing"},
		{"two values", "c1", `{} {}`, "not a JSON object"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewSubmission(tt.cycleID, []byte(tt.strategy))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("err = %v, want it to contain %q", err, tt.wantErr)
			}
		})
	}
}

func TestBodyParseSubmissionRoundTripKeepsBytes(t *testing.T) {
	s, err := NewSubmission("20261122_140000", []byte(strategyFile))
	if err != nil {
		t.Fatal(err)
	}
	body, err := s.Body()
	if err != nil {
		t.Fatal(err)
	}
	got, err := ParseSubmission(body)
	if err != nil {
		t.Fatalf("ParseSubmission(Body()): %v", err)
	}
	if diff := cmp.Diff(s, got); diff != "" {
		t.Errorf("round trip (-want +got):\n%s", diff)
	}
}

// TestMarshalRoundTripBreaksHash pins the hazard the Submission doc warns
// about: encoding/json rewrites the strategy bytes, so the hash no longer
// matches and Validate says so instead of sending a wrong hash.
func TestMarshalRoundTripBreaksHash(t *testing.T) {
	s, err := NewSubmission("c1", []byte(strategyFile))
	if err != nil {
		t.Fatal(err)
	}
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var back Submission
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if err := back.Validate(); err == nil || !strings.Contains(err.Error(), "does not match") {
		t.Fatalf("Validate after json round trip = %v, want a sha256 mismatch", err)
	}
}

func TestStatusValidTerminal(t *testing.T) {
	tests := []struct {
		status          Status
		valid, terminal bool
	}{
		{StatusAcknowledged, true, false},
		{StatusExecuting, true, false},
		{StatusCompleted, true, true},
		{StatusErrored, true, true},
		{"errored", false, false},
		{"", false, false},
	}
	for _, tt := range tests {
		if got := tt.status.Valid(); got != tt.valid {
			t.Errorf("%q.Valid() = %v, want %v", tt.status, got, tt.valid)
		}
		if got := tt.status.Terminal(); got != tt.terminal {
			t.Errorf("%q.Terminal() = %v, want %v", tt.status, got, tt.terminal)
		}
	}
}

func FuzzParseSubmission(f *testing.F) {
	s, err := NewSubmission("c1", []byte(strategyFile))
	if err != nil {
		f.Fatal(err)
	}
	body, err := s.Body()
	if err != nil {
		f.Fatal(err)
	}
	f.Add(body)
	f.Add([]byte(`{"cycle_id":"c","sha256":"00","strategy":{}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, body []byte) {
		s, err := ParseSubmission(body)
		if err != nil {
			return
		}
		again, err := s.Body()
		if err != nil {
			t.Fatalf("accepted submission has no body: %v", err)
		}
		back, err := ParseSubmission(again)
		if err != nil {
			t.Fatalf("re-parse: %v", err)
		}
		if back.CycleID != s.CycleID || back.SHA256 != s.SHA256 || !bytes.Equal(back.Strategy, s.Strategy) {
			t.Fatalf("round trip changed the submission: %+v vs %+v", s, back)
		}
	})
}
