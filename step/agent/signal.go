package agent

import (
	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/route"
)

// EventSignal records the SIGNAL BLOCK of an agent step that routes on
// one (spec 2), committed with its success (details: agent, cycle, step,
// confidence, risk, next, and the step run's visit), so the API, the CLI
// and the metrics see each hand-off.
const EventSignal = "signal.received"

// checkSignal holds the output of a step that routes on its SIGNAL BLOCK
// to the block's contract: signed by the step's agent, for this run, with
// every field spec 2 defines, and sending the run to one of the step's
// routes or STOP. Other steps have nothing to check.
func (at *attempt) checkSignal(data []byte) error {
	st := at.sa.Step
	if st.Label == nil || st.Label.Parser != "signal" {
		return nil
	}
	s, err := route.ParseSignal(data)
	if err != nil {
		return err
	}
	if err := s.Check(route.SignalContract{Agent: at.step.Agent, Cycle: at.sa.Run.ID, Next: routeLabels(st.Routes)}); err != nil {
		return err
	}
	step, _ := s.Get("Step")
	cycle, _ := s.Get("Cycle")
	at.event(at.step, EventSignal, agentrunner.LevelInfo, map[string]any{
		"agent": s.Agent, "cycle": cycle, "step": step, "confidence": s.Confidence(), "risk": s.Risk(), "next": s.Next,
		"visit": at.visit(),
	})
	return nil
}

// routeLabels are the labels a step's routes match; none when a route
// takes any label (otherwise).
func routeLabels(routes []agentrunner.Route) []string {
	var labels []string
	for _, r := range routes {
		if r.Otherwise {
			return nil
		}
		labels = append(labels, r.When)
	}
	return labels
}

// visit is the how-manieth visit of its step the attempt belongs to.
func (at *attempt) visit() int {
	if sr := at.sa.StepRun; sr != nil {
		return sr.Visit
	}
	return max(at.sa.Attempt.Visit, 1)
}
