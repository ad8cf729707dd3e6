package stateagent

import (
	"bytes"

	"github.com/agentrunner/agentrunner/agentout"
	"github.com/agentrunner/agentrunner/artifact"
)

// contract checks a state agent's output with agentout: a confidence
// line, a human-input block and a task split that break the documented
// format are invalid output, named by line, which the retry shows the
// agent.
type contract struct{ kind agentout.Kind }

var _ artifact.Contract = contract{}

func (c contract) Validate(data []byte) []artifact.Problem {
	if len(bytes.TrimSpace(data)) == 0 {
		return []artifact.Problem{{Message: "the output is empty"}}
	}
	if _, err := agentout.Parse(c.kind, data); err != nil {
		return []artifact.Problem{{Message: err.Error()}}
	}
	return nil
}
