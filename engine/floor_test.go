package engine

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/internal/atomicfile"
	"github.com/agentrunner/agentrunner/internal/cputime"
	"github.com/agentrunner/agentrunner/sqlite"
)

// BenchmarkDurabilityFloor does only the file-system and database work one
// step of an agent that works in memory cannot avoid, without the engine:
// commit one event with the artifact's and the prompt's bytes to SQLite
// with synchronous=FULL (the one fsync) and write the artifact into the
// cycle directory, its view, without an fsync; and, every benchSteps
// steps, what a cycle's start cannot avoid: its directory and one more
// commit (a cycle of n steps has n+1 transitions). BenchmarkStep/publish
// minus this is the engine's own cost, if the engine wrote the view on the
// step's path (it writes it in the background).
func BenchmarkDurabilityFloor(b *testing.B) { benchFloor(b, newFloor(b)) }

// BenchmarkDurabilityFloorOnRead is BenchmarkDurabilityFloor without the
// view, the floor of BenchmarkStep/publish-on-read: a pipeline with views
// on read writes no file for an artifact nobody reads.
func BenchmarkDurabilityFloorOnRead(b *testing.B) {
	f := newFloor(b)
	f.noView = true
	benchFloor(b, f)
}

func benchFloor(b *testing.B, f *floor) {
	user0, sys0, cpuOK := cputime.Self()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f.step(b)
	}
	b.StopTimer()
	if user1, sys1, _ := cputime.Self(); cpuOK {
		b.ReportMetric(float64(user1-user0)/float64(b.N), "user-ns/step")
		b.ReportMetric(float64(sys1-sys0)/float64(b.N), "sys-ns/step")
		b.ReportMetric(float64(user1-user0+sys1-sys0)/float64(b.N), "cpu-ns/step")
	}
}

// BenchmarkFsync measures the floor every durable commit shares, in
// agentrunner and in any peer: append one 4 KiB record (about what a
// step's WAL commit writes) to a file and fsync it. A step's time divided
// by this is the step in fsyncs.
func BenchmarkFsync(b *testing.B) {
	f, err := os.OpenFile(filepath.Join(benchDir(b), "fsync.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { f.Close() })
	record := make([]byte, 4096)
	syncs0 := atomicfile.Syncs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := f.Write(record); err != nil {
			b.Fatal(err)
		}
		if err := atomicfile.Sync(f); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	b.ReportMetric(float64(atomicfile.Syncs()-syncs0)/float64(b.N), "file-fsyncs/op")
}

// BenchmarkCreateFile measures what creating a small file costs, without
// an fsync: a view, or the floor's artifact, is one. It is 20–40 µs
// normally, and about 500 µs on ext4 without a journal for a minute or
// more after many files were deleted nearby, when each allocation passes
// over the inodes just freed. make bench-peer runs it in each pair, so the
// file system's phase shows beside the steps measured in it. The files
// stay (benchDir): removing them would start that phase.
func BenchmarkCreateFile(b *testing.B) {
	dir := benchDir(b)
	body := make([]byte, 400)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		f, err := os.OpenFile(filepath.Join(dir, fmt.Sprintf("f%d", i)), os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
		if err != nil {
			b.Fatal(err)
		}
		if _, err := f.Write(body); err != nil {
			b.Fatal(err)
		}
		if err := f.Close(); err != nil {
			b.Fatal(err)
		}
	}
}

// floor does a step's unavoidable work, one step per call.
type floor struct {
	dir, cycle string
	store      *sqlite.Store
	body       []byte
	n          int
	noView     bool // views on read: no file for the artifact
}

func newFloor(b *testing.B) *floor {
	dir := benchDir(b)
	store, err := sqlite.Open(context.Background(), filepath.Join(dir, "state.db"))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { store.Close() })
	body := make([]byte, 400)
	for i := range body {
		body[i] = 'x'
	}
	return &floor{dir: dir, store: store, body: body}
}

func (f *floor) step(b *testing.B) {
	i := f.n
	f.n++
	ev := &agentrunner.Event{Timestamp: time.Now(), Type: "x", Level: agentrunner.LevelInfo}
	run := fmt.Sprintf("c%d", i/benchSteps)
	if i%benchSteps == 0 {
		// A cycle's start: its directory (a view) and its transition.
		f.cycle = filepath.Join(f.dir, "cycles", run)
		if err := os.MkdirAll(f.cycle, 0o755); err != nil {
			b.Fatal(err)
		}
		if err := f.store.Apply(context.Background(), &agentrunner.Change{Events: []*agentrunner.Event{ev}}); err != nil {
			b.Fatal(err)
		}
	}
	data := f.body
	files := []*agentrunner.StoredFile{
		{RunID: run, Step: "s", Kind: agentrunner.FileArtifact, Name: "out.md", Data: data, SHA256: artifact.Hash(data), CreatedAt: ev.Timestamp},
		{RunID: run, Step: "s", Kind: agentrunner.FilePrompt, Name: "prompt.md", Data: f.body, SHA256: artifact.Hash(f.body), CreatedAt: ev.Timestamp},
	}
	if err := f.store.Apply(context.Background(), &agentrunner.Change{Events: []*agentrunner.Event{ev}, Files: files}); err != nil {
		b.Fatal(err)
	}
	if f.noView {
		return
	}
	if err := atomicfile.Replace(filepath.Join(f.cycle, fmt.Sprintf("out%d.md", i%benchSteps)), data, 0o644); err != nil {
		b.Fatal(err)
	}
}
