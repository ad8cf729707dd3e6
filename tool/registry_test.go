package tool

import (
	"context"
	"encoding/json"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func echo() Handler {
	return HandlerFunc(func(_ context.Context, args json.RawMessage) (string, error) {
		return string(args), nil
	})
}

func TestRegisterRefuses(t *testing.T) {
	obj := json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}}}`)
	tests := []struct {
		name    string
		spec    Spec
		handler Handler
		want    []string // substrings of the error
	}{
		{"empty name", Spec{Name: "", Parameters: obj}, echo(), []string{`tool ""`, "invalid name"}},
		{"space in name", Spec{Name: "web search", Parameters: obj}, echo(), []string{`tool "web search"`, "invalid name"}},
		{"dot in name", Spec{Name: "web.search", Parameters: obj}, echo(), []string{"invalid name"}},
		{"name too long", Spec{Name: strings.Repeat("a", 65), Parameters: obj}, echo(), []string{"invalid name"}},
		{"nil handler", Spec{Name: "t", Parameters: obj}, nil, []string{`tool "t"`, "handler is nil"}},
		{"nil handler func", Spec{Name: "t", Parameters: obj}, HandlerFunc(nil), []string{"handler is nil"}},
		{"invalid JSON schema", Spec{Name: "t", Parameters: json.RawMessage(`{"type":`)}, echo(), []string{`tool "t"`, "not valid JSON"}},
		{"trailing data", Spec{Name: "t", Parameters: json.RawMessage(`{"type":"object"} {}`)}, echo(), []string{"not valid JSON"}},
		{"not an object schema", Spec{Name: "t", Parameters: json.RawMessage(`{"type":"string"}`)}, echo(), []string{`tool "t"`, `"type": "object"`}},
		{"array schema", Spec{Name: "t", Parameters: json.RawMessage(`[]`)}, echo(), []string{`"type": "object"`}},
		{"does not compile", Spec{Name: "t", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"strin"}}}`)}, echo(), []string{`tool "t"`, "does not compile"}},
		{"bad pattern", Spec{Name: "t", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"type":"string","pattern":"("}}}`)}, echo(), []string{"does not compile"}},
		{"remote ref", Spec{Name: "t", Parameters: json.RawMessage(`{"type":"object","properties":{"q":{"$ref":"https://example.com/s.json"}}}`)}, echo(), []string{"self-contained"}},
		{"negative timeout", Spec{Name: "t", Parameters: obj, Timeout: -time.Second}, echo(), []string{"timeout -1s is negative"}},
		{"negative retries", Spec{Name: "t", Parameters: obj, Retries: -1}, echo(), []string{"retries -1 is negative"}},
		{"negative backoff", Spec{Name: "t", Parameters: obj, Backoff: -time.Second}, echo(), []string{"backoff -1s is negative"}},
		{"negative breaker", Spec{Name: "t", Parameters: obj, BreakerFailures: -1}, echo(), []string{"breaker failures -1"}},
		{"breaker without open time", Spec{Name: "t", Parameters: obj, BreakerFailures: 3}, echo(), []string{"open time must be positive"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			r := NewRegistry()
			err := r.Register(tc.spec, tc.handler)
			if err == nil {
				t.Fatal("Register succeeded, want an error")
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q does not contain %q", err, w)
				}
			}
			if len(r.Specs()) != 0 {
				t.Errorf("the refused tool was registered")
			}
		})
	}
}

func TestRegisterDuplicate(t *testing.T) {
	r := NewRegistry()
	if err := r.Register(Spec{Name: "t"}, echo()); err != nil {
		t.Fatal(err)
	}
	err := r.Register(Spec{Name: "t"}, echo())
	if err == nil || !strings.Contains(err.Error(), `tool "t" is registered twice`) {
		t.Fatalf("second Register: %v, want a duplicate error", err)
	}
}

func TestRegistrySpecs(t *testing.T) {
	r := NewRegistry()
	params := json.RawMessage(`{"type":"object","properties":{"q":{"type":"string"}},"required":["q"]}`)
	for _, s := range []Spec{
		{Name: "web_search", Description: "search", Parameters: params, Timeout: 5 * time.Second},
		{Name: "a-tool"},
		{Name: "Zed_9"},
	} {
		if err := r.Register(s, echo()); err != nil {
			t.Fatal(err)
		}
	}
	var names []string
	for _, s := range r.Specs() {
		names = append(names, s.Name)
	}
	if diff := cmp.Diff([]string{"Zed_9", "a-tool", "web_search"}, names); diff != "" {
		t.Errorf("Specs names (-want +got):\n%s", diff)
	}

	got, ok := r.Spec("a-tool")
	if !ok {
		t.Fatal("Spec(a-tool) not found")
	}
	want := Spec{Name: "a-tool", Parameters: json.RawMessage(`{"type":"object","properties":{}}`), Timeout: DefaultTimeout}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("defaults (-want +got):\n%s", diff)
	}

	got, _ = r.Spec("web_search")
	got.Parameters[0] = 'X' // a caller's change must not reach the registry
	again, _ := r.Spec("web_search")
	if diff := cmp.Diff(Spec{Name: "web_search", Description: "search", Parameters: params, Timeout: 5 * time.Second}, again); diff != "" {
		t.Errorf("web_search (-want +got):\n%s", diff)
	}
	if _, ok := r.Spec("missing"); ok {
		t.Error("Spec(missing) found")
	}
}
