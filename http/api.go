package http

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"maps"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/archive"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/engine"
	"github.com/agentrunner/agentrunner/internal/clip"
	"github.com/agentrunner/agentrunner/view"
	"github.com/agentrunner/agentrunner/workspace"
	"go.yaml.in/yaml/v3"
)

// Paging bounds of the list endpoints.
const (
	defaultLimit = 20
	maxLimit     = 500
)

// maxQuoted bounds a caller's value quoted in an error.
const maxQuoted = 64

// maxCycleEvents bounds the events GET /api/cycles/{id} shows; the rest
// are read with GET /api/events.
const maxCycleEvents = 10000

// cycleIDPattern is what a cycle id looks like (its UTC start time).
var cycleIDPattern = regexp.MustCompile(`^[0-9]{8}_[0-9]{6}$`)

// artifactNamePattern is a plain file name of a cycle directory: no path,
// no leading dot.
var artifactNamePattern = regexp.MustCompile(`^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$`)

// config is the configuration the engine runs with now.
func (s *Server) config() *config.Config {
	if s.opts.Engine != nil {
		if c := s.opts.Engine.Config(); c != nil {
			return c
		}
	}
	return s.cfg
}

// statusView is the loop's status (FR-062) and, when the server runs
// pipelines, the summary of their runs.
type statusView struct {
	*engine.Status
	Runs *RunsSummary `json:"runs,omitempty"`
}

func (s *Server) handleStatus(w http.ResponseWriter, r *http.Request) {
	st, err := engine.ReadStatus(r.Context(), s.store, s.config(), s.clock.Now())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	runs, err := s.runsSummary(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, statusView{Status: st, Runs: runs})
}

// queryInt reads an optional non-negative integer query parameter.
func queryInt(r *http.Request, name string, def, max int64) (int64, error) {
	v := r.URL.Query().Get(name)
	if v == "" {
		return def, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 0 || (max > 0 && n > max) {
		if max > 0 {
			return 0, agentrunner.Errorf(agentrunner.EINVALID, "query parameter %s: want an integer from 0 to %d, got %q", name, max, v)
		}
		return 0, agentrunner.Errorf(agentrunner.EINVALID, "query parameter %s: want a non-negative integer, got %q", name, v)
	}
	return n, nil
}

// limit reads the limit parameter: 1..maxLimit, default defaultLimit.
func limit(r *http.Request) (int, error) { return limitOr(r, defaultLimit) }

// limitOr reads the limit parameter: 1..maxLimit, default def.
func limitOr(r *http.Request, def int64) (int, error) {
	n, err := queryInt(r, "limit", def, maxLimit)
	if err != nil || n == 0 {
		return 0, agentrunner.Errorf(agentrunner.EINVALID, "query parameter limit: want an integer from 1 to %d, got %q", maxLimit, r.URL.Query().Get("limit"))
	}
	return int(n), nil
}

// viewCycle is c as the API shows it.
func (s *Server) viewCycle(c *agentrunner.Cycle) Cycle {
	v := Cycle{ID: c.ID, Pipeline: c.Pipeline, Status: c.Status, Step: c.Step, LastCompletedStep: c.LastCompletedStep,
		StartedAt: c.StartedAt, Error: c.Error}
	end := s.clock.Now()
	if !c.EndedAt.IsZero() {
		ended := c.EndedAt
		v.EndedAt, end = &ended, ended
	}
	v.DurationMS = end.Sub(c.StartedAt).Milliseconds()
	return v
}

// handleCycles lists recent cycles, newest first (FR-063). before pages.
func (s *Server) handleCycles(w http.ResponseWriter, r *http.Request) {
	n, err := limit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// The learning loop's cycles; GET /api/runs lists every pipeline's.
	f := agentrunner.CycleFilter{Pipeline: s.config().Name, Limit: n, Before: r.URL.Query().Get("before"), Status: agentrunner.CycleStatus(r.URL.Query().Get("status"))}
	if f.Before != "" && !cycleIDPattern.MatchString(f.Before) {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "query parameter before: want a cycle id such as 20260314_060000, got %q", f.Before))
		return
	}
	switch f.Status {
	case "", agentrunner.CycleRunning, agentrunner.CycleHalted, agentrunner.CycleCompleted, agentrunner.CycleFailed, agentrunner.CycleAborted:
	default:
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "query parameter status: want running, halted, completed, failed or aborted, got %q", f.Status))
		return
	}
	var cs []*agentrunner.Cycle
	if s.config().HasLoop() { // a workspace of graphs only has no cycles, whatever its runs are named
		if cs, err = s.store.Cycles(r.Context(), f); err != nil {
			s.writeError(w, r, err)
			return
		}
	}
	out := CycleList{Cycles: []Cycle{}}
	for _, c := range cs {
		out.Cycles = append(out.Cycles, s.viewCycle(c))
	}
	if len(cs) == n {
		out.NextBefore = cs[len(cs)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}

// cycleOf reads the cycle named in the path, or answers with the error.
func (s *Server) cycleOf(w http.ResponseWriter, r *http.Request) *agentrunner.Cycle {
	id := r.PathValue("id")
	if !cycleIDPattern.MatchString(id) {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "cycle id: want YYYYMMDD_HHMMSS, got %q", clip.String(id, maxQuoted)))
		return nil
	}
	c, err := s.store.Cycle(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return nil
	}
	return c
}

func timePtr(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	return &t
}

// handleCycle returns one cycle with its steps, attempts, artifacts and
// events (FR-064).
func (s *Server) handleCycle(w http.ResponseWriter, r *http.Request) {
	c := s.cycleOf(w, r)
	if c == nil {
		return
	}
	atts, err := s.store.Attempts(r.Context(), c.ID)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	evs, err := s.store.Events(r.Context(), agentrunner.EventFilter{CycleID: c.ID, Limit: maxCycleEvents + 1})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	arts, err := s.artifacts(r.Context(), c)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := CycleDetail{Cycle: s.viewCycle(c), Steps: []Step{}, Artifacts: arts, Events: []Event{}}
	if len(evs) > maxCycleEvents {
		evs, out.EventsTruncated = evs[:maxCycleEvents], true
	}
	now := s.clock.Now()
	for _, a := range atts {
		if len(out.Steps) == 0 || out.Steps[len(out.Steps)-1].Step != a.Step {
			out.Steps = append(out.Steps, Step{Step: a.Step, Agent: a.Agent, Attempts: []Attempt{}})
		}
		st := &out.Steps[len(out.Steps)-1]
		av := Attempt{Number: a.Number, Status: a.Status, ErrorClass: a.ErrorClass, Error: a.Error,
			StartedAt: timePtr(a.StartedAt), EndedAt: timePtr(a.EndedAt), NotBefore: timePtr(a.NotBefore), ExitCode: a.ExitCode,
			InputTokens: a.Usage.InputTokens, OutputTokens: a.Usage.OutputTokens, ToolCalls: a.Usage.ToolCalls}
		if !a.StartedAt.IsZero() {
			end := now
			if !a.EndedAt.IsZero() {
				end = a.EndedAt
			}
			av.DurationMS = end.Sub(a.StartedAt).Milliseconds()
		}
		st.Attempts = append(st.Attempts, av)
		st.Status, st.DurationMS = string(a.Status), st.DurationMS+av.DurationMS
	}
	for _, e := range evs {
		out.Events = append(out.Events, viewOf(e))
	}
	writeJSON(w, http.StatusOK, out)
}

// artifacts lists a run's artifacts: the store's newest copy of each,
// which is what the run produced whatever its view in the run's
// directory holds now. A run from before the store kept artifacts has no
// copies: its directory is listed.
func (s *Server) artifacts(ctx context.Context, c *agentrunner.Cycle) ([]Artifact, error) {
	files, err := s.store.Files(ctx, agentrunner.FileFilter{RunID: c.ID, Kind: agentrunner.FileArtifact, Latest: true, NoData: true})
	if err != nil {
		return nil, err
	}
	if len(files) == 0 {
		if s.archived(c) {
			return archivedArtifacts(s.archiveOf(c))
		}
		return dirArtifacts(c.Dir)
	}
	out := make([]Artifact, 0, len(files))
	for _, f := range files {
		out = append(out, Artifact{Name: f.Name, Size: f.Size, SHA256: f.SHA256, Modified: f.CreatedAt.UTC()})
	}
	slices.SortFunc(out, func(a, b Artifact) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// dirArtifacts lists the files of a cycle directory with their sizes and
// hashes. A missing directory (an archived cycle) has none.
func dirArtifacts(dir string) ([]Artifact, error) {
	out := []Artifact{}
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return out, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read cycle directory: %w", err)
	}
	for _, e := range entries {
		if !e.Type().IsRegular() || strings.HasPrefix(e.Name(), ".") {
			continue // temp files of a publication in progress
		}
		info, err := e.Info()
		if err != nil {
			continue // removed meanwhile
		}
		sum, err := hashFile(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		out = append(out, Artifact{Name: e.Name(), Size: info.Size(), SHA256: sum, Modified: info.ModTime().UTC()})
	}
	return out, nil
}

// archived reports whether a run was archived: its directory is gone, and
// its archive under cycles/history/ holds what it had.
func (s *Server) archived(run *agentrunner.Run) bool {
	return archive.Archived(workspace.Layout{Root: s.cfg.Abs(s.cfg.ArtifactsDir)}.History(), run)
}

// archiveOf is the archive of a run.
func (s *Server) archiveOf(run *agentrunner.Run) string {
	return archive.Path(workspace.Layout{Root: s.cfg.Abs(s.cfg.ArtifactsDir)}.History(), run.Pipeline, run.ID)
}

// archivedArtifacts lists the files of an archived run's directory, for
// a run from before the store kept artifacts.
func archivedArtifacts(path string) ([]Artifact, error) {
	files, err := archive.List(path)
	if err != nil {
		return nil, err
	}
	out := []Artifact{}
	for _, f := range files {
		out = append(out, Artifact{Name: f.Name, Size: f.Size, SHA256: f.SHA256, Modified: f.Mod.UTC()})
	}
	return out, nil
}

func hashFile(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", fmt.Errorf("hash %s: %w", filepath.Base(path), err)
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}

// contentTypes of artifacts, by extension.
var contentTypes = map[string]string{
	".md":   "text/markdown; charset=utf-8",
	".json": "application/json",
	".txt":  "text/plain; charset=utf-8",
}

// handleArtifact serves one artifact of a cycle: the store's newest
// copy, never its view (which a crash or a hand may have left stale), or
// for a run from before the store kept artifacts the file of its
// directory, confined to it. It only reads: the runner repairs views.
func (s *Server) handleArtifact(w http.ResponseWriter, r *http.Request) {
	if !s.validArtifactName(w, r) {
		return
	}
	if c := s.cycleOf(w, r); c != nil {
		s.serveArtifact(w, r, c, "cycle")
	}
}

// handleRunArtifact serves one artifact of a run of any pipeline, as
// handleArtifact does a cycle's.
func (s *Server) handleRunArtifact(w http.ResponseWriter, r *http.Request) {
	if !s.validArtifactName(w, r) {
		return
	}
	if run := s.runOf(w, r); run != nil {
		s.serveArtifact(w, r, run, "run")
	}
}

// validArtifactName checks the name of the artifact asked for, answering
// the error when it is not one.
func (s *Server) validArtifactName(w http.ResponseWriter, r *http.Request) bool {
	name := r.PathValue("name")
	if !artifactNamePattern.MatchString(name) || strings.Contains(name, "..") {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "artifact name: want a file name of the run directory (letters, digits, _, -, .), got %q", clip.String(name, maxQuoted)))
		return false
	}
	return true
}

// serveArtifact serves the store's newest copy of the run's artifact, or
// for a run from before the store kept artifacts the file of its
// directory; noun names the run in a not-found error.
func (s *Server) serveArtifact(w http.ResponseWriter, r *http.Request, run *agentrunner.Run, noun string) {
	name := r.PathValue("name")
	f, legacy, err := view.Latest(r.Context(), s.store, run.ID, name)
	switch {
	case err != nil:
		s.writeError(w, r, err)
	case f != nil:
		serveStored(w, r, f)
	case legacy:
		s.serveArtifactFile(w, r, run, name)
	default:
		s.writeError(w, r, agentrunner.Errorf(agentrunner.ENOTFOUND, "%s %s has no artifact %s", noun, run.ID, name))
	}
}

// serveStored serves the bytes of a stored file, typed by its name.
func serveStored(w http.ResponseWriter, r *http.Request, f *agentrunner.StoredFile) {
	setContentType(w, f.Name)
	http.ServeContent(w, r, "", f.CreatedAt, bytes.NewReader(f.Data))
}

// setContentType types an answer by the extension of the file it serves
// and forbids browsers to guess another type.
func setContentType(w http.ResponseWriter, name string) {
	ct, ok := contentTypes[filepath.Ext(name)]
	if !ok {
		ct = "application/octet-stream"
	}
	w.Header().Set("Content-Type", ct)
	w.Header().Set("X-Content-Type-Options", "nosniff")
}

// serveArtifactFile serves a file of a cycle directory, confined to it.
func (s *Server) serveArtifactFile(w http.ResponseWriter, r *http.Request, c *agentrunner.Cycle, name string) {
	if s.archived(c) {
		s.serveArchivedFile(w, r, c, name)
		return
	}
	root, err := os.OpenRoot(c.Dir)
	if err != nil {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.ENOTFOUND, "cycle %s has no directory", c.ID))
		return
	}
	defer root.Close()
	f, err := root.Open(name)
	if err != nil {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.ENOTFOUND, "cycle %s has no artifact %s", c.ID, name))
		return
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil || !info.Mode().IsRegular() {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.ENOTFOUND, "cycle %s has no artifact %s", c.ID, name))
		return
	}
	setContentType(w, name)
	http.ServeContent(w, r, "", info.ModTime(), f)
}

// serveArchivedFile serves a file of an archived run's directory from its
// archive, for a run from before the store kept artifacts.
func (s *Server) serveArchivedFile(w http.ResponseWriter, r *http.Request, c *agentrunner.Cycle, name string) {
	data, ok, err := archive.ReadFile(s.archiveOf(c), name)
	switch {
	case err != nil:
		s.writeError(w, r, err)
	case !ok:
		s.writeError(w, r, agentrunner.Errorf(agentrunner.ENOTFOUND, "cycle %s has no artifact %s", c.ID, name))
	default:
		setContentType(w, name)
		http.ServeContent(w, r, "", c.EndedAt, bytes.NewReader(data))
	}
}

// viewOf is e as the API, the stream and the log show it (FR-057).
func viewOf(e *agentrunner.Event) Event {
	return Event{ID: e.ID, Timestamp: e.Timestamp, Type: e.Type, Agent: e.Agent, Step: e.Step, CycleID: e.CycleID, Level: e.Level, Details: e.Details}
}

// handleErrors lists recent warnings and errors with their context, newest
// first (FR-065).
func (s *Server) handleErrors(w http.ResponseWriter, r *http.Request) {
	n, err := limit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	before, err := queryInt(r, "before", 0, 0)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	evs, err := s.store.Events(r.Context(), agentrunner.EventFilter{MinLevel: agentrunner.LevelWarn, Newest: true, BeforeID: before, Limit: n})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := ErrorList{Errors: []Event{}}
	for _, e := range evs {
		out.Errors = append(out.Errors, viewOf(e))
	}
	if len(evs) == n {
		out.NextBefore = evs[len(evs)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}

// eventQuery reads the filters of GET /api/events: since is an event id
// (events after it) or an RFC 3339 time (events at or after it).
func eventQuery(r *http.Request) (agentrunner.EventFilter, error) {
	q := r.URL.Query()
	f := agentrunner.EventFilter{CycleID: q.Get("cycle_id"), Type: q.Get("type"), MinLevel: agentrunner.Level(q.Get("level"))}
	// A cycle is a run: the events of any run are asked for by its id.
	if f.CycleID != "" && !runIDPattern.MatchString(f.CycleID) {
		return f, agentrunner.Errorf(agentrunner.EINVALID, "query parameter cycle_id: want a cycle or run id such as 20260314_060000 or review-000001, got %q", clip.String(f.CycleID, maxQuoted))
	}
	switch f.MinLevel {
	case "", agentrunner.LevelDebug, agentrunner.LevelInfo, agentrunner.LevelWarn, agentrunner.LevelError:
	default:
		return f, agentrunner.Errorf(agentrunner.EINVALID, "query parameter level: want debug, info, warn or error, got %q", clip.String(string(f.MinLevel), maxQuoted))
	}
	if since := q.Get("since"); since != "" {
		if id, err := strconv.ParseInt(since, 10, 64); err == nil && id >= 0 {
			f.AfterID = id
		} else if t, err := time.Parse(time.RFC3339Nano, since); err == nil {
			f.Since = t
		} else {
			return f, agentrunner.Errorf(agentrunner.EINVALID, "query parameter since: want an event id or an RFC 3339 time, got %q", clip.String(since, maxQuoted))
		}
	}
	return f, nil
}

// handleEvents lists events, oldest first; next_since continues the list.
func (s *Server) handleEvents(w http.ResponseWriter, r *http.Request) {
	f, err := eventQuery(r)
	if err == nil {
		f.Limit, err = limit(r)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	evs, err := s.store.Events(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := EventList{Events: []Event{}, NextSince: f.AfterID}
	for _, e := range evs {
		out.Events = append(out.Events, viewOf(e))
		out.NextSince = e.ID
	}
	if len(evs) == 0 && !f.Since.IsZero() && f.AfterID == 0 {
		// Nothing since that time: what comes next comes after the newest.
		newest, err := s.store.Events(r.Context(), agentrunner.EventFilter{Newest: true, Limit: 1})
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if len(newest) == 1 {
			out.NextSince = newest[0].ID
		}
	}
	writeJSON(w, http.StatusOK, out)
}

// toolQuery reads the parameters of GET /api/tools: limit (default
// maxLimit, so a caller that does not page gets every tool, as before
// paging), after (a tool name: the page starts after it) and since (an RFC
// 3339 time: usage from its hour on).
func toolQuery(r *http.Request) (n int, after string, since time.Time, err error) {
	if n, err = limitOr(r, maxLimit); err != nil {
		return 0, "", time.Time{}, err
	}
	after = r.URL.Query().Get("after")
	if v := r.URL.Query().Get("since"); v != "" {
		if since, err = time.Parse(time.RFC3339Nano, v); err != nil {
			return 0, "", time.Time{}, agentrunner.Errorf(agentrunner.EINVALID, "query parameter since: want an RFC 3339 time, got %q", clip.String(v, maxQuoted))
		}
	}
	return n, after, since, nil
}

// handleTools lists the registered tools, the agents that may call them,
// and their recorded usage, sorted by name and paged with after. Usage
// comes from the store's summary, whose size is the number of tools, not
// of calls.
func (s *Server) handleTools(w http.ResponseWriter, r *http.Request) {
	n, after, since, err := toolQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	usage, err := s.store.ToolUsage(r.Context(), since)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	byName := map[string]*Tool{}
	for _, spec := range s.opts.Tools {
		byName[spec.Name] = &Tool{Name: spec.Name, Description: spec.Description, Parameters: spec.Parameters, Agents: []string{}}
	}
	for _, name := range slices.Sorted(maps.Keys(s.cfg.Agents)) {
		for _, t := range s.cfg.Agents[name].Tools {
			if byName[t] == nil {
				byName[t] = &Tool{Name: t, Agents: []string{}}
			}
			byName[t].Agents = append(byName[t].Agents, name)
		}
	}
	for _, u := range usage {
		v := byName[u.Tool]
		if v == nil {
			v = &Tool{Name: u.Tool, Agents: []string{}}
			byName[u.Tool] = v
		}
		v.Usage = ToolUsage{Calls: u.Calls, Errors: u.Errors, LastCall: timePtr(u.LastCall)}
		if u.Calls > 0 {
			v.Usage.AvgDurationMS = u.Duration.Milliseconds() / int64(u.Calls)
		}
	}
	if s.opts.ToolStats != nil {
		for name, st := range s.opts.ToolStats() {
			if v := byName[name]; v != nil {
				v.Breaker = st.BreakerState
			}
		}
	}
	out := ToolList{Tools: []Tool{}}
	for _, name := range slices.Sorted(maps.Keys(byName)) {
		if name <= after && after != "" {
			continue
		}
		if len(out.Tools) == n {
			out.NextAfter = out.Tools[n-1].Name
			break
		}
		out.Tools = append(out.Tools, *byName[name])
	}
	writeJSON(w, http.StatusOK, out)
}

// agentOf reads the agent named in the path, or answers with the error.
func (s *Server) agentOf(w http.ResponseWriter, r *http.Request) string {
	agent := r.PathValue("agent")
	if s.cfg.Agents[agent] == nil {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.ENOTFOUND, "no agent %q (agents: %s)", clip.String(agent, maxQuoted), strings.Join(slices.Sorted(maps.Keys(s.cfg.Agents)), ", ")))
		return ""
	}
	return agent
}

// handleMailbox shows an agent's mailbox (FR-034/035), as the store holds
// it.
func (s *Server) handleMailbox(w http.ResponseWriter, r *http.Request) {
	agent := s.agentOf(w, r)
	if agent == "" {
		return
	}
	boxes := s.mailboxes()
	if boxes == nil {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EUNAVAILABLE, "mailboxes are not served by this server"))
		return
	}
	msgs, err := boxes.Stored(r.Context(), s.opts.Store, agent)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"agent": agent, "max_messages": boxes.Max(), "messages": orEmpty(msgs)})
}

func orEmpty[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}

// handlePostMailbox puts an operator's message into an agent's mailbox: an
// inject command the engine applies.
func (s *Server) handlePostMailbox(w http.ResponseWriter, r *http.Request) {
	agent := s.agentOf(w, r)
	if agent == "" {
		return
	}
	var body struct {
		Message string `json:"message"`
	}
	if !s.decode(w, r, &body, false) {
		return
	}
	args, err := injectArgs(agent, body.Message)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.command(w, r, agentrunner.CommandInject, args)
}

// maxInjectBytes bounds an injected message: mailboxes go into prompts.
const maxInjectBytes = 16 << 10

func injectArgs(agent, message string) (map[string]any, error) {
	switch {
	case strings.TrimSpace(message) == "":
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "message is required")
	case len(message) > maxInjectBytes:
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "message is %d bytes; at most %d", len(message), maxInjectBytes)
	}
	return map[string]any{"agent": agent, "message": message}, nil
}

// decode reads a JSON body strictly: at most server.max_body_bytes, no
// unknown fields, one value. An empty body is allowed when optional.
func (s *Server) decode(w http.ResponseWriter, r *http.Request, v any, optional bool) bool {
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.Server.MaxBodyBytes)
	data, err := io.ReadAll(r.Body)
	if err != nil {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "the body is longer than %d bytes (server.max_body_bytes)", s.cfg.Server.MaxBodyBytes))
		return false
	}
	if optional && len(strings.TrimSpace(string(data))) == 0 {
		return true
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "the body is not valid JSON for this request: %v", err))
		return false
	}
	if dec.More() {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "the body holds more than one JSON value"))
		return false
	}
	return true
}

// maxReasonBytes bounds an override's reason, kept in the audit log.
const maxReasonBytes = 1024

// handleOverride writes an operator's override as a durable command the
// engine consumes exactly once (FR-162..167).
func (s *Server) handleOverride(w http.ResponseWriter, r *http.Request) {
	kind := r.PathValue("kind")
	if !slices.Contains(agentrunner.OverrideKinds, kind) {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.ENOTFOUND, "no override %q (pause, resume, abort, inject, force-cycle)", clip.String(kind, maxQuoted)))
		return
	}
	var body struct {
		Reason  string `json:"reason"`
		Agent   string `json:"agent"`
		Message string `json:"message"`
	}
	if !s.decode(w, r, &body, kind != agentrunner.CommandInject) {
		return
	}
	if len(body.Reason) > maxReasonBytes {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "reason is %d bytes; at most %d", len(body.Reason), maxReasonBytes))
		return
	}
	args := map[string]any{}
	if kind == agentrunner.CommandInject {
		if s.cfg.Agents[body.Agent] == nil {
			s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "agent: no agent %q (agents: %s)", clip.String(body.Agent, maxQuoted), strings.Join(slices.Sorted(maps.Keys(s.cfg.Agents)), ", ")))
			return
		}
		var err error
		if args, err = injectArgs(body.Agent, body.Message); err != nil {
			s.writeError(w, r, err)
			return
		}
	} else if body.Agent != "" || body.Message != "" {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "agent and message are for inject only"))
		return
	}
	if body.Reason != "" {
		args["reason"] = body.Reason
	}
	s.command(w, r, kind, args)
}

// handleReload asks the engine to read its configuration again (admin).
func (s *Server) handleReload(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Reason string `json:"reason"`
	}
	if !s.decode(w, r, &body, true) {
		return
	}
	if len(body.Reason) > maxReasonBytes {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "reason is %d bytes; at most %d", len(body.Reason), maxReasonBytes))
		return
	}
	var args map[string]any
	if body.Reason != "" {
		args = map[string]any{"reason": body.Reason}
	}
	s.command(w, r, agentrunner.CommandReload, args)
}

// commandOf is c as the API shows it.
func commandOf(c *agentrunner.Command) Command {
	return Command{ID: c.ID, Kind: c.Kind, Operator: c.Operator, Args: c.Args, Target: c.Target, CreatedAt: c.CreatedAt, ConsumedAt: timePtr(c.ConsumedAt), Result: c.Result}
}

// command stores a command for the engine, attributed to the caller, logs
// it and wakes the engine.
func (s *Server) command(w http.ResponseWriter, r *http.Request, kind string, args map[string]any) {
	cmd, err := s.addCommand(r, kind, "", args)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if s.opts.Wake != nil {
		s.opts.Wake()
	}
	writeJSON(w, http.StatusAccepted, map[string]any{"command": commandOf(cmd)})
}

// addCommand stores a command attributed to the caller and logs it. A
// command with a target is refused with ECONFLICT when one of its kind
// and target exists (a second decision on a gate).
func (s *Server) addCommand(r *http.Request, kind, target string, args map[string]any) (*agentrunner.Command, error) {
	p, _ := PrincipalFrom(r.Context())
	cmd := &agentrunner.Command{Kind: kind, Operator: p.Name, CreatedAt: s.clock.Now(), Target: target}
	if len(args) > 0 {
		cmd.Args = args
	}
	if err := s.store.AddCommand(r.Context(), cmd); err != nil {
		return nil, err
	}
	logged := []any{"command", cmd.ID, "kind", kind, "operator", p.Name, "role", p.Role, "via", p.Via, "remote", r.RemoteAddr}
	if target != "" {
		logged = append(logged, "target", target)
	}
	if reason, ok := args["reason"]; ok {
		logged = append(logged, "reason", reason)
	}
	if agent, ok := args["agent"]; ok {
		logged = append(logged, "agent", agent, "message_bytes", len(args["message"].(string)))
	}
	s.log.Info("operator override", logged...)
	return cmd, nil
}

// handleAudit lists the commands, newest first, with who gave them, when,
// with what, and what the engine did (FR-167).
func (s *Server) handleAudit(w http.ResponseWriter, r *http.Request) {
	n, err := limit(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	before, err := queryInt(r, "before", 0, 0)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	cmds, err := s.store.Commands(r.Context(), agentrunner.CommandFilter{BeforeID: before, Limit: n})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := CommandList{Commands: []Command{}}
	for _, c := range cmds {
		out.Commands = append(out.Commands, commandOf(c))
	}
	if len(cmds) == n {
		out.NextBefore = cmds[len(cmds)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}

// handleConfig shows the effective configuration (defaults and
// environment overrides applied). It holds no secrets: only the names of
// the variables that hold them.
func (s *Server) handleConfig(w http.ResponseWriter, r *http.Request) {
	// Through YAML, so keys and durations read as in agentrunner.yaml.
	data, err := yaml.Marshal(s.config())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	var v map[string]any
	if err := yaml.Unmarshal(data, &v); err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, v)
}
