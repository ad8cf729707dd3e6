package route_test

import (
	"fmt"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/route"
)

// The scheduler compiles a step's label source once and reads the label of
// each of its step runs; an output without one fails as invalid_output.
func ExampleCompile() {
	x, err := route.Compile(&agentrunner.LabelSource{Parser: "signal"})
	if err != nil {
		panic(err)
	}
	label, err := x.Label([]byte("### Verifier Output\nThe goal is met.\n\nSIGNAL BLOCK\n" +
		"Agent=verifier | Cycle=2025-11-08-001 | Step=VERIFY | Confidence=5 | Risk=low | Next=STOP\n"))
	fmt.Println(label, err)
	_, err = x.Label([]byte("### Verifier Output\nThe goal is met.\n"))
	fmt.Println(agentrunner.ClassOf(err), agentrunner.ClassOf(err).Retryable())
	// Output:
	// STOP <nil>
	// invalid_output false
}

func ExampleParseSignal() {
	s, err := route.ParseSignal([]byte("SIGNAL BLOCK\nAgent=diagnoser | Confidence=3 | Risk=medium | Next=planner\n"))
	if err != nil {
		panic(err)
	}
	risk, _ := s.Get("risk")
	fmt.Println(s.Agent, "->", s.Next, "risk:", risk, "fields:", len(s.Fields))
	// Output: diagnoser -> planner risk: medium fields: 4
}
