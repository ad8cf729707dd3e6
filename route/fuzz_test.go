package route

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/agentrunner/agentrunner"
	"github.com/google/go-cmp/cmp"
)

// FuzzParseSignal checks that any document either gives a signal whose
// fields are trimmed and non-empty, and which reads the same when written
// out again, or an invalid_output failure; never a panic.
func FuzzParseSignal(f *testing.F) {
	for _, doc := range []string{
		cycleHead + "\n## Iteration 1\n" + orchestrator + comparator + diagnoser,
		cycleHead + verifier,
		"SIGNAL BLOCK\nAgent=planner | Next=actor\n",
		"**SIGNAL BLOCK:**\n```\n`**Agent**=*planner* | Risk=__high__ | **Next**=**actor**`\n```\n",
		"### SIGNAL BLOCK\r\n| Next=actor | agent=planner |\r\n",
		"SIGNAL BLOCK\nAgent=planner | Next=actor\n<!--\nSIGNAL BLOCK\nAgent=x\n-->",
		"SIGNAL BLOCK\nAgent=a | Next=b | next=c\n",
		"SIGNAL BLOCK\nAgent=a || Next=\n",
		"SIGNAL BLOCK\n",
		"SIGNAL BLOCK\nAgent=\xff | Next=\xfe\n",
		"",
	} {
		f.Add([]byte(doc))
	}
	f.Fuzz(func(t *testing.T, doc []byte) {
		s, err := ParseSignal(doc)
		if err != nil {
			if c := agentrunner.ClassOf(err); c != agentrunner.ClassInvalidOutput {
				t.Fatalf("ParseSignal: error of class %s, want invalid_output: %v", c, err)
			}
			return
		}
		checkSignal(t, s)
		// The contract's check takes any parsed block without a panic,
		// and passes it or fails it as invalid output.
		err = s.Check(SignalContract{Agent: "comparator", Cycle: "2025-11-08-001", Next: []string{"diagnoser"}})
		if c := agentrunner.ClassOf(err); err != nil && c != agentrunner.ClassInvalidOutput {
			t.Fatalf("Check: error of class %s, want invalid_output: %v", c, err)
		}
		if err == nil && (s.Confidence() < 1 || s.Confidence() > 5) {
			t.Fatalf("Check passed a block whose confidence is %d", s.Confidence())
		}
		again, err := ParseSignal([]byte(render(s)))
		if err != nil {
			t.Fatalf("ParseSignal of %q, written out from %+v: %v", render(s), s, err)
		}
		again.Line = s.Line
		if diff := cmp.Diff(s, again); diff != "" {
			t.Fatalf("the signal written out reads differently (-first +again):\n%s", diff)
		}
	})
}

func checkSignal(t *testing.T, s *Signal) {
	t.Helper()
	if s.Line < 1 || s.Agent == "" || s.Next == "" {
		t.Fatalf("signal without its line, Agent or Next: %+v", s)
	}
	for _, f := range s.Fields {
		if !trimmed(f.Value) || !trimmed(f.Key) || strings.ContainsAny(f.Value, "|\n") {
			t.Fatalf("field %+v is not trimmed, empty, or holds a separator", f)
		}
	}
}

// trimmed reports whether s is non-empty text with no space or emphasis
// around it (written apart from clean, so that it checks clean).
func trimmed(s string) bool {
	ends := strings.TrimSpace(s)
	return ends == s && s != "" && !strings.ContainsAny(s[:1]+s[len(s)-1:], "*_`")
}

// render writes a signal out as an agent would.
func render(s *Signal) string {
	parts := make([]string, len(s.Fields))
	for i, f := range s.Fields {
		parts[i] = f.Key + "=" + f.Value
	}
	return "SIGNAL BLOCK\n" + strings.Join(parts, " | ") + "\n"
}

// FuzzLabel checks every kind of source on any output: a label is one
// trimmed, non-empty line of UTF-8 text, or the output is refused as
// invalid_output; a source Compile refuses is EINVALID; nothing panics.
func FuzzLabel(f *testing.F) {
	for _, seed := range []struct {
		kind        uint8
		src, output string
	}{
		{0, "/verdict", `{"verdict": "**APPROVE**"}`},
		{0, "/reviews/1/verdict", `{"reviews": [{}, {"verdict": 2.50}]}`},
		{0, "/a~1b/m~0n", `{"a/b": {"m~n": true}}`},
		{0, "/x~", `{}`},
		{1, "Verdict", "# Review\n## Verdict\n<!-- APPROVE or REJECT -->\n- **REJECT**\n"},
		{1, "Verdict", "Verdict\n===\n```\nAPPROVE\n```\n"},
		{1, "Verdict", "## Verdict\n### Reasons\n"},
		{2, "Verdict", "**Verdict:** REJECT\n- Verdict: APPROVE\r\n"},
		{2, "Score (1-5)", "> Score (1-5): 4\n"},
		{3, `Decision: (\w+)`, "Decision: approve\n"},
		{3, `(?s)label=(.*?);`, "label=a\nb;"},
		{3, `(?:x(\d))|y`, "y"},
		{4, "signal", cycleHead + orchestrator + comparator},
		{4, "yaml", "SIGNAL BLOCK\nAgent=a | Next=b\n"},
	} {
		f.Add(seed.kind, seed.src, []byte(seed.output))
	}
	f.Fuzz(func(t *testing.T, kind uint8, src string, output []byte) {
		x, err := Compile(source(kind, src))
		if err != nil {
			if code := agentrunner.ErrorCode(err); code != agentrunner.EINVALID {
				t.Fatalf("Compile: error code %s, want invalid: %v", code, err)
			}
			return
		}
		label, err := x.Label(output)
		if err != nil {
			if c := agentrunner.ClassOf(err); c != agentrunner.ClassInvalidOutput {
				t.Fatalf("%s: error of class %s, want invalid_output: %v", x, c, err)
			}
			return
		}
		if !trimmed(label) || !utf8.ValidString(label) || strings.ContainsAny(label, "\r\n") || len(label) > maxLabelBytes {
			t.Fatalf("%s: label %q is not one trimmed, non-empty, short line of text", x, label)
		}
	})
}

// source sets one field of a label source, chosen by kind.
func source(kind uint8, s string) *agentrunner.LabelSource {
	var src agentrunner.LabelSource
	*[]*string{&src.Pointer, &src.Section, &src.Field, &src.Regex, &src.Parser}[int(kind)%5] = s
	return &src
}
