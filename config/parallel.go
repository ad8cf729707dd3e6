package config

import (
	"maps"
	"slices"

	"github.com/agentrunner/agentrunner"
)

// parallelWriters refuses two steps that may run at the same time, on
// different branches of a fan-out (then:), and publish the same artifact
// file into the run's directory: the second would overwrite the first's
// output while a later step reads it. A branch runs from the fan-out up
// to the first join (or its end); what lies after the join runs once.
func (v *validator) parallelWriters(key string, g *agentrunner.Pipeline) {
	for _, id := range slices.Sorted(maps.Keys(g.Steps)) {
		fork := g.Steps[id]
		if len(fork.Then) < 2 {
			continue
		}
		writer := map[string]string{} // artifact file → the step that writes it
		branchOf := map[string]string{}
		for _, b := range fork.Then {
			for _, st := range v.branch(g, b) {
				file := v.outputOf(g.Steps[st])
				prev, taken := writer[file]
				switch {
				case file == "":
				case taken && branchOf[prev] != b:
					v.add(key+".steps."+st, "step %s writes %q, which step %s also writes on a parallel branch of %s: they may run at once and overwrite each other; give each branch its own artifact",
						st, file, prev, id)
				case !taken:
					writer[file], branchOf[st] = st, b
				}
			}
		}
	}
}

// branch lists the steps reachable from start without passing a join,
// in the order they are found.
func (v *validator) branch(g *agentrunner.Pipeline, start string) []string {
	var out []string
	seen := map[string]bool{}
	queue := []string{start}
	for len(queue) > 0 {
		id := queue[0]
		queue = queue[1:]
		st := g.Steps[id]
		if seen[id] || st == nil || st.Join != "" {
			continue
		}
		seen[id] = true
		out = append(out, id)
		for _, e := range st.Edges() {
			queue = append(queue, e.To)
		}
	}
	return out
}

// outputOf is the artifact file an agent step publishes, "" for others.
func (v *validator) outputOf(st *agentrunner.Step) string {
	if a := v.stepAgent(stepConfig(st)); a != nil {
		return a.Output.File
	}
	return ""
}

// stepConfig is the *Step a root Step was built from.
func stepConfig(st *agentrunner.Step) *Step {
	s, _ := st.Config.(*Step)
	return s
}
