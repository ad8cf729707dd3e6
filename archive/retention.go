package archive

import (
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/atomicfile"
)

// Why retention deleted an archive.
const (
	ReasonCount = "count"
	ReasonAge   = "age"
)

// stored is one archive on disk: its pipeline, run and time (its run's
// end, which writeTemp set as its modification time).
type stored struct {
	pipeline, run, path string
	ended               time.Time
}

// retain deletes, per pipeline, the archives beyond the newest Count and
// those whose run ended more than Age ago, each with an event.
func (a *Archiver) retain(p Policy, dry bool, rep *Report) {
	if p.Count <= 0 && p.Age <= 0 {
		return
	}
	pipelines, _ := os.ReadDir(a.History)
	for _, d := range pipelines {
		if d.IsDir() {
			a.retainPipeline(d.Name(), p, dry, rep)
		}
	}
}

// retainPipeline applies the retention to the archives of one pipeline.
func (a *Archiver) retainPipeline(pipeline string, p Policy, dry bool, rep *Report) {
	archives := a.list(pipeline)
	cutoff := a.Clock.Now().Add(-p.Age)
	for i, s := range archives {
		reason := ""
		switch {
		case p.Count > 0 && i >= p.Count:
			reason = ReasonCount
		case p.Age > 0 && s.ended.Before(cutoff):
			reason = ReasonAge
		default:
			continue
		}
		if dry {
			rep.Deleted = append(rep.Deleted, s.path)
			continue
		}
		a.delete(s, reason, p, rep)
	}
}

// list returns the archives of a pipeline, newest first.
func (a *Archiver) list(pipeline string) []stored {
	dir := filepath.Join(a.History, pipeline)
	entries, _ := os.ReadDir(dir)
	var out []stored
	for _, e := range entries {
		name := e.Name()
		if !e.Type().IsRegular() || !strings.HasSuffix(name, Ext) || strings.HasPrefix(name, ".") {
			continue
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		out = append(out, stored{pipeline: pipeline, run: strings.TrimSuffix(name, Ext), path: filepath.Join(dir, name), ended: info.ModTime()})
	}
	slices.SortFunc(out, func(x, y stored) int {
		if c := y.ended.Compare(x.ended); c != 0 {
			return c
		}
		return strings.Compare(y.run, x.run)
	})
	return out
}

// delete deletes one archive, with the event that says why.
func (a *Archiver) delete(s stored, reason string, p Policy, rep *Report) {
	err := os.Remove(s.path)
	if err == nil {
		err = atomicfile.SyncDir(filepath.Dir(s.path))
	}
	if err != nil {
		rep.Failed = append(rep.Failed, fmt.Sprintf("%s: delete: %v", s.path, err))
		a.event(eventOf(EventFailed, s, map[string]any{"error": "delete: " + err.Error()}))
		return
	}
	rep.Deleted = append(rep.Deleted, s.path)
	d := map[string]any{"reason": reason}
	if reason == ReasonCount {
		d["count"] = p.Count
	} else {
		d["age"] = p.Age.String()
	}
	a.event(eventOf(EventDeleted, s, d))
}

// eventOf is an event about an archive.
func eventOf(typ string, s stored, more map[string]any) *agentrunner.Event {
	d := map[string]any{"pipeline": s.pipeline, "run": s.run, "path": s.path}
	for k, v := range more {
		d[k] = v
	}
	level := agentrunner.LevelInfo
	if typ == EventFailed {
		level = agentrunner.LevelError
	}
	return &agentrunner.Event{Type: typ, CycleID: s.run, Level: level, Details: d}
}
