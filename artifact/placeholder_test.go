package artifact

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestFindPlaceholders(t *testing.T) {
	tests := []struct {
		name string
		data string
		want []Placeholder
	}{
		{"none", "plain text {not one} {{ spaced }} {{}}", nil},
		{"names and lines", "id {{cycle_id}}\n\nuntil {{now+6h}} rate {{win_rate}}\n{{a.b-c}} {{cycle_id}}", []Placeholder{
			{Name: "cycle_id", Line: 1},
			{Name: "now+6h", Line: 3},
			{Name: "win_rate", Line: 3},
			{Name: "a.b-c", Line: 4},
			{Name: "cycle_id", Line: 4},
		}},
		{"other template syntax is left alone", "{{.Field}} {{#each}} {{x|y}}", []Placeholder{{Name: ".Field", Line: 1}}},
		{"triple braces", "{{{x}}}", []Placeholder{{Name: "x", Line: 1}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, FindPlaceholders([]byte(tt.data))); diff != "" {
				t.Errorf("FindPlaceholders() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestExpandPlaceholders(t *testing.T) {
	values := map[string]string{"cycle_id": "20250101_000000", "now+6h": "2025-01-01T06:00:00Z", "loop": "{{cycle_id}}"}
	value := func(name string) string {
		if v, ok := values[name]; ok {
			return v
		}
		return "{{" + name + "}}"
	}
	tests := []struct{ name, data, want string }{
		{"expands every occurrence", "{{cycle_id}}/{{cycle_id}} until {{now+6h}}", "20250101_000000/20250101_000000 until 2025-01-01T06:00:00Z"},
		{"unknown kept by the callback", "{{unknown}} {{cycle_id}}", "{{unknown}} 20250101_000000"},
		{"values are not expanded again", "{{loop}}", "{{cycle_id}}"},
		{"no placeholders", "nothing {here}", "nothing {here}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := string(ExpandPlaceholders([]byte(tt.data), value)); got != tt.want {
				t.Errorf("ExpandPlaceholders(%q) = %q, want %q", tt.data, got, tt.want)
			}
		})
	}
}
