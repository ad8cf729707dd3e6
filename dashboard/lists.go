package dashboard

import (
	"maps"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"strings"

	"github.com/agentrunner/agentrunner"
	arhttp "github.com/agentrunner/agentrunner/http"
)

// Bounds of the list pages.
const (
	listPage   = 50
	gatesPage  = 100
	maxQueryLn = 200
)

// gatesView is the gates page's data: what the API lists, with each
// gate's steps for a route decision.
type gatesView struct {
	Gates []gateItem
}

// gateItem is one waiting gate.
type gateItem struct {
	arhttp.Gate
	// State: the step is a state step, which takes an answer.
	State bool
	// Steps are the pipeline's steps a route decision may send the run to.
	Steps []string
}

// handleGates lists the waiting gates, oldest first, with the question a
// state agent asked, and the decisions an operator may take.
func (d *Dashboard) handleGates(w http.ResponseWriter, r *http.Request, s *session) {
	ctx, cancel := pageContext(r)
	defer cancel()
	var list arhttp.GateList
	if err := d.callJSON(ctx, s, http.MethodGet, "/api/gates?limit="+strconv.Itoa(gatesPage), nil, &list); err != nil {
		d.fail(w, r, s, err)
		return
	}
	v := gatesView{}
	for _, g := range list.Gates {
		item := gateItem{Gate: g, State: d.isStateStep(g.Pipeline, g.Step)}
		if p := d.runPipeline(&agentrunner.Run{ID: g.Run, Pipeline: g.Pipeline}); p != nil {
			item.Steps = slices.Sorted(maps.Keys(p.Steps))
		}
		v.Gates = append(v.Gates, item)
	}
	d.render(w, r, s, http.StatusOK, "gates", "Gates", v)
}

// errorsView is the errors page's data.
type errorsView struct {
	Events []*agentrunner.Event
	// Type filters (escalation); NextBefore pages.
	Type       string
	NextBefore int64
}

// handleErrors lists warnings and errors, newest first, with their
// context; type=escalation lists the escalations only.
func (d *Dashboard) handleErrors(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	before, err := optionalID(q.Get("before"))
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	v := errorsView{Type: q.Get("type")}
	f := agentrunner.EventFilter{MinLevel: agentrunner.LevelWarn, Newest: true, BeforeID: before, Limit: listPage}
	switch v.Type {
	case "":
	case "escalation":
		f.Type, f.MinLevel = v.Type, ""
	default:
		d.fail(w, r, s, errorf(agentrunner.EINVALID, "type: want escalation, or nothing"))
		return
	}
	ctx, cancel := pageContext(r)
	defer cancel()
	if v.Events, err = d.store.Events(ctx, f); err != nil {
		d.fail(w, r, s, fmtErr("read the errors", err))
		return
	}
	if len(v.Events) == listPage {
		v.NextBefore = v.Events[len(v.Events)-1].ID
	}
	d.render(w, r, s, http.StatusOK, "errors", "Errors", v)
}

// optionalID reads an optional positive id cursor.
func optionalID(v string) (int64, error) {
	if v == "" {
		return 0, nil
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil || n < 1 {
		return 0, errorf(agentrunner.EINVALID, "before: want a positive id")
	}
	return n, nil
}

// auditView is the audit log page's data.
type auditView struct {
	Commands   []*agentrunner.Command
	NextBefore int64
}

// handleAudit lists every command, newest first: who gave it, when, with
// what, and what the engine did.
func (d *Dashboard) handleAudit(w http.ResponseWriter, r *http.Request, s *session) {
	before, err := optionalID(r.URL.Query().Get("before"))
	if err != nil {
		d.fail(w, r, s, err)
		return
	}
	ctx, cancel := pageContext(r)
	defer cancel()
	cmds, err := d.store.Commands(ctx, agentrunner.CommandFilter{BeforeID: before, Limit: listPage})
	if err != nil {
		d.fail(w, r, s, fmtErr("read the audit log", err))
		return
	}
	v := auditView{Commands: cmds}
	if len(cmds) == listPage {
		v.NextBefore = cmds[len(cmds)-1].ID
	}
	d.render(w, r, s, http.StatusOK, "audit", "Audit log", v)
}

// handleTools lists the tools with their usage, errors and breaker
// state, as the API reports them.
func (d *Dashboard) handleTools(w http.ResponseWriter, r *http.Request, s *session) {
	ctx, cancel := pageContext(r)
	defer cancel()
	var list arhttp.ToolList
	if err := d.callJSON(ctx, s, http.MethodGet, "/api/tools", nil, &list); err != nil {
		d.fail(w, r, s, err)
		return
	}
	d.render(w, r, s, http.StatusOK, "tools", "Tools", list)
}

// mailboxesView is the mailboxes page's data.
type mailboxesView struct {
	Agents []string
	Agent  string
	Box    *arhttp.Mailbox
	// Unavailable says why the server shows no mailboxes.
	Unavailable string
}

// handleMailboxes lists the agents and shows one agent's mailbox.
func (d *Dashboard) handleMailboxes(w http.ResponseWriter, r *http.Request, s *session) {
	v := mailboxesView{Agents: slices.Sorted(maps.Keys(d.config().Agents)), Agent: r.URL.Query().Get("agent")}
	if v.Agent != "" {
		if !slices.Contains(v.Agents, v.Agent) {
			d.fail(w, r, s, errorf(agentrunner.ENOTFOUND, "no agent %q", clipText(64, v.Agent)))
			return
		}
		ctx, cancel := pageContext(r)
		defer cancel()
		var box arhttp.Mailbox
		err := d.callJSON(ctx, s, http.MethodGet, "/api/mailboxes/"+url.PathEscape(v.Agent), nil, &box)
		switch {
		case agentrunner.ErrorCode(err) == agentrunner.EUNAVAILABLE:
			v.Unavailable = agentrunner.ErrorMessage(err)
		case err != nil:
			d.fail(w, r, s, err)
			return
		default:
			v.Box = &box
		}
	}
	d.render(w, r, s, http.StatusOK, "mailboxes", "Mailboxes", v)
}

// memoryView is the memory page's data.
type memoryView struct {
	Agents []string
	Agent  string
	Query  string
	// Entries are an agent's entries; Hits a search's.
	Entries []memoryEntry
	Hits    []memoryEntry
	// Unavailable says why the server shows no memories.
	Unavailable string
}

// memoryEntry is an entry or a hit as the API answers it.
type memoryEntry struct {
	ID      int64   `json:"id"`
	Agent   string  `json:"agent"`
	CycleID string  `json:"cycle_id"`
	Time    string  `json:"time"`
	Rank    float64 `json:"rank"`
	Snippet string  `json:"snippet"`
	Text    string  `json:"text"`
}

// handleMemory shows an agent's memory, or searches every agent's (or
// one's) with the store's full-text index, through the API.
func (d *Dashboard) handleMemory(w http.ResponseWriter, r *http.Request, s *session) {
	q := r.URL.Query()
	v := memoryView{Agents: slices.Sorted(maps.Keys(d.config().Agents)), Agent: q.Get("agent"), Query: strings.TrimSpace(q.Get("q"))}
	if v.Agent != "" && !slices.Contains(v.Agents, v.Agent) {
		d.fail(w, r, s, errorf(agentrunner.ENOTFOUND, "no agent %q", clipText(64, v.Agent)))
		return
	}
	if len(v.Query) > maxQueryLn {
		d.fail(w, r, s, errorf(agentrunner.EINVALID, "the search is longer than %d characters", maxQueryLn))
		return
	}
	ctx, cancel := pageContext(r)
	defer cancel()
	var err error
	switch {
	case v.Query != "":
		target := "/api/memory/search?limit=50&q=" + url.QueryEscape(v.Query)
		if v.Agent != "" {
			target += "&agent=" + url.QueryEscape(v.Agent)
		}
		var out struct {
			Hits []memoryEntry `json:"hits"`
		}
		err = d.callJSON(ctx, s, http.MethodGet, target, nil, &out)
		v.Hits = out.Hits
	case v.Agent != "":
		var out struct {
			Entries []memoryEntry `json:"entries"`
		}
		err = d.callJSON(ctx, s, http.MethodGet, "/api/memory/"+url.PathEscape(v.Agent), nil, &out)
		v.Entries = out.Entries
	}
	switch code := agentrunner.ErrorCode(err); {
	case err == nil:
	case code == agentrunner.EUNAVAILABLE:
		v.Unavailable = agentrunner.ErrorMessage(err)
	case code == agentrunner.EINVALID:
		v.Unavailable = agentrunner.ErrorMessage(err) // a query the index cannot parse: say how
	default:
		d.fail(w, r, s, err)
		return
	}
	d.render(w, r, s, http.StatusOK, "memory", "Memory", v)
}
