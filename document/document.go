// Package document keeps a pipeline's shared document (spec 2's
// docs/context/current_cycle.md): one file that the agents of the run in
// flight read, holding a header made from the run's inputs and the
// section each of its step runs committed, in order.
//
// The file is a view of the store, never the truth. The agents do not
// append to it: each returns its section as its artifact, which the
// scheduler commits with the step's outcome; only then is the document
// rendered again from the store and put in place with write-temp, fsync
// and rename. So a section is in the document whole or not at all, a
// failed attempt's text never reaches it, and a crash leaves the last
// complete version, which the next Follow brings up to date.
//
// When a run ends, its final document is written to the archive under
// the name its outcome gives (YYYY-MM-DD_cycle-NNN[_suffix].md), and then
// the live file is removed if it is still that run's. Both steps are
// idempotent and follow from the store alone, so a crash between them
// neither loses the archive nor writes it twice.
package document

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/atomicfile"
)

// Store is what a Document reads: the step runs of a run and the files
// they committed.
type Store interface {
	StepRuns(ctx context.Context, f agentrunner.StepRunFilter) ([]*agentrunner.StepRun, error)
	Files(ctx context.Context, f agentrunner.FileFilter) ([]*agentrunner.StoredFile, error)
}

// Document keeps the shared document of one pipeline's runs.
type Document struct {
	spec  agentrunner.DocumentSpec
	store Store
}

var _ agentrunner.RunFollower = (*Document)(nil)

// New returns the follower of the document spec describes.
func New(spec agentrunner.DocumentSpec, store Store) (*Document, error) {
	if spec.File == "" || spec.Archive == "" || store == nil {
		return nil, errors.New("document: a file, an archive folder and a store are required")
	}
	return &Document{spec: spec, store: store}, nil
}

// Follow brings the document to what the store says of run: for a run
// in flight (running or halted), the live file holds its document; for
// an ended one, the archive holds it under its outcome's name, and the
// live file, if it is still that run's, is gone. A queued run has no
// document yet.
func (d *Document) Follow(ctx context.Context, run *agentrunner.Run) error {
	if run.Status == agentrunner.RunQueued {
		return nil
	}
	doc, err := d.Render(ctx, run)
	if err != nil {
		return err
	}
	if !run.Status.Finished() {
		return put(d.spec.File, doc)
	}
	if err := put(filepath.Join(d.spec.Archive, ArchiveName(run)), doc); err != nil {
		return err
	}
	return d.removeLive(run.ID)
}

// ArchiveName is the name of an ended run's archived document: the date
// and number of its date-seq id, and a suffix for an outcome short of
// success: _incomplete when a loop's cap ended it, _failed when a step
// failed for good or an operator aborted it.
func ArchiveName(run *agentrunner.Run) string {
	name := run.ID
	if len(name) == len("2006-01-02-001") && name[10] == '-' {
		name = name[:10] + "_cycle-" + name[11:]
	}
	switch run.Status {
	case agentrunner.RunIncomplete:
		name += "_incomplete"
	case agentrunner.RunFailed, agentrunner.RunAborted:
		name += "_failed"
	}
	return name + ".md"
}

// Render makes the run's document from the store: the header, then each
// succeeded step run's artifact under "### Step Output", in the order
// they opened (the store's order), with an "## Iteration N" heading before each visit of the
// iteration step.
func (d *Document) Render(ctx context.Context, run *agentrunner.Run) ([]byte, error) {
	srs, err := d.store.StepRuns(ctx, agentrunner.StepRunFilter{RunID: run.ID, Status: agentrunner.StepRunSucceeded})
	if err != nil {
		return nil, fmt.Errorf("document of run %s: %w", run.ID, err)
	}
	files, err := d.store.Files(ctx, agentrunner.FileFilter{RunID: run.ID, Kind: agentrunner.FileArtifact})
	if err != nil {
		return nil, fmt.Errorf("document of run %s: %w", run.ID, err)
	}
	sections := map[string][]byte{} // by step run, the newest attempt's
	for _, f := range files {
		sections[agentrunner.StepRunKey(f.Step, f.Visit)] = f.Data
	}
	var b bytes.Buffer
	header(&b, run)
	for _, sr := range srs {
		data, ok := sections[sr.Key()]
		if !ok {
			continue // a gate: no section
		}
		if sr.Step == d.spec.Iteration {
			fmt.Fprintf(&b, "## Iteration %d\n\n", sr.Visit)
		}
		fmt.Fprintf(&b, "### %s Output\n\n%s\n\n---\n\n", title(sr.Step), bytes.TrimSpace(data))
	}
	return b.Bytes(), nil
}

// header writes spec 2's header: the cycle, its goal, its current state
// and its context documents, from the run's inputs goal, state and docs.
func header(b *bytes.Buffer, run *agentrunner.Run) {
	fmt.Fprintf(b, "# Cycle: %s\n\n## Goal\n%s\n\n", run.ID, orNone(text(run.Inputs["goal"]), "(no goal was given)"))
	fmt.Fprintf(b, "## Current State\n%s\n\n", orNone(bullets(run.Inputs["state"]), "- (not described)"))
	fmt.Fprintf(b, "## Context Docs\n%s\n\n---\n\n", orNone(bullets(run.Inputs["docs"]), "- (none)"))
}

// LiveCycle is the cycle id in the header of a document ("" if none).
func LiveCycle(doc []byte) string {
	first, _, _ := bytes.Cut(doc, []byte("\n"))
	id, ok := strings.CutPrefix(string(first), "# Cycle: ")
	if !ok {
		return ""
	}
	return strings.TrimSpace(id)
}

// removeLive removes the live document if it is the document of run id
// (one of a later run stays), and what a crash left of a write of it.
func (d *Document) removeLive(id string) error {
	if err := atomicfile.RemoveTemps(d.spec.File); err != nil {
		return err
	}
	doc, err := os.ReadFile(d.spec.File)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return err
	case LiveCycle(doc) != id:
		return nil
	}
	if err := os.Remove(d.spec.File); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return atomicfile.SyncDir(filepath.Dir(d.spec.File))
}

// put writes data to path with write-temp, fsync and rename, unless the
// file holds it already; a temporary file of an earlier write of path that
// a crash left is removed first.
func put(path string, data []byte) error {
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		return nil
	}
	if err := atomicfile.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	if err := atomicfile.RemoveTemps(path); err != nil { // a write a crash cut short
		return err
	}
	return atomicfile.WriteFile(path, data, 0o644)
}

// text is a string input, trimmed; any other value is written as Go
// prints it, so nothing given is dropped.
func text(v any) string {
	switch v := v.(type) {
	case nil:
		return ""
	case string:
		return strings.TrimSpace(v)
	}
	return fmt.Sprint(v)
}

// bullets makes a list input, or a text input's lines, a markdown list.
func bullets(v any) string {
	var items []string
	switch v := v.(type) {
	case []any:
		for _, x := range v {
			items = append(items, text(x))
		}
	default:
		items = strings.Split(text(v), "\n")
	}
	var b strings.Builder
	for _, it := range items {
		it = strings.TrimSpace(it)
		if it == "" {
			continue
		}
		if !strings.HasPrefix(it, "- ") {
			it = "- " + it
		}
		b.WriteString(it + "\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}

func orNone(s, none string) string {
	if s == "" {
		return none
	}
	return s
}

// title is a step's name as a heading gives it: orchestrator, Orchestrator.
func title(step string) string {
	if step == "" {
		return step
	}
	return strings.ToUpper(step[:1]) + step[1:]
}
