package dashboard

import (
	"context"
	"errors"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/workspace"
)

// schemaView is what the check of a JSON artifact against its producing
// agent's output schema found.
type schemaView struct {
	// Agent produced the artifact; Schema is its output schema's file.
	Agent, Schema string
	// Problems are each way the artifact breaks the schema, located in
	// the text shown; none for a valid artifact.
	Problems []string
}

// checkSchema checks a JSON artifact shown on the page against the output
// schema of the agent that produced it, as the engine did before
// accepting it (an output may be stored unaccepted: a refused attempt's,
// or one from before the schema changed). It checks the text shown, so
// the problems' lines are those the page shows. nil: nothing to check (no
// workspace, no such agent, no schema, or only the start of the artifact
// is shown).
func (d *Dashboard) checkSchema(ctx context.Context, run *agentrunner.Run, v *artifactView) (*schemaView, error) {
	if v.Kind != "json" || v.Cut || d.opts.Workspace == nil {
		return nil, nil
	}
	ws := d.opts.Workspace()
	if ws == nil {
		return nil, nil
	}
	a, err := d.producer(ctx, ws, run, v)
	if err != nil || a == nil || a.Schema == nil || a.Contract == nil {
		return nil, err
	}
	sv := &schemaView{Agent: a.Name, Schema: a.Output.Schema}
	var verr *artifact.ValidationError
	if errors.As(artifact.Check(a.Contract, v.Name, []byte(v.Text)), &verr) {
		for _, p := range verr.Problems {
			sv.Problems = append(sv.Problems, p.String())
		}
	}
	return sv, nil
}

// producer is the agent that produced the version shown: its attempt's
// agent, when that agent's output is this artifact; else the agent whose
// output it is, as the engine finds it.
func (d *Dashboard) producer(ctx context.Context, ws *workspace.Workspace, run *agentrunner.Run, v *artifactView) (*workspace.Agent, error) {
	if v.File != nil {
		atts, err := d.store.Attempts(ctx, run.ID)
		if err != nil {
			return nil, fmtErr("read the attempts", err)
		}
		for _, at := range atts {
			if a := ws.Agents[at.Agent]; at.Step == v.File.Step && at.Number == v.File.Attempt && a != nil && a.Output.File == v.Name {
				return a, nil
			}
		}
	}
	return ws.Producer(v.Name), nil
}
