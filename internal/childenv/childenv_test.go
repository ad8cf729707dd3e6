package childenv

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestBuild(t *testing.T) {
	environ := []string{
		"PATH=/usr/bin", "HOME=/home/op", "LANG=C.UTF-8", "TZ=UTC", "TMPDIR=/tmp",
		"LC_ALL=C", "USER=op", "OPENAI_API_KEY=sk-runner", "AGENTRUNNER_KEY_ALICE=alice-key",
		"GITHUB_TOKEN=ghp-runner", "EMPTY=", "=C:=C:\\", "NOEQUALS",
	}
	tests := []struct {
		name  string
		extra []string
		specs []Spec
		want  []string
	}{
		{
			name: "base only",
			want: []string{"PATH=/usr/bin", "HOME=/home/op", "LANG=C.UTF-8", "TZ=UTC", "TMPDIR=/tmp", "LC_ALL=C"},
		},
		{
			name:  "passed, set and extra",
			extra: []string{"AGENTRUNNER_OUTPUT=/out", "PWD=/work"},
			specs: []Spec{{Pass: []string{"GITHUB_TOKEN", "UNSET_VAR", "EMPTY"}, Set: map[string]string{"MODE": "fast"}}},
			want: []string{
				"PATH=/usr/bin", "HOME=/home/op", "LANG=C.UTF-8", "TZ=UTC", "TMPDIR=/tmp", "LC_ALL=C",
				"GITHUB_TOKEN=ghp-runner", "EMPTY=", "MODE=fast", "AGENTRUNNER_OUTPUT=/out", "PWD=/work",
			},
		},
		{
			name:  "later wins: set over passed base, extra over set",
			extra: []string{"HOME=/attempt"},
			specs: []Spec{{Set: map[string]string{"TZ": "Europe/Paris", "HOME": "/set"}}, {Pass: []string{"USER"}, Set: map[string]string{"TZ": "Asia/Tokyo"}}},
			want:  []string{"PATH=/usr/bin", "HOME=/attempt", "LANG=C.UTF-8", "TZ=Asia/Tokyo", "TMPDIR=/tmp", "LC_ALL=C", "USER=op"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := Build(environ, tt.extra, tt.specs...)
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Build (-want +got):\n%s", diff)
			}
		})
	}
}

// TestBuildWith: the passed variables come from lookup (the runner's
// secrets), the base ones from environ; a passed name lookup does not
// find is absent even when environ has it, and nothing else of environ
// gets through.
func TestBuildWith(t *testing.T) {
	environ := []string{"PATH=/usr/bin", "HOME=/home/op", "GITHUB_TOKEN=ghp-env", "OPENAI_API_KEY=sk-runner"}
	secrets := map[string]string{"GITHUB_TOKEN": "ghp-rotated", "BRAVE_API_KEY": "from-the-file"}
	lookup := func(name string) (string, bool) { v, ok := secrets[name]; return v, ok }
	got := BuildWith(lookup, environ, []string{"AGENTRUNNER_OUTPUT=/out"},
		Spec{Pass: []string{"GITHUB_TOKEN", "BRAVE_API_KEY", "HOME"}, Set: map[string]string{"MODE": "fast"}})
	want := []string{"PATH=/usr/bin", "GITHUB_TOKEN=ghp-rotated", "BRAVE_API_KEY=from-the-file", "MODE=fast", "AGENTRUNNER_OUTPUT=/out"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("BuildWith (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(Build(environ, nil, Spec{Pass: []string{"GITHUB_TOKEN"}}), BuildWith(nil, environ, nil, Spec{Pass: []string{"GITHUB_TOKEN"}})); diff != "" {
		t.Errorf("BuildWith without a lookup is not Build (-Build +BuildWith):\n%s", diff)
	}
}

func TestCheck(t *testing.T) {
	tests := []struct {
		name string
		spec Spec
		want []string
	}{
		{name: "valid", spec: Spec{Pass: []string{"A_1", "_B"}, Set: map[string]string{"C": "x"}}},
		{
			name: "every problem",
			spec: Spec{Pass: []string{"1A", "A=B", "", "BOTH"}, Set: map[string]string{"BOTH": "x", "NUL": "a\x00b", "bad name": "x"}},
			want: []string{
				`pass: "1A" is not an environment variable name`,
				`pass: "A=B" is not an environment variable name`,
				`pass: "" is not an environment variable name`,
				"BOTH is both passed and set",
				"set: the value of NUL contains a NUL byte",
				`set: "bad name" is not an environment variable name`,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, Check(tt.spec)); diff != "" {
				t.Errorf("Check (-want +got):\n%s", diff)
			}
		})
	}
}
