package archive_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/archive"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/internal/clocktest"
	"github.com/agentrunner/agentrunner/sqlite"
	"github.com/google/go-cmp/cmp"
)

var t0 = time.Date(2026, 11, 22, 14, 0, 0, 0, time.UTC)

// fixture is a workspace's artifacts dir with a real store, runs with
// stored artifacts and their directories, and an archiver on a fake
// clock.
type fixture struct {
	t     *testing.T
	root  string
	store *sqlite.Store
	clock *clocktest.Clock
	arc   *archive.Archiver
	mu    sync.Mutex
	evs   []*agentrunner.Event
	runs  map[string]*agentrunner.Run
	// want are the files each run's archive must hold, by run.
	want map[string]map[string]string
}

func newFixture(t *testing.T) *fixture {
	t.Helper()
	root := t.TempDir()
	store, err := sqlite.Open(context.Background(), filepath.Join(root, "state.db"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { store.Close() })
	f := &fixture{t: t, root: root, store: store, clock: clocktest.New(t0), runs: map[string]*agentrunner.Run{}, want: map[string]map[string]string{}}
	f.arc = &archive.Archiver{Store: store, History: filepath.Join(root, "cycles", "history"), Clock: f.clock, OnEvent: func(ev *agentrunner.Event) {
		f.mu.Lock()
		f.evs = append(f.evs, ev)
		f.mu.Unlock()
	}}
	return f
}

// run adds a finished run that ended at ended, with stored artifacts
// (their views written in its directory) and extra files of its
// directory that the store does not keep.
func (f *fixture) run(pipeline, id string, status agentrunner.RunStatus, ended time.Time, artifacts, extra map[string]string) *agentrunner.Run {
	f.t.Helper()
	dir := filepath.Join(f.root, "cycles", id)
	if pipeline != "crypton" {
		dir = filepath.Join(f.root, "runs", pipeline, id)
	}
	r := &agentrunner.Run{ID: id, Pipeline: pipeline, Status: status, Dir: dir, StartedAt: ended.Add(-time.Hour), EndedAt: ended}
	if status == agentrunner.RunRunning {
		r.EndedAt = time.Time{}
	}
	ch := &agentrunner.Change{Runs: []*agentrunner.Run{r}}
	want := map[string]string{}
	for name, body := range artifacts {
		ch.Files = append(ch.Files, &agentrunner.StoredFile{RunID: id, Step: "s", Visit: 1, Attempt: 1, Kind: agentrunner.FileArtifact,
			Name: name, Data: []byte(body), SHA256: artifact.Hash([]byte(body)), CreatedAt: ended})
		f.write(filepath.Join(dir, name), body)
		want[name] = body
	}
	for name, body := range extra {
		f.write(filepath.Join(dir, filepath.FromSlash(name)), body)
		want[name] = body
	}
	if err := f.store.Apply(context.Background(), ch); err != nil {
		f.t.Fatal(err)
	}
	f.runs[id], f.want[id] = r, want
	return r
}

func (f *fixture) write(path, body string) {
	f.t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		f.t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
		f.t.Fatal(err)
	}
}

// archived returns the files of a run's archive.
func (f *fixture) archived(id string) map[string]string {
	f.t.Helper()
	r := f.runs[id]
	p := archive.Path(f.arc.History, r.Pipeline, id)
	files, err := archive.List(p)
	if err != nil {
		f.t.Fatalf("list the archive of %s: %v", id, err)
	}
	out := map[string]string{}
	for _, file := range files {
		data, ok, err := archive.ReadFile(p, file.Name)
		if err != nil || !ok || artifact.Hash(data) != file.SHA256 {
			f.t.Fatalf("read %s from the archive of %s: %v %v", file.Name, id, ok, err)
		}
		out[file.Name] = string(data)
	}
	return out
}

// dirFiles returns the files of a run's directory, nil when it is gone.
func (f *fixture) dirFiles(id string) map[string]string {
	f.t.Helper()
	dir := f.runs[id].Dir
	if _, err := os.Stat(dir); errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	out := map[string]string{}
	filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			rel, _ := filepath.Rel(dir, p)
			data, _ := os.ReadFile(p)
			out[filepath.ToSlash(rel)] = string(data)
		}
		return err
	})
	return out
}

func (f *fixture) eventTypes() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	var out []string
	for _, ev := range f.evs {
		out = append(out, ev.Type+":"+ev.CycleID)
	}
	return out
}

func (f *fixture) pass(p archive.Policy, dry bool) *archive.Report {
	f.t.Helper()
	rep, err := f.arc.Pass(context.Background(), p, dry)
	if err != nil {
		f.t.Fatal(err)
	}
	return rep
}

// TestPassArchivesTheFinishedRunsOlderThanTheNewestKeep: of each
// pipeline, the finished runs beyond the newest two are archived, the
// store's copy of each artifact and the directory's other files, and
// their directories removed; the newest two and a running run keep
// theirs. A view a hand changed is archived as the store has it.
func TestPassArchivesTheFinishedRunsOlderThanTheNewestKeep(t *testing.T) {
	f := newFixture(t)
	for i, id := range []string{"20261101_000000", "20261102_000000", "20261103_000000", "20261104_000000"} {
		f.run("crypton", id, agentrunner.RunCompleted, t0.Add(time.Duration(i-30)*24*time.Hour),
			map[string]string{"plan.md": "# Plan " + id + "\n"}, map[string]string{"memory/notes.md": "notes " + id})
	}
	f.run("crypton", "20261105_000000", agentrunner.RunRunning, t0, map[string]string{"plan.md": "# running\n"}, nil)
	f.run("review", "review-000001", agentrunner.RunCompleted, t0.Add(-48*time.Hour), map[string]string{"draft.md": "# Draft\n"}, nil)
	f.run("review", "review-000002", agentrunner.RunAborted, t0.Add(-47*time.Hour), nil, map[string]string{"draft.md": "# Draft 2\n"})
	// A view a hand changed: the store's copy is what the run produced.
	f.write(filepath.Join(f.runs["20261101_000000"].Dir, "plan.md"), "edited by hand\n")

	rep := f.pass(archive.Policy{Keep: 2}, false)
	want := []string{"20261101_000000", "20261102_000000"}
	if diff := cmp.Diff(&archive.Report{Archived: want}, rep); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	for _, id := range want {
		if diff := cmp.Diff(f.want[id], f.archived(id)); diff != "" {
			t.Errorf("archive of %s (-want +got):\n%s", id, diff)
		}
		if got := f.dirFiles(id); got != nil {
			t.Errorf("the directory of %s is still there: %v", id, got)
		}
		if !archive.Archived(f.arc.History, f.runs[id]) {
			t.Errorf("Archived(%s) is false", id)
		}
	}
	for _, id := range []string{"20261103_000000", "20261104_000000", "20261105_000000", "review-000001", "review-000002"} {
		if diff := cmp.Diff(f.want[id], f.dirFiles(id)); diff != "" {
			t.Errorf("the directory of %s changed (-want +got):\n%s", id, diff)
		}
	}
	if diff := cmp.Diff([]string{"run.archived:20261101_000000", "run.archived:20261102_000000"}, f.eventTypes()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	// Done is done: a second pass finds nothing to do.
	if rep := f.pass(archive.Policy{Keep: 2}, false); len(rep.Archived)+len(rep.Failed) != 0 {
		t.Errorf("a second pass: %+v", rep)
	}
	// Keep 0 archives nothing.
	if rep := f.pass(archive.Policy{Keep: 0}, false); len(rep.Archived) != 0 {
		t.Errorf("keep 0 archived %v", rep.Archived)
	}
}

// TestARunThatJustEndedIsLeftToSettle: a run beyond the newest Keep that
// ended less than archive.Settle ago keeps its directory (the views of
// its last artifacts may still be being written) until it settled.
func TestARunThatJustEndedIsLeftToSettle(t *testing.T) {
	f := newFixture(t)
	f.run("review", "review-000001", agentrunner.RunCompleted, t0.Add(-30*time.Second), map[string]string{"draft.md": "# Draft\n"}, nil)
	f.run("review", "review-000002", agentrunner.RunFailed, t0.Add(-10*time.Second), map[string]string{"draft.md": "# Draft 2\n"}, nil)
	if rep := f.pass(archive.Policy{Keep: 1}, false); len(rep.Archived) != 0 {
		t.Errorf("archived %v at once", rep.Archived)
	}
	f.clock.Advance(archive.Settle)
	if rep := f.pass(archive.Policy{Keep: 1}, false); !slices.Equal(rep.Archived, []string{"review-000001"}) {
		t.Errorf("archived %v after it settled, want review-000001", rep.Archived)
	}
}

// TestACrashAtAnyPointLeavesTheDirectoryOrAVerifiedArchive stops a pass
// at each point of archiving a run, as a crash would, and checks that
// every file of the run is then in its directory or in an archive that
// reads back whole; the next pass completes the archive and leaves no
// temporary file.
func TestACrashAtAnyPointLeavesTheDirectoryOrAVerifiedArchive(t *testing.T) {
	for _, point := range []string{archive.AtWritten, archive.AtInstalled, archive.AtVerified, archive.AtRemoving} {
		t.Run(point, func(t *testing.T) {
			f := newFixture(t)
			id := "20261101_000000"
			f.run("crypton", id, agentrunner.RunCompleted, t0.Add(-48*time.Hour),
				map[string]string{"plan.md": "# Plan\n", "research.md": "# Research\n"}, map[string]string{"memory/a.md": "a", "memory/b.md": "b"})
			f.run("crypton", "20261102_000000", agentrunner.RunCompleted, t0.Add(-24*time.Hour), nil, map[string]string{"plan.md": "# Plan 2\n"})
			crash := errors.New("crash at " + point)
			f.arc.Fault = func(p string) error {
				if p == point {
					return crash
				}
				return nil
			}
			if rep := f.pass(archive.Policy{Keep: 1}, false); len(rep.Failed) != 1 || !strings.Contains(rep.Failed[0], crash.Error()) {
				t.Fatalf("the crashed pass: %+v", rep)
			}
			f.checkNothingLost(id)
			f.arc.Fault = nil
			if rep := f.pass(archive.Policy{Keep: 1}, false); !slices.Equal(rep.Archived, []string{id}) {
				t.Fatalf("the pass after the crash: %+v", rep)
			}
			if diff := cmp.Diff(f.want[id], f.archived(id)); diff != "" {
				t.Errorf("archive after the crash (-want +got):\n%s", diff)
			}
			if got := f.dirFiles(id); got != nil {
				t.Errorf("the directory is still there: %v", got)
			}
			left, _ := filepath.Glob(filepath.Join(f.arc.History, "crypton", ".*"))
			if len(left) != 0 {
				t.Errorf("temporary files left: %v", left)
			}
		})
	}
}

// checkNothingLost: every file of the run is in its directory or in an
// archive that reads back with every hash right.
func (f *fixture) checkNothingLost(id string) {
	f.t.Helper()
	dir := f.dirFiles(id)
	var inArchive map[string]string
	p := archive.Path(f.arc.History, "crypton", id)
	if _, err := os.Stat(p); err == nil {
		inArchive = f.archived(id)
	}
	for name, body := range f.want[id] {
		if dir[name] != body && inArchive[name] != body {
			f.t.Errorf("%s of %s is lost: neither its directory nor a verified archive holds it", name, id)
		}
	}
}

// TestADamagedArchiveIsReplaced: an archive at the run's path that does
// not read back (truncated), with the directory whole, is written again
// before the directory goes.
func TestADamagedArchiveIsReplaced(t *testing.T) {
	f := newFixture(t)
	id := "20261101_000000"
	f.run("crypton", id, agentrunner.RunCompleted, t0.Add(-48*time.Hour), map[string]string{"plan.md": "# Plan\n"}, nil)
	f.write(archive.Path(f.arc.History, "crypton", id), "\x1f\x8b not a whole archive")
	if rep := f.pass(archive.Policy{Keep: 1}, false); len(rep.Archived) != 0 {
		t.Fatalf("keep 1 of one run archived %v", rep.Archived)
	}
	f.run("crypton", "20261102_000000", agentrunner.RunCompleted, t0.Add(-24*time.Hour), nil, map[string]string{"plan.md": "# Plan 2\n"})
	if rep := f.pass(archive.Policy{Keep: 1}, false); !slices.Equal(rep.Archived, []string{id}) || len(rep.Failed) != 0 {
		t.Fatalf("pass: %+v", rep)
	}
	if diff := cmp.Diff(f.want[id], f.archived(id)); diff != "" {
		t.Errorf("archive (-want +got):\n%s", diff)
	}
}

// TestALinkInTheDirectoryKeepsItInPlace: a directory holding anything but
// files and folders is not archived: removing it would lose what the
// link points at; the failure is an event.
func TestALinkInTheDirectoryKeepsItInPlace(t *testing.T) {
	f := newFixture(t)
	id := "20261101_000000"
	f.run("crypton", id, agentrunner.RunCompleted, t0.Add(-48*time.Hour), map[string]string{"plan.md": "# Plan\n"}, nil)
	f.run("crypton", "20261102_000000", agentrunner.RunCompleted, t0.Add(-24*time.Hour), nil, map[string]string{"plan.md": "# Plan 2\n"})
	if err := os.Symlink(f.root, filepath.Join(f.runs[id].Dir, "link")); err != nil {
		t.Skipf("no symbolic links here: %v", err)
	}
	rep := f.pass(archive.Policy{Keep: 1}, false)
	if len(rep.Failed) != 1 || !strings.Contains(rep.Failed[0], "not a regular file") {
		t.Fatalf("report: %+v", rep)
	}
	f.want[id]["link"] = "" // read as no file
	if diff := cmp.Diff(f.want[id], f.dirFiles(id)); diff != "" {
		t.Errorf("the directory changed (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"archive.failed:" + id}, f.eventTypes()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}

// TestRetentionDeletesArchivesByCountAndAge: the archives beyond the
// newest Count of a pipeline, and those of runs that ended more than Age
// ago, are deleted, each with an event; a dry run only reports them.
func TestRetentionDeletesArchivesByCountAndAge(t *testing.T) {
	f := newFixture(t)
	ids := []string{"20261101_000000", "20261102_000000", "20261103_000000", "20261104_000000", "20261105_000000"}
	for i, id := range ids {
		f.run("crypton", id, agentrunner.RunCompleted, t0.Add(time.Duration(i-10)*24*time.Hour), map[string]string{"plan.md": "# Plan " + id + "\n"}, nil)
	}
	f.pass(archive.Policy{Keep: 1}, false) // four archives, of days -10 … -7
	path := func(id string) string { return archive.Path(f.arc.History, "crypton", id) }

	dry := f.pass(archive.Policy{Keep: 1, Count: 3}, true)
	if diff := cmp.Diff([]string{path(ids[0])}, dry.Deleted); diff != "" {
		t.Errorf("dry run (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(path(ids[0])); err != nil {
		t.Errorf("a dry run deleted an archive: %v", err)
	}

	f.evs = nil
	rep := f.pass(archive.Policy{Keep: 1, Count: 3}, false)
	if diff := cmp.Diff([]string{path(ids[0])}, rep.Deleted); diff != "" {
		t.Errorf("by count (-want +got):\n%s", diff)
	}
	rep = f.pass(archive.Policy{Keep: 1, Age: 8*24*time.Hour + time.Hour}, false)
	if diff := cmp.Diff([]string{path(ids[1])}, rep.Deleted); diff != "" {
		t.Errorf("by age (-want +got):\n%s", diff)
	}
	for _, id := range ids[:2] {
		if _, err := os.Stat(path(id)); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("the archive of %s is still there: %v", id, err)
		}
	}
	for _, id := range ids[2:4] {
		if _, err := os.Stat(path(id)); err != nil {
			t.Errorf("the archive of %s is gone: %v", id, err)
		}
	}
	var reasons []string
	for _, ev := range f.evs {
		if ev.Type == archive.EventDeleted {
			reasons = append(reasons, ev.CycleID+":"+ev.Details["reason"].(string))
		}
	}
	if diff := cmp.Diff([]string{ids[0] + ":count", ids[1] + ":age"}, reasons); diff != "" {
		t.Errorf("archive.deleted events (-want +got):\n%s", diff)
	}
	// The store keeps the artifacts of a run whose archive is gone.
	files, err := f.store.Files(context.Background(), agentrunner.FileFilter{RunID: ids[0], Kind: agentrunner.FileArtifact, Latest: true})
	if err != nil || len(files) != 1 || string(files[0].Data) != "# Plan "+ids[0]+"\n" {
		t.Errorf("the stored artifact of a run whose archive was deleted: %v %+v", err, files)
	}
}

// TestADryRunChangesNothing: a dry run lists the runs it would archive
// and writes nothing.
func TestADryRunChangesNothing(t *testing.T) {
	f := newFixture(t)
	f.run("crypton", "20261101_000000", agentrunner.RunCompleted, t0.Add(-48*time.Hour), map[string]string{"plan.md": "# Plan\n"}, nil)
	f.run("crypton", "20261102_000000", agentrunner.RunCompleted, t0.Add(-24*time.Hour), map[string]string{"plan.md": "# Plan 2\n"}, nil)
	rep := f.pass(archive.Policy{Keep: 1}, true)
	if diff := cmp.Diff(&archive.Report{Archived: []string{"20261101_000000"}}, rep); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	if _, err := os.Stat(f.arc.History); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("a dry run made %s: %v", f.arc.History, err)
	}
	if diff := cmp.Diff(f.want["20261101_000000"], f.dirFiles("20261101_000000")); diff != "" {
		t.Errorf("the directory changed (-want +got):\n%s", diff)
	}
	if len(f.eventTypes()) != 0 {
		t.Errorf("a dry run recorded events: %v", f.eventTypes())
	}
}

// TestRunArchivesNowAndEveryInterval: Run passes at once, then after
// each interval on the clock, with the policy it reads each time.
func TestRunArchivesNowAndEveryInterval(t *testing.T) {
	f := newFixture(t)
	f.run("crypton", "20261101_000000", agentrunner.RunCompleted, t0.Add(-48*time.Hour), map[string]string{"plan.md": "# Plan\n"}, nil)
	f.run("crypton", "20261102_000000", agentrunner.RunCompleted, t0.Add(-24*time.Hour), map[string]string{"plan.md": "# Plan 2\n"}, nil)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	passes := 0
	f.clock.OnAfter = func(time.Duration) bool {
		if passes == 2 {
			cancel()
			return false
		}
		return true
	}
	keep := []int{2, 1}
	done := make(chan struct{})
	go func() {
		f.arc.Run(ctx, time.Hour, func() archive.Policy {
			p := archive.Policy{Keep: keep[passes]}
			passes++
			return p
		})
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not stop with its context")
	}
	if diff := cmp.Diff([]time.Duration{time.Hour}, f.clock.Waits()); diff != "" {
		t.Errorf("waits (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"run.archived:20261101_000000"}, f.eventTypes()); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
