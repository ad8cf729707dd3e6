package route

import (
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

// result is what Label gave: the label, or the error's class and text.
type result struct {
	Label string
	Class agentrunner.ErrorClass
	Err   string
}

func label(t *testing.T, src agentrunner.LabelSource, output string) result {
	t.Helper()
	x, err := Compile(&src)
	if err != nil {
		t.Fatalf("Compile(%+v): %v", src, err)
	}
	got, err := x.Label([]byte(output))
	if err != nil {
		return result{Class: agentrunner.ClassOf(err), Err: err.Error()}
	}
	return result{Label: got}
}

// failed is the result of an output that lacks its label.
func failed(msg string) result {
	return result{Class: agentrunner.ClassInvalidOutput, Err: "invalid_output: " + msg}
}

type labelCase struct {
	name   string
	src    agentrunner.LabelSource
	output string
	want   result
}

func runLabelCases(t *testing.T, cases []labelCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, label(t, tc.src, tc.output)); diff != "" {
				t.Errorf("Label (-want +got):\n%s", diff)
			}
		})
	}
}

func TestCompileRefuses(t *testing.T) {
	for _, tc := range []struct {
		name string
		src  *agentrunner.LabelSource
		want string
	}{
		{"nil", nil, "no label source: set one of pointer, section, field, regex, parser"},
		{"empty", &agentrunner.LabelSource{}, "the label source is empty: set one of pointer, section, field, regex, parser"},
		{"two", &agentrunner.LabelSource{Pointer: "/v", Regex: "x"}, "the label source sets pointer and regex: set only one"},
		{"three", &agentrunner.LabelSource{Section: "V", Field: "V", Parser: "signal"}, "the label source sets section and field and parser: set only one"},
		{"pointer without slash", &agentrunner.LabelSource{Pointer: "verdict"}, `JSON pointer "verdict" must start with / (e.g. /verdict)`},
		{"pointer bad escape", &agentrunner.LabelSource{Pointer: "/a~2b"}, `JSON pointer "/a~2b": a ~ must be followed by 0 (for ~) or 1 (for /)`},
		{"pointer trailing tilde", &agentrunner.LabelSource{Pointer: "/a~"}, `JSON pointer "/a~": a ~ must be followed by 0 (for ~) or 1 (for /)`},
		{"regex unclosed group", &agentrunner.LabelSource{Regex: `Verdict: (\w+`}, "label regex \"Verdict: (\\\\w+\": missing closing ) at \"Verdict: (\\\\w+\""},
		{"regex bad repetition", &agentrunner.LabelSource{Regex: `**x`}, `label regex "**x": missing argument to repetition operator at "*"`},
		{"regex bad escape", &agentrunner.LabelSource{Regex: `\q`}, `label regex "\\q": invalid escape sequence at "\\q"`},
		{"unknown parser", &agentrunner.LabelSource{Parser: "yaml"}, `unknown label parser "yaml"; the known parsers are: signal`},
		{"parser case", &agentrunner.LabelSource{Parser: "SIGNAL"}, `unknown label parser "SIGNAL"; the known parsers are: signal`},
		{"blank section", &agentrunner.LabelSource{Section: "  "}, `label section "  ": name a heading's text, on one line`},
		{"section with hashes", &agentrunner.LabelSource{Section: "## Verdict"}, `label section "## Verdict": name the heading's text without its #`},
		{"section on two lines", &agentrunner.LabelSource{Section: "Ver\ndict"}, `label section "Ver\ndict": name a heading's text, on one line`},
		{"field with colon", &agentrunner.LabelSource{Field: "Verdict:"}, `label field "Verdict:": name the field as it is written before its colon, on one line (e.g. Verdict)`},
		{"blank field", &agentrunner.LabelSource{Field: " "}, `label field " ": name the field as it is written before its colon, on one line (e.g. Verdict)`},
		{"field not UTF-8", &agentrunner.LabelSource{Field: "\x92"}, `label field "\x92": name the field as it is written before its colon, on one line (e.g. Verdict)`},
		{"section not UTF-8", &agentrunner.LabelSource{Section: "V\xffrdict"}, `label section "V\xffrdict": name a heading's text, on one line`},
		{"field with emphasis", &agentrunner.LabelSource{Field: "**Verdict**"}, `label field "**Verdict**": name the field without markdown emphasis`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			x, err := Compile(tc.src)
			if err == nil {
				t.Fatalf("Compile(%+v) = %v, want an error", tc.src, x)
			}
			got := [2]string{agentrunner.ErrorCode(err), err.Error()}
			if diff := cmp.Diff([2]string{agentrunner.EINVALID, tc.want}, got); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
		})
	}
}

func TestString(t *testing.T) {
	for _, tc := range []struct {
		src  agentrunner.LabelSource
		want string
	}{
		{agentrunner.LabelSource{Pointer: "/verdict"}, "the JSON pointer /verdict"},
		{agentrunner.LabelSource{Section: " Verdict "}, `the section "Verdict"`},
		{agentrunner.LabelSource{Field: "Decision"}, `the field "Decision"`},
		{agentrunner.LabelSource{Regex: `Next: (\w+)`}, `the regular expression "Next: (\\w+)"`},
		{agentrunner.LabelSource{Parser: "signal"}, "the SIGNAL BLOCK's Next field"},
	} {
		x, err := Compile(&tc.src)
		if err != nil {
			t.Fatalf("Compile(%+v): %v", tc.src, err)
		}
		if diff := cmp.Diff(tc.want, x.String()); diff != "" {
			t.Errorf("%+v: String (-want +got):\n%s", tc.src, diff)
		}
	}
}

// TestLabelIsOneShortLineOfText: whatever the source, a label is trimmed
// of space and emphasis, and what cannot name a route is refused.
func TestLabelIsOneShortLineOfText(t *testing.T) {
	re := agentrunner.LabelSource{Regex: `(?s)label=(.*?);`}
	long := strings.Repeat("x", maxLabelBytes+1)
	runLabelCases(t, []labelCase{
		{"space and emphasis", re, "label= \t**`APPROVE`** \n;", result{Label: "APPROVE"}},
		{"underscores", re, "label=__REJECT__;", result{Label: "REJECT"}},
		{"inner emphasis kept", re, "label=**A** or **B**;", result{Label: "A** or **B"}},
		{"longest allowed", re, "label=" + long[1:] + ";", result{Label: long[1:]}},
		{"empty", re, "label= ** ;", failed(`the label read from the regular expression "(?s)label=(.*?);" is empty`)},
		{"several lines", re, "label=APPROVE\nREJECT;", failed(`the label read from the regular expression "(?s)label=(.*?);" spans several lines ("APPROVE\nREJECT"); a label is one line`)},
		{"too long", re, "label=" + long + ";", failed(`the label read from the regular expression "(?s)label=(.*?);" is 257 bytes long ("` + long[:60] + `"…); a label is at most 256 bytes`)},
		{"not UTF-8", re, "label=APPR\xffVE;", failed(`the label read from the regular expression "(?s)label=(.*?);" is not valid UTF-8 text: "APPR\xffVE"`)},
	})
}
