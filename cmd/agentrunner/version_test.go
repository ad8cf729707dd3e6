package main

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestVersion: `version` and `--version` print the same line: the
// stamped version, else "devel", with the revision, the Go version and
// the platform.
func TestVersion(t *testing.T) {
	for _, stamped := range []string{"", "v1.2.3"} {
		old := version
		version = stamped
		t.Cleanup(func() { version = old })
		want := stamped
		if want == "" {
			want = "devel" // a test binary's main module is (devel)
		}
		prefix := "agentrunner " + want + " (revision "
		suffix := fmt.Sprintf(", %s, %s/%s)\n", runtime.Version(), runtime.GOOS, runtime.GOARCH)
		for _, args := range [][]string{{"version"}, {"--version"}} {
			code, stdout, stderr := cliRun(t, args...)
			if code != exitOK || !strings.HasPrefix(stdout, prefix) || !strings.HasSuffix(stdout, suffix) || stderr != "" {
				t.Errorf("%v with version %q: exit %d, stdout %q, stderr %q; want %q…%q", args, stamped, code, stdout, stderr, prefix, suffix)
			}
		}
	}
}

// TestRevision: the VCS revision of the build settings, marked -dirty
// when the tree had changes; unknown without one.
func TestRevision(t *testing.T) {
	tests := []struct {
		name     string
		settings []debug.BuildSetting
		want     string
	}{
		{"clean", []debug.BuildSetting{{Key: "vcs.revision", Value: "0123abcd"}, {Key: "vcs.modified", Value: "false"}}, "0123abcd"},
		{"dirty", []debug.BuildSetting{{Key: "vcs.modified", Value: "true"}, {Key: "vcs.revision", Value: "0123abcd"}}, "0123abcd-dirty"},
		{"no VCS", []debug.BuildSetting{{Key: "GOOS", Value: "linux"}}, "unknown"},
		{"modified without a revision", []debug.BuildSetting{{Key: "vcs.modified", Value: "true"}}, "unknown"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, revision(tt.settings)); diff != "" {
				t.Errorf("revision (-want +got):\n%s", diff)
			}
		})
	}
}

// TestLogFlagsAreChecked: a --log-level or --log-format that is not one
// of those listed is a usage error on any command, before it runs.
func TestLogFlagsAreChecked(t *testing.T) {
	tests := []struct {
		args []string
		says string
	}{
		{[]string{"status", "--log-level", "loud"}, `--log-level: want debug, info, warn or error, got "loud"`},
		{[]string{"--log-format", "xml", "version"}, `--log-format: want text or json, got "xml"`},
		{[]string{"cycles", "-v", "--log-level", "debug"}, "--verbose and --log-level do not go together"},
	}
	for _, tt := range tests {
		code, stdout, stderr := cliRun(t, tt.args...)
		if code != exitUsage || stdout != "" || !strings.Contains(stderr, tt.says) {
			t.Errorf("%v: exit %d, stdout %q, stderr %q; want exit 2 saying %q", tt.args, code, stdout, stderr, tt.says)
		}
	}
}
