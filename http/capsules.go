package http

import (
	"bytes"
	"cmp"
	"errors"
	"io"
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/capsule"
	"github.com/agentrunner/agentrunner/internal/clip"
)

// Capsules (spec 3's hand-off notes) are read and written through the
// capsule Service, which every surface shares: the API adds no check of
// its own to a capsule, only to its requests.

// The paging bounds of the capsule lists and searches.
const (
	capsuleListLimit, capsuleListMax     = 100, 1000
	capsuleSearchLimit, capsuleSearchMax = 20, 100
)

// importPath is the route whose body is JSON lines.
const importPath = "/api/capsules/import"

// ndjson is the media type of JSON lines.
const ndjson = "application/x-ndjson"

// capsuleFilterKeys are the query parameters that select capsules.
var capsuleFilterKeys = []string{"workspace", "run_id", "phase", "role", "tag", "include_deleted"}

// CapsuleList is a page of capsules, newest first, without their texts;
// NextBefore, when set, asks for the next page.
type CapsuleList struct {
	Capsules   []capsule.View `json:"capsules"`
	NextBefore int64          `json:"next_before,omitempty"`
}

// CapsuleHits are the capsules a search found, best first.
type CapsuleHits struct {
	Hits []capsule.Hit `json:"hits"`
}

// CapsuleCount is how many live capsules a workspace has of a phase and
// role.
type CapsuleCount struct {
	Workspace string `json:"workspace"`
	Phase     string `json:"phase"`
	Role      string `json:"role"`
	Count     int    `json:"count"`
}

// CapsuleInventory counts the live capsules by workspace, phase and role.
type CapsuleInventory struct {
	Counts []CapsuleCount `json:"counts"`
}

// CapsuleImported counts what an import did.
type CapsuleImported struct {
	Stored   int `json:"stored"`
	Replaced int `json:"replaced"`
	Skipped  int `json:"skipped"`
}

// CapsuleRequest is the body of POST /api/capsules.
type CapsuleRequest struct {
	Workspace string   `json:"workspace"`
	Name      string   `json:"name"`
	RunID     string   `json:"run_id"`
	Phase     string   `json:"phase"`
	Role      string   `json:"role"`
	Tags      []string `json:"tags"`
	Text      string   `json:"capsule_text"`
	// Upsert replaces the live capsule of the name as its next version.
	Upsert bool `json:"upsert"`
}

// CapsulePatch is the body of PATCH /api/capsules/{id}: the version read,
// and the fields to change (the others are kept).
type CapsulePatch struct {
	Version *int      `json:"version"`
	Text    *string   `json:"capsule_text"`
	RunID   *string   `json:"run_id"`
	Phase   *string   `json:"phase"`
	Role    *string   `json:"role"`
	Tags    *[]string `json:"tags"`
}

// CapsuleBulkUpdate is the body of POST /api/capsules/bulk-update.
type CapsuleBulkUpdate struct {
	Filter capsule.Filter `json:"filter"`
	Set    struct {
		Phase *string   `json:"phase"`
		Role  *string   `json:"role"`
		Tags  *[]string `json:"tags"`
	} `json:"set"`
}

// CapsuleBulkDelete is the body of POST /api/capsules/bulk-delete.
type CapsuleBulkDelete struct {
	Filter capsule.Filter `json:"filter"`
}

// CapsuleCompose is the body of POST /api/capsules/compose.
type CapsuleCompose struct {
	Capsules []capsule.Ref `json:"capsules"`
}

// capsules returns the capsule service, or answers that there is none.
func (s *Server) capsules(w http.ResponseWriter, r *http.Request) *capsule.Service {
	if s.opts.Capsules == nil {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EUNAVAILABLE, "capsules are not served by this server"))
	}
	return s.opts.Capsules
}

// capsuleQuery returns the query of a capsule route, refusing a parameter
// that is not one of known, or one given twice.
func capsuleQuery(r *http.Request, known ...string) (url.Values, error) {
	return strictQuery(r, nil, known...)
}

// strictQuery returns the query of a route, refusing a parameter that is
// not one of known, or one given twice unless it is repeatable.
func strictQuery(r *http.Request, repeatable []string, known ...string) (url.Values, error) {
	q := r.URL.Query()
	for _, k := range slices.Sorted(maps.Keys(q)) {
		switch {
		case !slices.Contains(known, k):
			takes := "none"
			if len(known) > 0 {
				takes = strings.Join(known, ", ")
			}
			return nil, agentrunner.Errorf(agentrunner.EINVALID, "unknown query parameter %q: %s %s takes %s",
				clip.String(k, maxQuoted), r.Method, clip.String(r.URL.Path, maxQuoted), takes)
		case len(q[k]) > 1 && !slices.Contains(repeatable, k):
			return nil, agentrunner.Errorf(agentrunner.EINVALID, "query parameter %s is given %d times; give it once", k, len(q[k]))
		}
	}
	return q, nil
}

// capsuleFilter reads the filter parameters of a query.
func capsuleFilter(q url.Values) (agentrunner.CapsuleFilter, error) {
	f := agentrunner.CapsuleFilter{Workspace: q.Get("workspace"), RunID: q.Get("run_id"), Phase: q.Get("phase"), Role: q.Get("role"), Tag: q.Get("tag")}
	if v := q.Get("include_deleted"); v != "" {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return f, agentrunner.Errorf(agentrunner.EINVALID, "query parameter include_deleted: want true or false, got %q", clip.String(v, maxQuoted))
		}
		f.IncludeDeleted = b
	}
	return f, nil
}

// capsuleInt reads an optional integer parameter from 1 to most; 0 when
// it is not given.
func capsuleInt(q url.Values, name string, most int64) (int64, error) {
	v := q.Get(name)
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 || n > most {
		return 0, agentrunner.Errorf(agentrunner.EINVALID, "query parameter %s: want an integer from 1 to %d, got %q", name, most, clip.String(v, maxQuoted))
	}
	return n, nil
}

// capsuleID reads the capsule id of the path, or answers the error.
func (s *Server) capsuleID(w http.ResponseWriter, r *http.Request) (int64, bool) {
	v := r.PathValue("id")
	id, err := strconv.ParseInt(v, 10, 64)
	if err != nil || id < 1 {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "capsule id: want a positive integer, got %q", clip.String(v, maxQuoted)))
		return 0, false
	}
	return id, true
}

// inContext keeps what an error's wrapping says (the line of an import,
// the capsule of a compose) in the message a client gets, which is
// otherwise the innermost coded error's alone. Internal errors stay as
// they are, so nothing of them leaks.
func inContext(err error) error {
	code := agentrunner.ErrorCode(err)
	var e *agentrunner.Error
	if code == agentrunner.EINTERNAL || !errors.As(err, &e) || e == err {
		return err
	}
	return &agentrunner.Error{Code: code, Message: err.Error()}
}

// views shows capsules without their texts.
func views(cs []*agentrunner.Capsule) []capsule.View {
	out := make([]capsule.View, len(cs))
	for i, c := range cs {
		out[i] = capsule.ViewOf(c, false)
	}
	return out
}

// logCapsuleWrite logs a change made through the API, with who made it.
func (s *Server) logCapsuleWrite(r *http.Request, op string, attrs ...any) {
	p, _ := PrincipalFrom(r.Context())
	s.log.Info("capsule "+op, append(attrs, "operator", p.Name, "role", p.Role, "via", p.Via, "remote", r.RemoteAddr)...)
}

// handleCapsules lists capsules, newest first, without their texts.
func (s *Server) handleCapsules(w http.ResponseWriter, r *http.Request) {
	svc := s.capsules(w, r)
	if svc == nil {
		return
	}
	q, err := capsuleQuery(r, append(slices.Clone(capsuleFilterKeys), "before", "limit")...)
	var f agentrunner.CapsuleFilter
	var before, n int64
	if err == nil {
		f, err = capsuleFilter(q)
	}
	if err == nil {
		before, err = capsuleInt(q, "before", 1<<62)
	}
	if err == nil {
		n, err = capsuleInt(q, "limit", capsuleListMax)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f.Before, f.Limit = before, int(cmp.Or(n, capsuleListLimit))
	cs, err := svc.List(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := CapsuleList{Capsules: views(cs)}
	if len(cs) == f.Limit {
		out.NextBefore = cs[len(cs)-1].ID
	}
	writeJSON(w, http.StatusOK, out)
}

// handleSearchCapsules finds capsules by full-text query, best first.
func (s *Server) handleSearchCapsules(w http.ResponseWriter, r *http.Request) {
	svc := s.capsules(w, r)
	if svc == nil {
		return
	}
	q, err := capsuleQuery(r, append([]string{"q"}, append(slices.Clone(capsuleFilterKeys), "limit")...)...)
	var f agentrunner.CapsuleFilter
	var n int64
	if err == nil {
		f, err = capsuleFilter(q)
	}
	if err == nil {
		n, err = capsuleInt(q, "limit", capsuleSearchMax)
	}
	if err == nil && strings.TrimSpace(q.Get("q")) == "" {
		err = agentrunner.Errorf(agentrunner.EINVALID, "query parameter q is required: the words to search for")
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	f.Limit = int(cmp.Or(n, capsuleSearchLimit))
	hits, err := svc.Search(r.Context(), q.Get("q"), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := CapsuleHits{Hits: make([]capsule.Hit, len(hits))}
	for i, h := range hits {
		out.Hits[i] = capsule.Hit{View: capsule.ViewOf(h.Capsule, false), Rank: h.Rank, Snippet: h.Snippet}
	}
	writeJSON(w, http.StatusOK, out)
}

// handleCapsuleInventory counts the live capsules by workspace, phase and
// role.
func (s *Server) handleCapsuleInventory(w http.ResponseWriter, r *http.Request) {
	svc := s.capsules(w, r)
	if svc == nil {
		return
	}
	if !s.noQuery(w, r) {
		return
	}
	counts, err := svc.Inventory(r.Context())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := CapsuleInventory{Counts: make([]CapsuleCount, len(counts))}
	for i, c := range counts {
		out.Counts[i] = CapsuleCount{Workspace: c.Workspace, Phase: c.Phase, Role: c.Role, Count: c.N}
	}
	writeJSON(w, http.StatusOK, out)
}

// handleLatestCapsule returns the newest live capsule of a workspace, of
// a phase and role when given, with its text.
func (s *Server) handleLatestCapsule(w http.ResponseWriter, r *http.Request) {
	svc := s.capsules(w, r)
	if svc == nil {
		return
	}
	q, err := capsuleQuery(r, "workspace", "phase", "role")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	c, err := svc.Latest(r.Context(), q.Get("workspace"), q.Get("phase"), q.Get("role"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, capsule.ViewOf(c, true))
}

// handleExportCapsules writes the capsules a filter selects as JSON
// lines, oldest first, for an import.
func (s *Server) handleExportCapsules(w http.ResponseWriter, r *http.Request) {
	svc := s.capsules(w, r)
	if svc == nil {
		return
	}
	q, err := capsuleQuery(r, capsuleFilterKeys...)
	var f agentrunner.CapsuleFilter
	if err == nil {
		f, err = capsuleFilter(q)
	}
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	// Written to a buffer first, so that a failure is an error answer
	// rather than a cut-off 200.
	var b bytes.Buffer
	if _, err := svc.Export(r.Context(), &b, f); err != nil {
		s.writeError(w, r, err)
		return
	}
	w.Header().Set("Content-Type", ndjson)
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	w.Write(b.Bytes())
}

// handleImportCapsules stores the capsules of JSON lines an export wrote.
// The body is read whole first (at most server.max_body_bytes), so that
// one too long imports nothing.
func (s *Server) handleImportCapsules(w http.ResponseWriter, r *http.Request) {
	svc := s.capsules(w, r)
	if svc == nil {
		return
	}
	q, err := capsuleQuery(r, "on_conflict")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	policy := capsule.OnConflict(q.Get("on_conflict"))
	if policy == "" {
		policy = capsule.Skip
	}
	if policy != capsule.Skip && policy != capsule.Replace {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "query parameter on_conflict: want skip or replace, got %q", clip.String(string(policy), maxQuoted)))
		return
	}
	r.Body = http.MaxBytesReader(w, r.Body, s.cfg.Server.MaxBodyBytes)
	data, err := io.ReadAll(r.Body)
	if err != nil {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "the body is longer than %d bytes (server.max_body_bytes): split the import", s.cfg.Server.MaxBodyBytes))
		return
	}
	n, err := svc.Import(r.Context(), bytes.NewReader(data), policy)
	if n.Stored+n.Replaced > 0 {
		s.logCapsuleWrite(r, "import", "stored", n.Stored, "replaced", n.Replaced, "skipped", n.Skipped)
	}
	if err != nil {
		if code := agentrunner.ErrorCode(err); code != agentrunner.EINTERNAL {
			err = agentrunner.Errorf(code, "%v (imported before it: %d stored, %d replaced, %d skipped)", err, n.Stored, n.Replaced, n.Skipped)
		}
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, CapsuleImported{Stored: n.Stored, Replaced: n.Replaced, Skipped: n.Skipped})
}

// handleCapsule returns a capsule by id, live or deleted, with its text.
func (s *Server) handleCapsule(w http.ResponseWriter, r *http.Request) {
	svc, id, ok := s.capsuleTarget(w, r)
	if !ok {
		return
	}
	c, err := svc.FetchID(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, capsule.ViewOf(c, true))
}

// handleCapsuleByName returns the live capsule of a workspace by name,
// with its text.
func (s *Server) handleCapsuleByName(w http.ResponseWriter, r *http.Request) {
	svc := s.capsules(w, r)
	if svc == nil {
		return
	}
	if !s.noQuery(w, r) {
		return
	}
	c, err := svc.Fetch(r.Context(), r.PathValue("workspace"), r.PathValue("name"))
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, capsule.ViewOf(c, true))
}

// handlePostCapsule stores a new capsule, or with upsert the next version
// of the live one of its name.
func (s *Server) handlePostCapsule(w http.ResponseWriter, r *http.Request) {
	svc, body, ok := capsuleRequest[CapsuleRequest](s, w, r)
	if !ok {
		return
	}
	c, err := svc.Put(r.Context(), &agentrunner.Capsule{Workspace: body.Workspace, Name: body.Name, RunID: body.RunID,
		Phase: body.Phase, Role: body.Role, Tags: body.Tags, Text: body.Text}, body.Upsert)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.logCapsuleWrite(r, "stored", "id", c.ID, "workspace", c.Workspace, "name", c.Name, "version", c.Version)
	w.Header().Set("Location", "/api/capsules/"+strconv.FormatInt(c.ID, 10))
	writeJSON(w, http.StatusCreated, capsule.ViewOf(c, false))
}

// handlePatchCapsule changes the fields given of a live capsule, if it is
// still at the version the caller read.
func (s *Server) handlePatchCapsule(w http.ResponseWriter, r *http.Request) {
	svc, id, ok := s.capsuleTarget(w, r)
	if !ok {
		return
	}
	var body CapsulePatch
	if !s.decode(w, r, &body, false) {
		return
	}
	if body.Version == nil {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "version is required: the version of the capsule you read"))
		return
	}
	c, err := svc.Update(r.Context(), id, *body.Version, capsule.Patch{Text: body.Text, RunID: body.RunID, Phase: body.Phase, Role: body.Role, Tags: body.Tags})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.logCapsuleWrite(r, "updated", "id", c.ID, "workspace", c.Workspace, "name", c.Name, "version", c.Version)
	writeJSON(w, http.StatusOK, capsule.ViewOf(c, false))
}

// handleDeleteCapsule deletes a live capsule, softly.
func (s *Server) handleDeleteCapsule(w http.ResponseWriter, r *http.Request) {
	svc, id, ok := s.capsuleTarget(w, r)
	if !ok {
		return
	}
	if err := svc.Delete(r.Context(), id); err != nil {
		s.writeError(w, r, err)
		return
	}
	s.logCapsuleWrite(r, "deleted", "id", id)
	w.WriteHeader(http.StatusNoContent)
}

// handleBulkUpdateCapsules sets phase, role or tags on every live capsule
// a filter selects.
func (s *Server) handleBulkUpdateCapsules(w http.ResponseWriter, r *http.Request) {
	svc, body, ok := capsuleRequest[CapsuleBulkUpdate](s, w, r)
	if !ok {
		return
	}
	n, err := svc.BulkUpdate(r.Context(), body.Filter.Of(), agentrunner.CapsuleChanges{Phase: body.Set.Phase, Role: body.Set.Role, Tags: body.Set.Tags})
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.logCapsuleWrite(r, "bulk update", "updated", n)
	writeJSON(w, http.StatusOK, map[string]int{"updated": n})
}

// handleBulkDeleteCapsules deletes every live capsule a filter selects.
func (s *Server) handleBulkDeleteCapsules(w http.ResponseWriter, r *http.Request) {
	svc, body, ok := capsuleRequest[CapsuleBulkDelete](s, w, r)
	if !ok {
		return
	}
	n, err := svc.BulkDelete(r.Context(), body.Filter.Of())
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	s.logCapsuleWrite(r, "bulk delete", "deleted", n)
	writeJSON(w, http.StatusOK, map[string]int{"deleted": n})
}

// handleComposeCapsules joins capsules into one markdown bundle. It reads
// only; it is a POST for its body, the list of capsules.
func (s *Server) handleComposeCapsules(w http.ResponseWriter, r *http.Request) {
	svc, body, ok := capsuleRequest[CapsuleCompose](s, w, r)
	if !ok {
		return
	}
	text, err := svc.Compose(r.Context(), body.Capsules)
	if err != nil {
		s.writeError(w, r, inContext(err))
		return
	}
	w.Header().Set("Content-Type", "text/markdown; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(http.StatusOK)
	io.WriteString(w, text)
}

// noQuery refuses a request to a route that takes no query parameters,
// naming the one given; it reports whether the request may go on.
func (s *Server) noQuery(w http.ResponseWriter, r *http.Request) bool {
	if _, err := capsuleQuery(r); err != nil {
		s.writeError(w, r, err)
		return false
	}
	return true
}

// capsuleRequest is how a capsule route with a JSON body starts: the
// service, no query parameters, and the body decoded into T; ok is false
// when it has answered the request already.
func capsuleRequest[T any](s *Server, w http.ResponseWriter, r *http.Request) (svc *capsule.Service, body *T, ok bool) {
	if svc = s.capsules(w, r); svc == nil || !s.noQuery(w, r) {
		return nil, nil, false
	}
	body = new(T)
	if !s.decode(w, r, body, false) {
		return nil, nil, false
	}
	return svc, body, true
}

// capsuleTarget is how a route on one capsule by id starts: the service,
// the id of the path, and no query parameters; ok is false when it has
// answered the request already.
func (s *Server) capsuleTarget(w http.ResponseWriter, r *http.Request) (svc *capsule.Service, id int64, ok bool) {
	if svc = s.capsules(w, r); svc == nil {
		return nil, 0, false
	}
	if id, ok = s.capsuleID(w, r); !ok || !s.noQuery(w, r) {
		return nil, 0, false
	}
	return svc, id, true
}
