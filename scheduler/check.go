package scheduler

import (
	"context"
	"fmt"
	"slices"
	"strings"

	"github.com/agentrunner/agentrunner"
)

// InvariantError lists the ways a store breaks the scheduler's invariants.
type InvariantError struct{ Problems []string }

func (e *InvariantError) Error() string {
	return fmt.Sprintf("%d broken invariants:\n  %s", len(e.Problems), strings.Join(e.Problems, "\n  "))
}

// Check verifies the invariants of the runs of pipelines in a store: what
// must hold after any crash, at any moment the scheduler is not running.
//   - a finished run has no unfinished step run, and an unfinished running
//     run has at least one (else it is stuck, with nothing to say why);
//   - each step's visits are 1..n with no gap, and n is within max_visits;
//   - an open step run's newest attempt is pending or running, and no
//     other attempt of it is; a succeeded step run's newest attempt
//     succeeded (unless a gate's decision or a skip's fallback closed it);
//     every attempt belongs to a step run;
//   - a step run's From names a succeeded step run of the same run.
func Check(ctx context.Context, store Store, pipelines map[string]*agentrunner.Pipeline) error {
	runs, err := store.Runs(ctx, agentrunner.RunFilter{})
	if err != nil {
		return err
	}
	var problems []string
	for _, r := range runs {
		p := pipelines[r.Pipeline]
		if p == nil {
			continue
		}
		ps, err := checkRun(ctx, store, r, p)
		if err != nil {
			return err
		}
		problems = append(problems, ps...)
	}
	if len(problems) > 0 {
		return &InvariantError{Problems: problems}
	}
	return nil
}

func checkRun(ctx context.Context, store Store, r *agentrunner.Run, p *agentrunner.Pipeline) ([]string, error) {
	srs, err := store.StepRuns(ctx, agentrunner.StepRunFilter{RunID: r.ID})
	if err != nil {
		return nil, err
	}
	atts, err := store.Attempts(ctx, r.ID)
	if err != nil {
		return nil, err
	}
	var problems []string
	bad := func(format string, args ...any) {
		problems = append(problems, fmt.Sprintf("run %s (%s): ", r.ID, r.Status)+fmt.Sprintf(format, args...))
	}
	byKey := map[string]*agentrunner.StepRun{}
	visits := map[string][]int{}
	unfinished := 0
	for _, sr := range srs {
		byKey[sr.Key()] = sr
		visits[sr.Step] = append(visits[sr.Step], sr.Visit)
		if !sr.Status.Finished() {
			unfinished++
		}
	}
	switch {
	case r.Status.Finished() && unfinished > 0:
		bad("finished with %d unfinished step runs", unfinished)
	case r.Status == agentrunner.RunRunning && unfinished == 0:
		bad("running with no unfinished step run")
	case r.Status == agentrunner.RunQueued && len(srs) > 0:
		bad("queued with %d step runs", len(srs))
	}
	for step, vs := range visits {
		slices.Sort(vs)
		for i, v := range vs {
			if v != i+1 {
				bad("step %s has visits %v, not 1..%d", step, vs, len(vs))
				break
			}
		}
		if st := p.Steps[step]; st != nil && st.MaxVisits > 0 && len(vs) > st.MaxVisits {
			bad("step %s has %d visits, over its max_visits %d", step, len(vs), st.MaxVisits)
		}
	}
	problems = append(problems, checkAttempts(r, byKey, atts)...)
	for _, sr := range srs {
		if sr.From == "" {
			continue
		}
		if from := byKey[sr.From]; from == nil || from.Status != agentrunner.StepRunSucceeded {
			bad("step run %s comes from %s, which is not a succeeded step run", sr.Key(), sr.From)
		}
	}
	return problems, nil
}

// checkAttempts verifies the attempts of a run against its step runs.
func checkAttempts(r *agentrunner.Run, byKey map[string]*agentrunner.StepRun, atts []*agentrunner.Attempt) []string {
	var problems []string
	newest := map[string]*agentrunner.Attempt{}
	live := map[string]int{}
	for _, a := range atts {
		key := agentrunner.StepRunKey(a.Step, a.Visit)
		if byKey[key] == nil {
			problems = append(problems, fmt.Sprintf("run %s: attempt %d of %s belongs to no step run", r.ID, a.Number, key))
			continue
		}
		if n := newest[key]; n == nil || a.Number > n.Number {
			newest[key] = a
		}
		if a.Status == agentrunner.AttemptPending || a.Status == agentrunner.AttemptRunning {
			live[key]++
		}
	}
	for key, sr := range byKey {
		a := newest[key]
		switch {
		case live[key] > 1:
			problems = append(problems, fmt.Sprintf("run %s: step run %s has %d unfinished attempts", r.ID, key, live[key]))
		case sr.Status == agentrunner.StepRunOpen && (a == nil || a.Status == agentrunner.AttemptSucceeded || a.Status == agentrunner.AttemptFailed):
			problems = append(problems, fmt.Sprintf("run %s: step run %s is open but has no unfinished attempt", r.ID, key))
		case sr.Status == agentrunner.StepRunSucceeded && sr.Decision == nil && sr.Error == "" && (a == nil || a.Status != agentrunner.AttemptSucceeded):
			problems = append(problems, fmt.Sprintf("run %s: step run %s succeeded but its newest attempt did not", r.ID, key))
		case sr.Status.Finished() && live[key] > 0:
			problems = append(problems, fmt.Sprintf("run %s: step run %s is %s with an unfinished attempt", r.ID, key, sr.Status))
		}
	}
	slices.Sort(problems)
	return problems
}
