package agent

import (
	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/route"
)

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
	at.event(at.step, agentrunner.EventSignal, agentrunner.LevelInfo, map[string]any{
		"agent": s.Agent, "cycle": cycle, "step": step, "confidence": s.Confidence(), "risk": s.Risk(), "next": s.Next,
		"visit": at.sa.StepRun.Visit,
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
