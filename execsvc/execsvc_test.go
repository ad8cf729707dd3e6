package execsvc

import (
	"bytes"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"strings"
	"testing"
	"time"

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

// TestValidUntilIsSentAndRead: the end of the validity window travels in
// the body as RFC 3339 in UTC, before the strategy, and is read back as the
// same instant; a submission without one sends none.
func TestValidUntilIsSentAndRead(t *testing.T) {
	const obj = `{"v":1}`
	until := time.Date(2026, 11, 22, 21, 0, 0, 500_000_000, time.FixedZone("CET", 3600))
	tests := []struct {
		name  string
		until time.Time
		body  string
	}{
		{"with window", until, `{"cycle_id":"c1","sha256":"` + sha([]byte(obj)) + `","valid_until":"2026-11-22T20:00:00.5Z","strategy":` + obj + `}`},
		{"without window", time.Time{}, `{"cycle_id":"c1","sha256":"` + sha([]byte(obj)) + `","strategy":` + obj + `}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, err := NewSubmission("c1", []byte(obj))
			if err != nil {
				t.Fatal(err)
			}
			s.ValidUntil = tt.until
			body, err := s.Body()
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.body, string(body)); diff != "" {
				t.Errorf("body (-want +got):\n%s", diff)
			}
			back, err := ParseSubmission(body)
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(s, back); diff != "" {
				t.Errorf("round trip (-want +got):\n%s", diff)
			}
		})
	}
}

func TestParseSubmissionRefusesABadValidUntil(t *testing.T) {
	const obj = `{"v":1}`
	for _, tt := range []struct{ until, wantErr string }{
		{`"tomorrow"`, `valid_until "tomorrow" is not an RFC 3339 time`},
		{`"2026-11-22"`, "is not an RFC 3339 time"},
		{`1764000000`, "not a valid submission object"},
		{`"0000-01-01T00:30:00+01:00"`, "outside 1 to 9999"},
	} {
		body := `{"cycle_id":"c1","sha256":"` + sha([]byte(obj)) + `","valid_until":` + tt.until + `,"strategy":` + obj + `}`
		if _, err := ParseSubmission([]byte(body)); err == nil || !strings.Contains(err.Error(), tt.wantErr) {
			t.Errorf("valid_until %s: err = %v, want it to contain %q", tt.until, err, tt.wantErr)
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
	f.Add([]byte(`{"cycle_id":"c","sha256":"44136fa355b3678a1146ad16f7e8649e94fb4fc21fe77e8310c060f61caaff8a","valid_until":"0000-01-01T00:30:00+01:00","strategy":{}}`))
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
		if back.CycleID != s.CycleID || back.SHA256 != s.SHA256 || !back.ValidUntil.Equal(s.ValidUntil) || !bytes.Equal(back.Strategy, s.Strategy) {
			t.Fatalf("round trip changed the submission: %+v vs %+v", s, back)
		}
	})
}
