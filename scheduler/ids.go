package scheduler

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
)

// idAllocator makes run ids in each pipeline's format. Ids are unique in
// the workspace: a candidate that the store, a directory or an archive
// already has is passed over (a run lost when an older backup was
// restored leaves its directory, or its archive; its files are not the
// new run's).
type idAllocator struct {
	store Store
	clock agentrunner.Clock
	// last is the newest id handed out, by pipeline.
	last map[string]string
}

func newIDAllocator(store Store, clock agentrunner.Clock) *idAllocator {
	return &idAllocator{store: store, clock: clock, last: map[string]string{}}
}

// next returns a free id for a new run of p; paths names the files a run
// of an id would have (its directory, its archive).
func (a *idAllocator) next(ctx context.Context, p *agentrunner.Pipeline, paths func(id string) []string) (string, error) {
	last, ok := a.last[p.Name]
	if !ok {
		runs, err := a.store.Runs(ctx, agentrunner.RunFilter{Pipeline: p.Name, Limit: 1})
		if err != nil {
			return "", err
		}
		if len(runs) > 0 {
			last = runs[0].ID
		}
	}
	for id := a.after(p, last); ; id = a.after(p, id) {
		taken, err := a.taken(ctx, id, paths(id))
		if err != nil {
			return "", err
		}
		if !taken {
			a.last[p.Name] = id
			return id, nil
		}
	}
}

func (a *idAllocator) taken(ctx context.Context, id string, paths []string) (bool, error) {
	for _, path := range paths {
		if _, err := os.Lstat(path); err == nil {
			return true, nil
		}
	}
	_, err := a.store.Run(ctx, id)
	switch agentrunner.ErrorCode(err) {
	case "":
		return true, nil
	case agentrunner.ENOTFOUND:
		return false, nil
	}
	return false, err
}

// after is the first id in p's format after last (empty: none yet).
func (a *idAllocator) after(p *agentrunner.Pipeline, last string) string {
	now := a.clock.Now().UTC()
	switch p.RunID {
	case agentrunner.RunIDTimestamp:
		const layout = "20060102_150405"
		t := now.Truncate(time.Second)
		if prev, err := time.Parse(layout, last); err == nil && !t.After(prev) {
			t = prev.Add(time.Second)
		}
		return t.Format(layout)
	case agentrunner.RunIDDateSeq:
		day := now.Format("2006-01-02")
		n := 1
		if d, seq, ok := strings.Cut(lastDash(last), "\t"); ok && d == day {
			if k, err := strconv.Atoi(seq); err == nil {
				n = k + 1
			}
		}
		return fmt.Sprintf("%s-%03d", day, n)
	default:
		n := 1
		if seq, ok := strings.CutPrefix(last, p.Name+"-"); ok {
			if k, err := strconv.Atoi(seq); err == nil {
				n = k + 1
			}
		}
		return fmt.Sprintf("%s-%06d", p.Name, n)
	}
}

// lastDash splits "YYYY-MM-DD-NNN" into its date and number, joined by a
// tab for strings.Cut.
func lastDash(id string) string {
	i := strings.LastIndexByte(id, '-')
	if i < 0 {
		return id
	}
	return id[:i] + "\t" + id[i+1:]
}
