package process

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

func TestParseArgExpandsPlaceholdersAndKeepsLiterals(t *testing.T) {
	inv := &agentrunner.Invocation{
		CycleID: "20250102_030405", Step: "plan", Agent: "planner", Attempt: 3,
		PromptPath: "/a/prompt.md", OutputPath: "/a/plan.md", Dir: "/a",
		CycleDir: "/c", MailboxPath: "/m", MemoryPath: "/mem", TemplatePath: "/t", SchemaPath: "/s",
	}
	tests := []struct {
		arg         string
		want        string
		wantUnknown []string
	}{
		{arg: "plain", want: "plain"},
		{arg: "", want: ""},
		{arg: "{prompt_file}", want: "/a/prompt.md"},
		{arg: "--out={output}", want: "--out=/a/plan.md"},
		{arg: "{dir}|{cycle_dir}|{mailbox}|{memory}|{template}|{schema}", want: "/a|/c|/m|/mem|/t|/s"},
		{arg: "{cycle_id}-{step}-{agent}-{attempt}", want: "20250102_030405-plan-planner-3"},
		{arg: "{{step}", want: "{step}"},
		{arg: "{{{step}", want: "{plan"},
		{arg: "echo ${HOME} ${step}", want: "echo ${HOME} ${step}"},
		{arg: `{"a": 1}`, want: `{"a": 1}`},
		{arg: "{} { } {1x} {", want: "{} { } {1x} {"},
		{arg: "}{step}{", want: "}plan{"},
		{arg: "{ouptut} and {Step} and {step}", want: " and  and plan", wantUnknown: []string{"ouptut", "Step"}},
	}
	for _, tt := range tests {
		t.Run(tt.arg, func(t *testing.T) {
			tmpl, unknown := parseArg(tt.arg)
			if diff := cmp.Diff(tt.wantUnknown, unknown); diff != "" {
				t.Errorf("unknown placeholders (-want +got):\n%s", diff)
			}
			if got := tmpl.expand(inv); got != tt.want {
				t.Errorf("expand(%q) = %q, want %q", tt.arg, got, tt.want)
			}
		})
	}
}

func TestReadTailKeepsTheEndFromALineBoundary(t *testing.T) {
	tests := []struct {
		name    string
		content string
		limit   int64
		want    string
	}{
		{name: "empty", content: "", limit: 16, want: ""},
		{name: "short file is whole", content: "one\ntwo\n", limit: 16, want: "one\ntwo"},
		{name: "partial first line dropped", content: "first line\nsecond\nthird\n", limit: 15, want: "second\nthird"},
		{name: "one long line is kept cut", content: strings.Repeat("x", 40) + "\n", limit: 10, want: strings.Repeat("x", 9)},
		{name: "split rune skipped", content: "ééééé", limit: 5, want: "éé"},
		{name: "invalid UTF-8 replaced", content: "a\xffb", limit: 16, want: "a\uFFFDb"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "stderr.log")
			if err := os.WriteFile(path, []byte(tt.content), 0o644); err != nil {
				t.Fatal(err)
			}
			got, err := readTail(path, tt.limit)
			if err != nil {
				t.Fatalf("readTail: %v", err)
			}
			if got != tt.want {
				t.Errorf("readTail = %q, want %q", got, tt.want)
			}
		})
	}
}

func TestReadTailOfMissingFileFails(t *testing.T) {
	if _, err := readTail(filepath.Join(t.TempDir(), "absent"), 10); err == nil {
		t.Fatal("readTail of a missing file succeeded")
	}
}
