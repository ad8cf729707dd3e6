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
	data, err := at.committed(ctx, runID, dir, name)
	if err != nil {
		return false, agentrunner.Fail(agentrunner.ClassInternal, "input %s of run %s: %w", name, runID, err)
	}
	return data != nil, nil
}

// committed returns a run's artifact as the store committed it, after
// making its view in dir right (view.Read), and keeps the event of a
// repair for the attempt's result; nil: the run has no such artifact.
func (at *attempt) committed(ctx context.Context, runID, dir, name string) ([]byte, error) {
	onRead := at.sa.Views == agentrunner.ViewsOnRead
	data, repaired, err := view.Read(ctx, at.k.opts.Store, at.k.opts.Views, onRead, runID, dir, name, at.k.clock.Now())
	if repaired != nil {
		at.res.Events = append(at.res.Events, repaired)
	}
	return data, err
}
