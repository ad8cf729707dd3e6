package model

import "github.com/agentrunner/agentrunner"

// Turn is what one attempt of a model agent has used so far, told after
// each model turn: the attempt's usage (tokens, turns, tool calls) is
// known only when it ends, and a long step would show nothing until then.
type Turn struct {
	CycleID, Step, Agent string
	Attempt              int
	Usage                agentrunner.Usage
}

// OnTurn makes the runtime tell fn, after each model turn of every
// attempt, what the attempt has used so far (a terminal's live progress
// line). fn runs on the attempt's goroutine, so it must be quick. Set it
// before the runtime runs an attempt. It returns r.
func (r *Runtime) OnTurn(fn func(Turn)) *Runtime {
	r.onTurn = fn
	return r
}

// told tells OnTurn's function of the attempt's usage so far.
func (c *conversation) told() {
	if fn := c.rt.onTurn; fn != nil {
		fn(Turn{CycleID: c.inv.CycleID, Step: c.inv.Step, Agent: c.inv.Agent, Attempt: c.inv.Attempt, Usage: c.result.Usage})
	}
}
