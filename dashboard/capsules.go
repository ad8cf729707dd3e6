package dashboard

import (
	"context"
	"html/template"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"unicode"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/capsule"
)

// Bounds of the capsule pages.
const (
	// capsulesPage is one page of the list; capsuleHits one search's
	// hits (the API's most is 100: a search is not paged).
	capsulesPage = 50
	capsuleHits  = 50
	// maxCapsuleField is the longest workspace, phase or tag a filter
	// takes: the capsule service's own bound on those fields.
	maxCapsuleField = 200
)

// capsulesView is the capsules page's data: a page of capsules, newest
// first, or a search's hits, best first.
type capsulesView struct {
	// Workspace, Phase and Tag filter; Query searches.
	Workspace, Phase, Tag, Query string
	Capsules                     []*agentrunner.Capsule
	Hits                         []*agentrunner.CapsuleHit
	// NextBefore pages the list.
	NextBefore int64
	// Problem says why a search found nothing to show: a query the index
	// cannot parse, with how to write it.
	Problem string
}

// capsuleFilters reads and checks the filters of the capsules page.
func capsuleFilters(q url.Values) (capsulesView, error) {
	v := capsulesView{Workspace: strings.TrimSpace(q.Get("workspace")), Phase: strings.TrimSpace(q.Get("phase")),
		Tag: strings.TrimSpace(q.Get("tag")), Query: strings.TrimSpace(q.Get("q"))}
	for _, f := range []struct{ key, v string }{{"workspace", v.Workspace}, {"phase", v.Phase}, {"tag", v.Tag}} {
		if len(f.v) > maxCapsuleField || strings.ContainsFunc(f.v, unicode.IsControl) {
			return v, errorf(agentrunner.EINVALID, "%s: want at most %d characters, without control characters", f.key, maxCapsuleField)
		}
	}
	if len(v.Query) > maxQueryLn {
		return v, errorf(agentrunner.EINVALID, "the search is longer than %d characters", maxQueryLn)
	}
	return v, nil
}

// handleCapsules lists the capsules, newest first, filtered by workspace,
// phase and tag a page at a time; or searches their text with the store's
// full-text index, as the API's search does, through the same service.
func (d *Dashboard) handleCapsules(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	v, err := capsuleFilters(q)
	var before int64
	if err == nil {
		before, err = optionalID(q.Get("before"))
	}
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	ctx, cancel := pageContext(r)
	defer cancel()
	f := agentrunner.CapsuleFilter{Workspace: v.Workspace, Phase: v.Phase, Tag: v.Tag}
	if v.Query != "" {
		err = d.searchCapsules(ctx, &v, f)
	} else {
		err = d.listCapsules(ctx, &v, f, before)
	}
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	d.render(w, r, s, http.StatusOK, "capsules", "Capsules", v)
}

// listCapsules reads one page of capsules, from before when set.
func (d *Dashboard) listCapsules(ctx context.Context, v *capsulesView, f agentrunner.CapsuleFilter, before int64) error {
	f.Before, f.Limit = before, capsulesPage
	cs, err := d.capsules.List(ctx, f)
	if err != nil {
		return fmtErr("list the capsules", err)
	}
	v.Capsules = cs
	if len(cs) == capsulesPage {
		v.NextBefore = cs[len(cs)-1].ID
	}
	return nil
}

// searchCapsules finds the capsules whose text matches the query. A query
// the index cannot parse is shown on the page with how to write it, as
// the memory page does, rather than as an error page.
func (d *Dashboard) searchCapsules(ctx context.Context, v *capsulesView, f agentrunner.CapsuleFilter) error {
	f.Limit = capsuleHits
	hits, err := d.capsules.Search(ctx, v.Query, f)
	switch {
	case agentrunner.ErrorCode(err) == agentrunner.EINVALID:
		v.Problem = agentrunner.ErrorMessage(err)
	case err != nil:
		return fmtErr("search the capsules", err)
	}
	v.Hits = hits
	return nil
}

// capsuleView is the capsule page's data.
type capsuleView struct {
	Capsule *agentrunner.Capsule
	// HTML is the text rendered; Text the source, when asked for or too
	// large to render.
	HTML template.HTML
	Text string
	Raw  bool
	// RunLink: the capsule's run id is one a run page can show.
	RunLink bool
}

// handleCapsule shows one capsule, live or deleted: its fields, and its
// text rendered as markdown with the dashboard's safe renderer (a
// capsule is written by an agent, so its text is untrusted).
func (d *Dashboard) handleCapsule(w http.ResponseWriter, r *http.Request, s *session) {
	id, err := strconv.ParseInt(r.PathValue("id"), 10, 64)
	if err != nil || id < 1 {
		d.fail(w, r, s, errorf(agentrunner.EINVALID, "capsule id: want a positive integer"))
		return
	}
	ctx, cancel := pageContext(r)
	defer cancel()
	c, err := d.capsules.FetchID(ctx, id)
	switch code := agentrunner.ErrorCode(err); {
	case code == agentrunner.ENOTFOUND:
		err = errorf(agentrunner.ENOTFOUND, "no capsule %d", id)
	case err != nil && code != agentrunner.EINVALID:
		err = fmtErr("read the capsule", err)
	}
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	d.render(w, r, s, http.StatusOK, "capsule", "Capsule "+c.Name, capsulePage(c, r.URL.Query().Get("raw") == "1"))
}

// capsulePage presents a capsule: its text rendered unless the source is
// asked for or it is too large to render.
func capsulePage(c *agentrunner.Capsule, raw bool) capsuleView {
	v := capsuleView{Capsule: c, Raw: raw, RunLink: runIDPattern.MatchString(c.RunID)}
	if raw || len(c.Text) > maxRendered {
		v.Text = textOf([]byte(c.Text))
		return v
	}
	v.HTML = renderMarkdown([]byte(c.Text))
	return v
}

// newCapsules is the capsule service the pages read through: the one
// every surface (tools, API, CLI) uses, so a page lists and searches
// exactly as the API does.
func newCapsules(store agentrunner.CapsuleStore, clock agentrunner.Clock) *capsule.Service {
	return capsule.NewService(store, capsule.Options{Clock: clock})
}
