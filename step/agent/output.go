package agent

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/internal/atomicfile"
)

// accept reads the agent's artifact, checks it against its contract and
// publishes it into the run directory. It returns the artifact and, for
// a markdown one, its sections, found in the same parse.
func (at *attempt) accept() ([]byte, []artifact.Span, error) {
	data, err := at.read()
	if err != nil {
		return nil, nil, err
	}
	spans, err := check(at.agent.Contract, at.agent.Output.File, data)
	if err != nil {
		at.reject(err)
		return nil, nil, agentrunner.Fail(agentrunner.ClassInvalidOutput, "%v", err)
	}
	return data, spans, at.publish(data)
}

// read reads the artifact the agent wrote, up to output.max_bytes.
func (at *attempt) read() ([]byte, error) {
	file, path := at.agent.Output.File, at.inv.OutputPath
	var data []byte
	err := at.k.fileOp(OpReadArtifact, func() (err error) {
		data, err = atomicfile.ReadFileLimit(path, int64(at.agent.Output.MaxBytes))
		return err
	})
	if tl := (*atomicfile.TooLargeError)(nil); errors.As(err, &tl) {
		return nil, agentrunner.Fail(agentrunner.ClassInvalidOutput, "the agent's %s is %d bytes or more, over output.max_bytes (%d)", file, tl.Size, tl.Limit)
	}
	if agentrunner.ExhaustedResource(err) != "" {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "read %s: %w", file, err)
	}
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInvalidOutput, "the agent wrote no %s (expected at %s)", file, path)
	}
	return data, nil
}

// check validates an artifact; a markdown one also gives its sections,
// found in the same parse, for the deliveries that quote them.
func check(c artifact.Contract, file string, data []byte) ([]artifact.Span, error) {
	if mc, ok := c.(*artifact.MarkdownContract); ok {
		return mc.CheckSections(file, data)
	}
	return nil, artifact.Check(c, file, data)
}

// reject records why the artifact was rejected: in validation.txt in the
// attempt folder, and in an artifact.rejected event.
func (at *attempt) reject(err error) {
	var ve *artifact.ValidationError
	problems := []string{err.Error()}
	if errors.As(err, &ve) {
		problems = problems[:0]
		for _, p := range ve.Problems {
			problems = append(problems, p.String())
		}
	}
	_ = os.WriteFile(filepath.Join(at.sa.Dir, "validation.txt"), []byte(err.Error()+"\n"), 0o644) // for the operator; the event has it all
	at.event(at.step, agentrunner.EventArtifactRejected, agentrunner.LevelWarn, map[string]any{
		"artifact": at.agent.Output.File, "problems": problems,
	})
}

// publish moves the validated file into the run directory: the agent's
// output in the attempt folder is the temporary file, complete since the
// agent ended; it is fsynced and renamed, so the run directory only ever
// holds complete, valid artifacts.
//
// The run's directory is made here too, durably, when it is missing: the
// scheduler makes it when the run begins, without an fsync (it is a view
// of the run), so a crash may lose it.
func (at *attempt) publish(data []byte) error {
	file := at.agent.Output.File
	dst := filepath.Join(at.sa.RunDir, file)
	move := func() error { return atomicfile.Move(at.inv.OutputPath, dst) }
	err := at.k.fileOp(OpPublish, move)
	if errors.Is(err, fs.ErrNotExist) && missing(at.sa.RunDir) {
		if err := at.k.fileOp(OpRunDir, func() error { return atomicfile.MkdirAll(at.sa.RunDir, 0o755) }); err != nil {
			return agentrunner.Fail(agentrunner.ClassInternal, "create the run's directory: %w", err)
		}
		err = at.k.fileOp(OpPublish, move)
	}
	if err != nil {
		return agentrunner.Fail(agentrunner.ClassInternal, "publish %s: %w", file, err)
	}
	at.res.Output, at.res.Path = data, dst
	at.event(at.step, agentrunner.EventArtifactAccepted, agentrunner.LevelInfo, map[string]any{
		"artifact": file, "path": dst, "bytes": len(data), "sha256": artifact.Hash(data),
	})
	return nil
}

// missing reports whether nothing is at path.
func missing(path string) bool {
	_, err := os.Stat(path)
	return errors.Is(err, fs.ErrNotExist)
}
