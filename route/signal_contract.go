package route

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
)

// Stop is the Next of a SIGNAL BLOCK that ends the cycle.
const Stop = "STOP"

// SignalContract is what spec 2 asks of a SIGNAL BLOCK beyond its form:
// who may sign it, for which cycle, and where it may send the cycle.
type SignalContract struct {
	// Agent is the role that must have written the block.
	Agent string
	// Cycle is the id of the cycle (the run) the block is for.
	Cycle string
	// Next are the roles the block may name next; STOP is always allowed.
	// Empty: any role.
	Next []string
}

// Risks are the values of a SIGNAL BLOCK's Risk field.
var Risks = []string{"low", "medium", "high"}

// Check checks every field spec 2 defines: Agent and Cycle are the
// contract's, Step is given, Confidence is a whole number from 1 to 5,
// Risk is low, medium or high, and Next is one of the contract's roles or
// STOP. Values are compared without case, as agents do not all spell them
// alike. The error, an invalid_output failure, names the field and quotes
// the status line as read.
func (s *Signal) Check(c SignalContract) error {
	for _, check := range []func(SignalContract) (string, string){
		s.checkAgent, s.checkCycle, s.checkStep, s.checkConfidence, s.checkRisk, s.checkNext,
	} {
		if field, problem := check(c); problem != "" {
			return invalid("the SIGNAL BLOCK (line %d): %s %s, in %q", s.Line, field, problem, s.status())
		}
	}
	return nil
}

// Confidence is the block's Confidence, 0 when it has none or it is not a
// number.
func (s *Signal) Confidence() int {
	v, _ := s.Get("Confidence")
	n, err := strconv.Atoi(v)
	if err != nil {
		return 0
	}
	return n
}

// Risk is the block's Risk in lower case, "" when it has none.
func (s *Signal) Risk() string {
	v, _ := s.Get("Risk")
	return strings.ToLower(v)
}

// status is the status line as read: its fields in order.
func (s *Signal) status() string {
	parts := make([]string, len(s.Fields))
	for i, f := range s.Fields {
		parts[i] = f.Key + "=" + f.Value
	}
	return strings.Join(parts, " | ")
}

func (s *Signal) checkAgent(c SignalContract) (string, string) {
	if c.Agent != "" && !strings.EqualFold(s.Agent, c.Agent) {
		return "Agent", fmt.Sprintf("is %q, but %s wrote it", s.Agent, c.Agent)
	}
	return "", ""
}

func (s *Signal) checkCycle(c SignalContract) (string, string) {
	v, ok := s.Get("Cycle")
	switch {
	case !ok:
		return "Cycle", "is missing"
	case c.Cycle != "" && v != c.Cycle:
		return "Cycle", fmt.Sprintf("is %q, but the cycle is %s", v, c.Cycle)
	}
	return "", ""
}

func (s *Signal) checkStep(SignalContract) (string, string) {
	if _, ok := s.Get("Step"); !ok {
		return "Step", "is missing"
	}
	return "", ""
}

func (s *Signal) checkConfidence(SignalContract) (string, string) {
	v, ok := s.Get("Confidence")
	switch n, err := strconv.Atoi(v); {
	case !ok:
		return "Confidence", "is missing"
	case err != nil || n < 1 || n > 5:
		return "Confidence", fmt.Sprintf("is %q, not a whole number from 1 to 5", v)
	}
	return "", ""
}

func (s *Signal) checkRisk(SignalContract) (string, string) {
	v, ok := s.Get("Risk")
	switch {
	case !ok:
		return "Risk", "is missing"
	case !slices.Contains(Risks, strings.ToLower(v)):
		return "Risk", fmt.Sprintf("is %q, not one of %s", v, strings.Join(Risks, ", "))
	}
	return "", ""
}

func (s *Signal) checkNext(c SignalContract) (string, string) {
	if strings.EqualFold(s.Next, Stop) || len(c.Next) == 0 {
		return "", ""
	}
	for _, n := range c.Next {
		if strings.EqualFold(s.Next, n) {
			return "", ""
		}
	}
	return "Next", fmt.Sprintf("is %q, not one of %s or %s", s.Next, strings.Join(c.Next, ", "), Stop)
}
