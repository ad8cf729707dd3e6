package route

import (
	"strings"
	"testing"

	"github.com/agentrunner/agentrunner"
)

// TestSignalCheck: each field of spec 2's SIGNAL BLOCK, valid and invalid
// in turn; an invalid one fails with an invalid_output error that names
// the field and quotes the status line.
func TestSignalCheck(t *testing.T) {
	contract := SignalContract{Agent: "comparator", Cycle: "2025-11-08-001", Next: []string{"diagnoser", "orchestrator"}}
	valid := map[string]string{"Agent": "comparator", "Cycle": "2025-11-08-001", "Step": "COMPARE", "Confidence": "4", "Risk": "medium", "Next": "diagnoser"}
	order := []string{"Agent", "Cycle", "Step", "Confidence", "Risk", "Next"}
	line := func(edit map[string]string) string {
		var parts []string
		for _, k := range order {
			v, ok := edit[k]
			if !ok {
				v = valid[k]
			}
			if v != "-" {
				parts = append(parts, k+"="+v)
			}
		}
		return strings.Join(parts, " | ")
	}
	tests := []struct {
		name  string
		edit  map[string]string // "-" leaves the field out
		field string            // "" when the block is valid
	}{
		{name: "every field valid"},
		{name: "STOP ends the cycle", edit: map[string]string{"Next": "STOP"}},
		{name: "values in another case", edit: map[string]string{"Agent": "Comparator", "Risk": "HIGH", "Next": "Diagnoser"}},
		{name: "confidence at its bounds", edit: map[string]string{"Confidence": "1"}},
		{name: "confidence 5", edit: map[string]string{"Confidence": "5"}},
		{name: "another agent signed it", edit: map[string]string{"Agent": "planner"}, field: "Agent"},
		{name: "another cycle", edit: map[string]string{"Cycle": "2025-11-07-003"}, field: "Cycle"},
		{name: "no cycle", edit: map[string]string{"Cycle": "-"}, field: "Cycle"},
		{name: "no step", edit: map[string]string{"Step": "-"}, field: "Step"},
		{name: "confidence 0", edit: map[string]string{"Confidence": "0"}, field: "Confidence"},
		{name: "confidence 6", edit: map[string]string{"Confidence": "6"}, field: "Confidence"},
		{name: "confidence not a number", edit: map[string]string{"Confidence": "high"}, field: "Confidence"},
		{name: "confidence a fraction", edit: map[string]string{"Confidence": "3.5"}, field: "Confidence"},
		{name: "no confidence", edit: map[string]string{"Confidence": "-"}, field: "Confidence"},
		{name: "unknown risk", edit: map[string]string{"Risk": "severe"}, field: "Risk"},
		{name: "no risk", edit: map[string]string{"Risk": "-"}, field: "Risk"},
		{name: "unknown next", edit: map[string]string{"Next": "actor"}, field: "Next"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status := line(tt.edit)
			s, err := ParseSignal([]byte("## Comparator Output\ntext\n\n  SIGNAL BLOCK\n   " + status + "  \n"))
			if err != nil {
				t.Fatalf("ParseSignal: %v", err)
			}
			err = s.Check(contract)
			if tt.field == "" {
				if err != nil {
					t.Fatalf("Check: %v, want none", err)
				}
				return
			}
			if agentrunner.ClassOf(err) != agentrunner.ClassInvalidOutput {
				t.Fatalf("Check: %v (class %s), want invalid output", err, agentrunner.ClassOf(err))
			}
			msg := err.Error()
			if !strings.Contains(msg, "SIGNAL BLOCK (line 4): "+tt.field+" ") || !strings.Contains(msg, status) {
				t.Errorf("Check: %q, want it to name %s and quote %q", msg, tt.field, status)
			}
		})
	}
}

// TestSignalCheckWithAnOpenContract: a contract without roles to go to
// lets Next name any, and one without an agent or cycle does not check
// them; the other fields are still checked.
func TestSignalCheckWithAnOpenContract(t *testing.T) {
	s, err := ParseSignal([]byte("SIGNAL BLOCK\nAgent=x | Cycle=c | Step=S | Confidence=2 | Risk=low | Next=anyone\n"))
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Check(SignalContract{}); err != nil {
		t.Errorf("Check: %v, want none", err)
	}
	if s.Confidence() != 2 || s.Risk() != "low" {
		t.Errorf("confidence %d, risk %q, want 2 and low", s.Confidence(), s.Risk())
	}
}
