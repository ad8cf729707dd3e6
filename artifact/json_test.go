package artifact

import (
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

const strategySchema = `{
  "type": "object",
  "required": ["asset", "direction", "validity"],
  "additionalProperties": false,
  "properties": {
    "asset": {"type": "string", "minLength": 1},
    "direction": {"enum": ["long", "short", "flat"]},
    "size": {"type": "number", "minimum": 0, "maximum": 1},
    "validity": {
      "type": "object",
      "required": ["valid_until"],
      "properties": {"valid_until": {"type": "string", "format": "date-time"}}
    },
    "legs": {"type": "array", "items": {"$ref": "#/$defs/leg"}}
  },
  "$defs": {"leg": {"type": "object", "required": ["price"], "properties": {"price": {"type": "number"}}}}
}`

func TestJSONContractValidate(t *testing.T) {
	strategy, err := NewJSONContract([]byte(strategySchema), "strategy.schema.json")
	if err != nil {
		t.Fatalf("NewJSONContract: %v", err)
	}
	tests := []struct {
		name     string
		contract *JSONContract
		output   string
		want     []Problem
	}{
		{
			name:     "valid document",
			contract: strategy,
			output:   `{"asset": "BTC", "direction": "long", "size": 0.5, "validity": {"valid_until": "2025-01-01T06:00:00Z"}, "legs": [{"price": 1}]}`,
		},
		{
			name:     "syntax error with line and column",
			contract: strategy,
			output:   "{\n  \"asset\": \"BTC\",\n  \"direction\" \"long\"\n}",
			want: []Problem{{Line: 3, Column: 15,
				Message: "invalid JSON: invalid character '\"' after object key"}},
		},
		{
			name:     "truncated document",
			contract: strategy,
			output:   "{\n  \"asset\": [1, 2",
			want:     []Problem{{Line: 2, Column: 16, Message: "invalid JSON: unexpected end of JSON input"}},
		},
		{
			name:     "trailing data",
			contract: &JSONContract{},
			output:   "{}\n{}",
			want:     []Problem{{Line: 2, Column: 1, Message: "invalid JSON: invalid character '{' after top-level value"}},
		},
		{
			name:     "several schema violations reported together",
			contract: strategy,
			output: strings.Join([]string{
				`{`,                          // 1
				`  "asset": "",`,             // 2
				`  "direction": "sideways",`, // 3
				`  "size": 2,`,               // 4
				`  "validity": {"valid_until": "tomorrow"},`,       // 5
				`  "legs": [{"price": 1}, {"price": "high"}, {}],`, // 6
				`  "note": "x"`, // 7
				`}`,
			}, "\n"),
			want: []Problem{
				{Line: 1, Message: "additional properties 'note' not allowed"},
				{Line: 2, Pointer: "/asset", Message: "minLength: got 0, want 1"},
				{Line: 3, Pointer: "/direction", Message: "value must be one of 'long', 'short', 'flat'"},
				{Line: 4, Pointer: "/size", Message: "maximum: got 2, want 1"},
				{Line: 5, Pointer: "/validity/valid_until", Message: "'tomorrow' is not valid date-time: less than 20 characters long"},
				{Line: 6, Pointer: "/legs/1/price", Message: "got string, want number"},
				{Line: 6, Pointer: "/legs/2", Message: "missing property 'price'"},
			},
		},
		{
			name:     "missing required properties",
			contract: strategy,
			output:   `{"asset": "BTC", "validity": {}}`,
			want: []Problem{
				{Line: 1, Message: "missing property 'direction'"},
				{Line: 1, Pointer: "/validity", Message: "missing property 'valid_until'"},
			},
		},
		{
			name:     "unfilled placeholders in strings and keys",
			contract: &JSONContract{},
			output:   "{\n  \"cycle\": \"{{cycle_id}}\",\n  \"{{key}}\": [\"a\", \"b {{x}} c\"]\n}",
			want: []Problem{
				{Line: 2, Pointer: "/cycle", Message: "unfilled placeholder {{cycle_id}}"},
				{Line: 3, Pointer: "/{{key}}", Message: "unfilled placeholder {{key}}"},
				{Line: 3, Pointer: "/{{key}}/1", Message: "unfilled placeholder {{x}}"},
			},
		},
		{
			name:     "pointer escaping",
			contract: mustJSONContract(t, `{"properties": {"a/b~c": {"type": "string"}}}`),
			output:   `{"a/b~c": 1}`,
			want:     []Problem{{Line: 1, Pointer: "/a~1b~0c", Message: "got number, want string"}},
		},
		{
			name:     "without schema any well-formed JSON is valid",
			contract: &JSONContract{},
			output:   `[1, "two", {"three": null}]`,
		},
		{
			name:     "empty artifact",
			contract: strategy,
			output:   "\n  ",
			want:     []Problem{{Message: "artifact is empty"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.contract.Validate([]byte(tt.output))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Validate() problems (-want +got):\n%s", diff)
			}
		})
	}
}

func mustJSONContract(t *testing.T, schema string) *JSONContract {
	t.Helper()
	c, err := NewJSONContract([]byte(schema), "test.schema.json")
	if err != nil {
		t.Fatalf("NewJSONContract(%s): %v", schema, err)
	}
	return c
}

func TestNewJSONContractErrors(t *testing.T) {
	tests := []struct {
		name   string
		schema string
		want   []string // substrings of the error message
	}{
		{"empty", "  ", []string{"JSON Schema bad.json is empty"}},
		{"not JSON", "{\n  \"type\": }", []string{"JSON Schema bad.json is not valid JSON", "line 2, column 11"}},
		{"invalid keyword value", `{"type": 5}`, []string{"JSON Schema bad.json does not compile", "/type"}},
		{"invalid regex", `{"properties": {"a": {"pattern": "("}}}`, []string{"does not compile", "not valid regex"}},
		{"dangling reference", `{"$ref": "#/$defs/missing"}`, []string{"does not compile", "missing"}},
		{"remote reference is not fetched", `{"$ref": "http://127.0.0.1:1/leg.json"}`,
			[]string{"does not compile", "refusing to load http://127.0.0.1:1/leg.json", "self-contained"}},
		{"file reference is not read", `{"$ref": "other.schema.json"}`,
			[]string{"does not compile", "refusing to load", "other.schema.json"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := NewJSONContract([]byte(tt.schema), "bad.json")
			if err == nil {
				t.Fatal("NewJSONContract() succeeded, want an error")
			}
			if code := agentrunner.ErrorCode(err); code != agentrunner.EINVALID {
				t.Errorf("error code = %q, want %q", code, agentrunner.EINVALID)
			}
			for _, s := range tt.want {
				if !strings.Contains(err.Error(), s) {
					t.Errorf("error %q does not mention %q", err, s)
				}
			}
		})
	}
}

func TestJSONContractDraftFromSchema(t *testing.T) {
	// A draft-07 schema keeps draft-07 semantics: "items" as an array is a
	// tuple there, which 2020-12 would reject at compile time.
	c := mustJSONContract(t, `{"$schema": "http://json-schema.org/draft-07/schema#", "items": [{"type": "string"}]}`)
	want := []Problem{{Line: 1, Pointer: "/0", Message: "got number, want string"}}
	if diff := cmp.Diff(want, c.Validate([]byte(`[1, 2]`))); diff != "" {
		t.Errorf("Validate() (-want +got):\n%s", diff)
	}
}
