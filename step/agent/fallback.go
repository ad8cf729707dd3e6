package agent

import (
	"context"
	"fmt"
	"path/filepath"

	"github.com/agentrunner/agentrunner"
)

// EventFallbackPublished records the earlier artifact that stands in for
// a skipped step's, and where this run has it now.
const EventFallbackPublished = "artifact.fallback"

// maxFallbackScan bounds how many earlier runs are searched (FR-051).
const maxFallbackScan = 200

var _ agentrunner.Fallbacker = (*Kind)(nil)

// Fallback stands in for an agent step that failed for good (on_failure:
// skip): it finds the newest of the pipeline's earlier runs (at most 200)
// that has the step's artifact passing the agent's contract, hands a copy
// to the scheduler for this run (committed, then written as its view), and delivers the step's
// messages from it (committed with it too) with a note saying so. The result's Path is the
// earlier artifact it came from; nil, nil when no earlier run has one.
// It runs no agent, only reads the store: the scheduler calls it on its
// loop, and ctx bounds the search.
func (k *Kind) Fallback(ctx context.Context, a *agentrunner.StepAttempt) (*agentrunner.StepResult, error) {
	at := &attempt{k: k, sa: a, res: &agentrunner.StepResult{}}
	if err := at.resolve(); err != nil {
		return nil, err
	}
	src, from, data, err := at.lastGood(ctx)
	if err != nil || data == nil {
		return nil, err
	}
	file := at.agent.Output.File
	dst := filepath.Join(a.RunDir, file)
	at.res.Output, at.res.Path = data, src
	at.keep(agentrunner.FileArtifact, file, data) // committed, then its view written
	at.event(at.step, EventFallbackPublished, agentrunner.LevelWarn, map[string]any{
		"artifact": file, "fallback": src, "fallback_run": from, "path": dst,
	})
	note := fmt.Sprintf("%s failed; %s of run %s stands in for it: %s", at.step.ID, file, from, dst)
	if err := k.Deliver(at.res, a.Run, at.step, data, note); err != nil {
		return nil, err
	}
	return at.res, nil
}

// lastGood finds the step's newest valid artifact in the earlier runs of
// the pipeline: its path, its run and its bytes (nil when there is none).
// An artifact that is missing, too large or breaks the contract is passed
// over.
func (at *attempt) lastGood(ctx context.Context) (path, run string, data []byte, err error) {
	runs, err := at.k.opts.Store.Runs(ctx, agentrunner.RunFilter{Pipeline: at.sa.Run.Pipeline, Before: at.sa.Run.ID, Limit: maxFallbackScan})
	if err != nil {
		return "", "", nil, err
	}
	file := at.agent.Output.File
	for _, prev := range runs {
		if err := ctx.Err(); err != nil {
			return "", "", nil, err
		}
		dir := at.priorDir(prev)
		path := filepath.Join(dir, file)
		data, err := at.committed(ctx, prev.ID, dir, file)
		if err != nil || data == nil || len(data) > at.agent.Output.MaxBytes {
			continue
		}
		if _, err := check(at.agent.Contract, file, data); err == nil {
			return path, prev.ID, data, nil
		}
	}
	return "", "", nil, nil
}
