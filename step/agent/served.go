package agent

import (
	"context"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/view"
)

// serve makes the view of a run's artifact right before an agent reads it
// (view.Read): the file in dir is rewritten from the store's copy when it
// is missing or differs, with an EventViewRepaired. It reports whether the
// run has the artifact.
func (at *attempt) serve(ctx context.Context, runID, dir, name string) (bool, error) {
	data, repaired, err := view.Read(ctx, at.k.opts.Store, at.k.opts.Views, at.sa.Views == agentrunner.ViewsOnRead, runID, dir, name, at.k.clock.Now())
	if err != nil {
		return false, agentrunner.Fail(agentrunner.ClassInternal, "input %s of run %s: %w", name, runID, err)
	}
	if repaired != nil {
		at.res.Events = append(at.res.Events, repaired)
	}
	return data != nil, nil
}
