package http

import (
	"context"
	"net/http"
	"regexp"
	"slices"
	"strconv"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clip"
)

// attemptNumberPattern is an attempt's number in a path: 1-based, no
// leading zero.
var attemptNumberPattern = regexp.MustCompile(`^[1-9][0-9]{0,8}$`)

// missingFile says, by kind, why an attempt that exists may have no stored
// copy of that file.
var missingFile = map[agentrunner.FileKind]string{
	agentrunner.FilePrompt: "no stored prompt: events.retention pruned it, the attempt ended before its agent was given one, " +
		"or its step runs no agent (a run from before the store kept prompts has it in its attempt folder only)",
	agentrunner.FileValidation: "no stored validation report: its output was not rejected, the attempt ended before its output was validated, " +
		"or events.retention pruned it",
}

// handleAttemptFile serves the store's copy of a file an attempt wrote,
// of kind (its prompt, or its rejected output's validation report): what
// the attempt saw or why it failed, whatever its attempt folder holds.
func (s *Server) handleAttemptFile(kind agentrunner.FileKind) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		n := r.PathValue("n")
		if !attemptNumberPattern.MatchString(n) {
			s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "attempt number: want a positive integer such as 1, got %q", clip.String(n, maxQuoted)))
			return
		}
		run := s.runOf(w, r)
		if run == nil {
			return
		}
		number, _ := strconv.Atoi(n) // the pattern bounds it
		f, err := s.attemptFile(r.Context(), run.ID, r.PathValue("step"), number, kind)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		serveStored(w, r, f)
	}
}

// attemptFile returns the stored file of kind that attempt n of step
// wrote in a run, or ENOTFOUND saying whether the attempt or only the
// file is missing.
func (s *Server) attemptFile(ctx context.Context, runID, step string, n int, kind agentrunner.FileKind) (*agentrunner.StoredFile, error) {
	files, err := s.store.Files(ctx, agentrunner.FileFilter{RunID: runID, Kind: kind, Step: step, Attempt: n})
	if err != nil {
		return nil, err
	}
	if len(files) > 0 {
		return files[len(files)-1], nil // oldest first: the newest copy
	}
	atts, err := s.store.Attempts(ctx, runID)
	if err != nil {
		return nil, err
	}
	if !slices.ContainsFunc(atts, func(a *agentrunner.Attempt) bool { return a.Step == step && a.Number == n }) {
		return nil, agentrunner.Errorf(agentrunner.ENOTFOUND, "run %s has no attempt %d of step %q", runID, n, clip.String(step, maxQuoted))
	}
	return nil, agentrunner.Errorf(agentrunner.ENOTFOUND, "attempt %d of step %s of run %s has %s", n, step, runID, missingFile[kind])
}
