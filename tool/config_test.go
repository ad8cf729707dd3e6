package tool

import (
	"encoding/json"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner/config"
	"github.com/google/go-cmp/cmp"
)

func TestFromConfig(t *testing.T) {
	defaults := Spec{
		Name:        "lookup",
		Description: "Looks things up.",
		Parameters:  json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`),
		Timeout:     10 * time.Second,
		Retries:     2,
		Backoff:     time.Second,
	}
	// with returns the defaults changed by f.
	with := func(f func(*Spec)) Spec {
		s := defaults
		f(&s)
		return s
	}
	zero, three, neg := 0, 3, -1
	tests := []struct {
		name    string
		cfg     *config.Tool
		want    Spec
		wantErr string
	}{
		{name: "nil configuration", cfg: nil, want: defaults},
		{name: "empty configuration", cfg: &config.Tool{}, want: defaults},
		{name: "name", cfg: &config.Tool{Name: "find"}, want: with(func(s *Spec) { s.Name = "find" })},
		{name: "description", cfg: &config.Tool{Description: "Finds."}, want: with(func(s *Spec) { s.Description = "Finds." })},
		{name: "parameters", cfg: &config.Tool{Parameters: config.JSON(`{"type":"object"}`)},
			want: with(func(s *Spec) { s.Parameters = json.RawMessage(`{"type":"object"}`) })},
		{name: "timeout", cfg: &config.Tool{Timeout: config.Duration(3 * time.Second)}, want: with(func(s *Spec) { s.Timeout = 3 * time.Second })},
		{name: "retries.max", cfg: &config.Tool{Retries: &config.Retries{Max: &three}}, want: with(func(s *Spec) { s.Retries = 3 })},
		{name: "retries.max zero turns retries off", cfg: &config.Tool{Retries: &config.Retries{Max: &zero}}, want: with(func(s *Spec) { s.Retries = 0 })},
		{name: "retries.backoff: the first wait", cfg: &config.Tool{Retries: &config.Retries{Backoff: []config.Duration{config.Duration(5 * time.Second), config.Duration(time.Minute)}}},
			want: with(func(s *Spec) { s.Backoff = 5 * time.Second })},
		{name: "empty retries", cfg: &config.Tool{Retries: &config.Retries{}}, want: defaults},
		{name: "breaker", cfg: &config.Tool{Breaker: config.Breaker{Failures: 4, OpenFor: config.Duration(time.Minute)}},
			want: with(func(s *Spec) { s.BreakerFailures, s.BreakerOpenFor = 4, time.Minute })},
		{name: "everything", cfg: &config.Tool{Name: "find", Description: "Finds.", Parameters: config.JSON(`{"type":"object"}`),
			Timeout: config.Duration(time.Minute), Retries: &config.Retries{Max: &zero, Backoff: []config.Duration{config.Duration(2 * time.Second)}},
			Breaker: config.Breaker{Failures: 1, OpenFor: config.Duration(time.Hour)}},
			want: Spec{Name: "find", Description: "Finds.", Parameters: json.RawMessage(`{"type":"object"}`),
				Timeout: time.Minute, Retries: 0, Backoff: 2 * time.Second, BreakerFailures: 1, BreakerOpenFor: time.Hour}},

		{name: "parameters not JSON", cfg: &config.Tool{Parameters: config.JSON(`{"type":`)},
			wantErr: `tool "lookup": parameters are not valid JSON: unexpected EOF`},
		{name: "parameters an array", cfg: &config.Tool{Name: "find", Parameters: config.JSON(`[1]`)},
			wantErr: `tool "find": parameters must be a JSON Schema object, got an array`},
		{name: "parameters a string", cfg: &config.Tool{Parameters: config.JSON(`"x"`)},
			wantErr: `tool "lookup": parameters must be a JSON Schema object, got a string`},
		{name: "parameters null", cfg: &config.Tool{Parameters: config.JSON(`null`)},
			wantErr: `tool "lookup": parameters must be a JSON Schema object, got null`},
		{name: "negative timeout", cfg: &config.Tool{Timeout: config.Duration(-time.Second)},
			wantErr: `tool "lookup": timeout must be positive, got -1s`},
		{name: "negative retries.max", cfg: &config.Tool{Retries: &config.Retries{Max: &neg}},
			wantErr: `tool "lookup": retries.max must not be negative, got -1`},
		{name: "zero retries.backoff", cfg: &config.Tool{Retries: &config.Retries{Backoff: []config.Duration{0}}},
			wantErr: `tool "lookup": retries.backoff must be positive, got 0s`},
		{name: "negative retries.backoff", cfg: &config.Tool{Retries: &config.Retries{Backoff: []config.Duration{config.Duration(-time.Second)}}},
			wantErr: `tool "lookup": retries.backoff must be positive, got -1s`},
		{name: "negative breaker.failures", cfg: &config.Tool{Breaker: config.Breaker{Failures: -2}},
			wantErr: `tool "lookup": breaker.failures must not be negative, got -2`},
		{name: "negative breaker.open_for", cfg: &config.Tool{Breaker: config.Breaker{OpenFor: config.Duration(-time.Minute)}},
			wantErr: `tool "lookup": breaker.open_for must not be negative, got -1m0s`},
		{name: "breaker without open_for", cfg: &config.Tool{Breaker: config.Breaker{Failures: 3}},
			wantErr: `tool "lookup": breaker.open_for must be positive when breaker.failures is set`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := FromConfig(defaults, tt.cfg)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				if diff := cmp.Diff(Spec{}, got); diff != "" {
					t.Errorf("a failed FromConfig returned a spec (-want +got):\n%s", diff)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("spec (-want +got):\n%s", diff)
			}
		})
	}
}

// TestFromConfigBreakerIsTakenAsConfigured checks that a configuration
// without a breaker turns off a default one: failures 0 is how
// configuration disables the breaker.
func TestFromConfigBreakerIsTakenAsConfigured(t *testing.T) {
	defaults := Spec{Name: "lookup", BreakerFailures: 5, BreakerOpenFor: time.Minute}
	got, err := FromConfig(defaults, &config.Tool{})
	if err != nil {
		t.Fatal(err)
	}
	if got.BreakerFailures != 0 || got.BreakerOpenFor != 0 {
		t.Errorf("breaker %d/%s, want off", got.BreakerFailures, got.BreakerOpenFor)
	}
	if got, _ := FromConfig(defaults, nil); got.BreakerFailures != 5 || got.BreakerOpenFor != time.Minute {
		t.Errorf("nil configuration: breaker %d/%s, want the default 5/1m0s", got.BreakerFailures, got.BreakerOpenFor)
	}
}

// TestFromConfigCopiesParameters checks that the spec does not share the
// configuration's bytes, so a later change to one cannot reach the other.
func TestFromConfigCopiesParameters(t *testing.T) {
	cfg := &config.Tool{Parameters: config.JSON(`{"type":"object"}`)}
	got, err := FromConfig(Spec{Name: "lookup"}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	cfg.Parameters[2] = 'X'
	if string(got.Parameters) != `{"type":"object"}` {
		t.Errorf("parameters %s changed with the configuration's", got.Parameters)
	}
}
