package route

import (
	"fmt"
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
)

// BenchmarkLabel reads the label of each kind of source from an output of
// about 1 MiB, the label at its end: the cost the scheduler pays per step
// run on a large artifact.
func BenchmarkLabel(b *testing.B) {
	var md strings.Builder
	md.WriteString(cycleHead)
	for i := 0; md.Len() < 1<<20; i++ {
		fmt.Fprintf(&md, "\n## Iteration %d\n%s%s%s", i, orchestrator, comparator, diagnoser)
	}
	md.WriteString("\n## Verdict\nAPPROVE\n\nVerdict: APPROVE\n" + verifier)
	js := `{"notes": [` + strings.Repeat(`"a note of some length",`, 1<<20/24) + `""], "verdict": "APPROVE"}`
	for _, bc := range []struct {
		name   string
		src    agentrunner.LabelSource
		output string
	}{
		{"pointer", agentrunner.LabelSource{Pointer: "/verdict"}, js},
		{"section", agentrunner.LabelSource{Section: "Verdict"}, md.String()},
		{"field", agentrunner.LabelSource{Field: "Verdict"}, md.String()},
		{"regex", agentrunner.LabelSource{Regex: `Verdict: (\w+)`}, md.String()},
		{"signal", agentrunner.LabelSource{Parser: "signal"}, md.String()},
	} {
		x, err := Compile(&bc.src)
		if err != nil {
			b.Fatal(err)
		}
		out := []byte(bc.output)
		b.Run(bc.name, func(b *testing.B) {
			b.SetBytes(int64(len(out)))
			for b.Loop() {
				if _, err := x.Label(out); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
