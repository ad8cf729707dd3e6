package agentout

import (
	"fmt"

	"github.com/agentrunner/agentrunner"
)

// Thresholds are the confidence thresholds of a pipeline (spec 5's
// PipelineConfiguration): below its state's threshold, an agent's output
// waits at a human gate instead of moving on.
type Thresholds struct {
	// PerState is the threshold of each state that has its own, 0-100. A
	// state listed with 0 has no threshold, whatever Default is.
	PerState map[string]int
	// Default is the threshold of the states PerState does not list;
	// 0 is none.
	Default int
}

// Validate reports a threshold outside 0-100, naming its state.
func (t Thresholds) Validate() error {
	if t.Default < 0 || t.Default > 100 {
		return agentrunner.Errorf(agentrunner.EINVALID, "the default confidence threshold is %d: expected 0-100 (0 for none)", t.Default)
	}
	for s, n := range t.PerState {
		if n < 0 || n > 100 {
			return agentrunner.Errorf(agentrunner.EINVALID, "the confidence threshold of state %q is %d: expected 0-100 (0 for none)", s, n)
		}
	}
	return nil
}

// threshold is the threshold of state, 0 for none.
func (t Thresholds) threshold(state string) int {
	if n, ok := t.PerState[state]; ok {
		return n
	}
	return t.Default
}

// Gate says whether the artifact a of an agent in state must wait for a
// person, and why, in one sentence for the gate and the logs (why is also
// given when the gate stays closed). The gate opens when the agent asks
// for human input, when its confidence is below the state's threshold, and
// when the state has a threshold but the agent gave no confidence: a
// threshold is a promise that no output passes unrated. A nil artifact
// (an output that could not be read) opens the gate.
func (t Thresholds) Gate(state string, a *Artifact) (open bool, why string) {
	n := t.threshold(state)
	switch {
	case a == nil:
		return true, fmt.Sprintf("state %s has no artifact to judge", state)
	case a.HumanInput != nil:
		return true, fmt.Sprintf("the agent of state %s asks: %s", state, a.HumanInput.Question)
	case n <= 0:
		return false, fmt.Sprintf("state %s has no confidence threshold", state)
	case a.Confidence < 0:
		return true, fmt.Sprintf("the agent of state %s gave no confidence, and the state's threshold is %d", state, n)
	case a.Confidence < n:
		return true, fmt.Sprintf("the agent of state %s is %d%% confident, below the state's threshold of %d", state, a.Confidence, n)
	}
	return false, fmt.Sprintf("the agent of state %s is %d%% confident, at or above the state's threshold of %d", state, a.Confidence, n)
}
