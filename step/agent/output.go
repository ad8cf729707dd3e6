package agent

import (
	"errors"
	"os"
	"path/filepath"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/artifact"
	"github.com/agentrunner/agentrunner/internal/atomicfile"
)

// accept reads the agent's artifact, checks it against its contract and
// hands it to the scheduler to commit (publish). It returns the artifact and, for
// a markdown one, its sections, found in the same parse.
func (at *attempt) accept() ([]byte, []artifact.Span, error) {
	data, err := at.read()
	if err != nil {
		return nil, nil, err
	}
	spans, err := check(at.agent.Contract, at.agent.Output.File, data)
	if err == nil {
		err = at.checkSignal(data)
	}
	if err != nil {
		at.reject(err)
		return nil, nil, agentrunner.Fail(agentrunner.ClassInvalidOutput, "%v", err)
	}
	return data, spans, at.publish(data)
}

// read takes the artifact the agent returned, or reads the one it wrote,
// up to output.max_bytes.
func (at *attempt) read() ([]byte, error) {
	file, path := at.agent.Output.File, at.inv.OutputPath
	if at.inMemory || at.returned != nil {
		return at.take()
	}
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

// take takes the artifact an agent working in memory returned, within
// output.max_bytes.
func (at *attempt) take() ([]byte, error) {
	file, data, limit := at.agent.Output.File, at.returned, at.agent.Output.MaxBytes
	switch {
	case data == nil:
		return nil, agentrunner.Fail(agentrunner.ClassInvalidOutput, "the agent returned no %s", file)
	case limit > 0 && len(data) > limit:
		return nil, agentrunner.Fail(agentrunner.ClassInvalidOutput, "the agent's %s is %d bytes, over output.max_bytes (%d)", file, len(data), limit)
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

// validationFile is the report of a rejected output, in the attempt folder.
const validationFile = "validation.txt"

// reject records why the artifact was rejected: in validation.txt in the
// attempt folder and the store, and in an artifact.rejected event.
func (at *attempt) reject(err error) {
	var ve *artifact.ValidationError
	problems := []string{err.Error()}
	if errors.As(err, &ve) {
		problems = problems[:0]
		for _, p := range ve.Problems {
			problems = append(problems, p.String())
		}
	}
	report := []byte(err.Error() + "\n")
	if !at.inMemory {
		_ = os.WriteFile(filepath.Join(at.sa.Dir, validationFile), report, 0o644) // its view, for the operator
	}
	at.keep(agentrunner.FileValidation, validationFile, report)
	at.event(at.step, agentrunner.EventArtifactRejected, agentrunner.LevelWarn, map[string]any{
		"artifact": at.agent.Output.File, "problems": problems,
	})
}

// publish hands the validated artifact to the scheduler, which commits
// its bytes with the step's outcome and then makes its view in the run's
// directory: by moving the agent's file there, or from the bytes an agent
// in memory returned. No fsync of that file is needed, the committed copy
// is the durable one.
func (at *attempt) publish(data []byte) error {
	file := at.agent.Output.File
	dst := filepath.Join(at.sa.RunDir, file)
	at.res.Output, at.res.Path = data, dst
	f := at.keep(agentrunner.FileArtifact, file, data)
	if !at.inMemory && at.returned == nil {
		f.From = at.inv.OutputPath // moved into place: no new file
	}
	at.event(at.step, agentrunner.EventArtifactAccepted, agentrunner.LevelInfo, map[string]any{
		"artifact": file, "path": dst, "bytes": len(data), "sha256": artifact.Hash(data),
	})
	return nil
}

// keep adds a file to those the scheduler commits with the outcome.
func (at *attempt) keep(kind agentrunner.FileKind, name string, data []byte) *agentrunner.StoredFile {
	f := &agentrunner.StoredFile{Kind: kind, Name: name, Data: data}
	at.res.Files = append(at.res.Files, f)
	return f
}
