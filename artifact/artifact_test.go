package artifact

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

func TestProblemString(t *testing.T) {
	tests := []struct {
		p    Problem
		want string
	}{
		{Problem{Line: 12, Message: "unfilled placeholder {{x}}"}, "line 12: unfilled placeholder {{x}}"},
		{Problem{Line: 3, Column: 7, Message: "invalid JSON: oops"}, "line 3, column 7: invalid JSON: oops"},
		{Problem{Pointer: "/validity/valid_until", Message: "bad"}, "/validity/valid_until: bad"},
		{Problem{Line: 4, Pointer: "/size", Message: "too big"}, "/size (line 4): too big"},
		{Problem{Line: 14, InTemplate: true, Message: `missing section "## 3. Hypotheses to Test"`},
			`missing section "## 3. Hypotheses to Test" (template line 14)`},
		{Problem{Message: "artifact is empty"}, "artifact is empty"},
	}
	for _, tt := range tests {
		if got := tt.p.String(); got != tt.want {
			t.Errorf("%+v.String() = %q, want %q", tt.p, got, tt.want)
		}
	}
}

func TestCheck(t *testing.T) {
	c, err := NewMarkdownContract([]byte(lines("## A", "x", "## B", "{{b}}")))
	if err != nil {
		t.Fatal(err)
	}
	if err := Check(c, "plan.md", []byte(lines("## A", "a", "## B", "b"))); err != nil {
		t.Errorf("Check(valid) = %v, want nil", err)
	}
	err = Check(c, "plan.md", []byte(lines("## A", "{{a}}")))
	var verr *ValidationError
	if !errors.As(err, &verr) {
		t.Fatalf("Check(invalid) = %v, want a *ValidationError", err)
	}
	want := "artifact plan.md breaks its contract (2 problems):\n" +
		"  missing section \"## B\" (template line 3)\n" +
		"  line 2: unfilled placeholder {{a}}"
	if got := err.Error(); got != want {
		t.Errorf("Error() =\n%s\nwant\n%s", got, want)
	}
	if verr.Artifact != "plan.md" || len(verr.Problems) != 2 {
		t.Errorf("ValidationError = %+v, want artifact plan.md with 2 problems", verr)
	}
	one := &ValidationError{Artifact: "s.json", Problems: []Problem{{Message: "artifact is empty"}}}
	if got, want := one.Error(), "artifact s.json breaks its contract (1 problem):\n  artifact is empty"; got != want {
		t.Errorf("Error() = %q, want %q", got, want)
	}
}

func TestLoad(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		t.Helper()
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	planMD := write("plan.md", lines("# Plan", "## 1. Summary", "{{summary}}"))
	strategyJSON := write("strategy.json", `{"asset": "{{asset}}"}`)
	strategySchemaPath := write("strategy.schema.json", `{"type": "object", "required": ["asset"]}`)
	badSchema := write("bad.schema.json", `{"type": "nope"}`)
	emptyMD := write("empty.md", "")
	textTemplate := write("notes.txt", "x")
	missing := filepath.Join(dir, "missing.md")

	tests := []struct {
		name, template, schema string
		output                 string
		want                   []Problem
		wantErr                []string // substrings of the error
	}{
		{name: "markdown template", template: planMD, output: lines("# P", "## 1. Summary", "ok")},
		{name: "markdown template rejects", template: planMD, output: lines("# P"),
			want: []Problem{{Line: 2, InTemplate: true, Message: `missing section "## 1. Summary"`}}},
		{name: "JSON template with schema", template: strategyJSON, schema: strategySchemaPath, output: `{}`,
			want: []Problem{{Line: 1, Message: "missing property 'asset'"}}},
		{name: "JSON template without schema", template: strategyJSON, output: `{"anything": [1]}`},
		{name: "JSON template without schema rejects bad JSON", template: strategyJSON, output: `{"a" 1}`,
			want: []Problem{{Line: 1, Column: 6, Message: "invalid JSON: invalid character '1' after object key"}}},
		{name: "missing template", template: missing, wantErr: []string{missing, "unreadable"}},
		{name: "missing schema", template: strategyJSON, schema: filepath.Join(dir, "nope.json"),
			wantErr: []string{"nope.json", strategyJSON, "unreadable"}},
		{name: "schema that does not compile", template: strategyJSON, schema: badSchema,
			wantErr: []string{strategyJSON, badSchema, "does not compile"}},
		{name: "schema for a markdown template", template: planMD, schema: strategySchemaPath,
			wantErr: []string{planMD, "only to .json templates"}},
		{name: "empty markdown template", template: emptyMD, wantErr: []string{emptyMD, "template is empty"}},
		{name: "unsupported template type", template: textTemplate, wantErr: []string{textTemplate, `".txt"`}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, err := Load(tt.template, tt.schema)
			if tt.wantErr != nil {
				if err == nil {
					t.Fatal("Load() succeeded, want an error")
				}
				if code := agentrunner.ErrorCode(err); code != agentrunner.EINVALID {
					t.Errorf("error code = %q, want %q", code, agentrunner.EINVALID)
				}
				for _, s := range tt.wantErr {
					if !strings.Contains(err.Error(), s) {
						t.Errorf("error %q does not mention %q", err, s)
					}
				}
				return
			}
			if err != nil {
				t.Fatalf("Load() = %v", err)
			}
			if diff := cmp.Diff(tt.want, c.Validate([]byte(tt.output))); diff != "" {
				t.Errorf("Validate() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestHash(t *testing.T) {
	tests := []struct{ data, want string }{
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	}
	for _, tt := range tests {
		if got := Hash([]byte(tt.data)); got != tt.want {
			t.Errorf("Hash(%q) = %s, want %s", tt.data, got, tt.want)
		}
	}
}
