package capsule

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/tool"
)

// Tool is one capsule operation as a tool: what a model is offered, and
// the handler that runs it on a Service.
type Tool struct {
	Spec    tool.Spec
	Handler tool.Handler
}

// Names are the capsule tools, in the order Tools returns them.
var Names = []string{
	"capsule_store", "capsule_fetch", "capsule_fetch_many", "capsule_update", "capsule_delete",
	"capsule_latest", "capsule_list", "capsule_inventory", "capsule_search",
	"capsule_bulk_update", "capsule_bulk_delete", "capsule_export", "capsule_import", "capsule_compose",
}

// View is a capsule as the tools and the API show it.
type View struct {
	ID        int64      `json:"id"`
	Workspace string     `json:"workspace"`
	Name      string     `json:"name"`
	RunID     string     `json:"run_id,omitempty"`
	Phase     string     `json:"phase,omitempty"`
	Role      string     `json:"role,omitempty"`
	Tags      []string   `json:"tags,omitempty"`
	Version   int        `json:"version"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
	// Text is left out of listings.
	Text string `json:"capsule_text,omitempty"`
}

// ViewOf is c as shown; withText keeps its text.
func ViewOf(c *agentrunner.Capsule, withText bool) View {
	r := recordOf(c)
	v := View{ID: c.ID, Workspace: r.Workspace, Name: r.Name, RunID: r.RunID, Phase: r.Phase, Role: r.Role, Tags: r.Tags,
		Version: r.Version, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt, DeletedAt: r.DeletedAt}
	if withText {
		v.Text = c.Text
	}
	return v
}

// Filter is the filter keys the list, search, export and bulk tools take.
type Filter struct {
	Workspace      string `json:"workspace,omitempty"`
	RunID          string `json:"run_id,omitempty"`
	Phase          string `json:"phase,omitempty"`
	Role           string `json:"role,omitempty"`
	Tag            string `json:"tag,omitempty"`
	IncludeDeleted bool   `json:"include_deleted,omitempty"`
}

// Of is the store's filter.
func (f Filter) Of() agentrunner.CapsuleFilter {
	return agentrunner.CapsuleFilter{Workspace: f.Workspace, RunID: f.RunID, Phase: f.Phase, Role: f.Role, Tag: f.Tag, IncludeDeleted: f.IncludeDeleted}
}

// The JSON Schemas of the arguments, built from these pieces.
const (
	filterProps = `"workspace":{"type":"string","description":"the capsules' workspace"},` +
		`"run_id":{"type":"string"},"phase":{"type":"string"},"role":{"type":"string"},` +
		`"tag":{"type":"string","description":"capsules that have this tag"},` +
		`"include_deleted":{"type":"boolean","description":"deleted capsules too"}`
	fieldProps = `"run_id":{"type":"string"},"phase":{"type":"string"},"role":{"type":"string"},` +
		`"tags":{"type":"array","items":{"type":"string"}},` +
		`"capsule_text":{"type":"string","description":"markdown with the sections ## Objective, ## Status, ## Decisions, ## Next actions, ## Key locations, ## Open questions, in that order"}`
	refProps = `"id":{"type":"integer","minimum":1},"workspace":{"type":"string"},"name":{"type":"string"}`
	refList  = `{"type":"array","minItems":1,"maxItems":50,"items":{"type":"object","properties":{` + refProps + `},"additionalProperties":false}}`
)

func object(props string, required ...string) json.RawMessage {
	req := ""
	if len(required) > 0 {
		req = `,"required":["` + strings.Join(required, `","`) + `"]`
	}
	return json.RawMessage(`{"type":"object","properties":{` + props + `}` + req + `,"additionalProperties":false}`)
}

// Tools returns the capsule tools on svc. workspace is the workspace a
// call that names none works in (the runner's workspace name).
func Tools(svc *Service, workspace string) []Tool {
	t := &tools{svc: svc, workspace: workspace}
	return []Tool{
		op("capsule_store", "Stores a capsule: a structured hand-off note for the next agent or session. Its name is unique in its workspace; upsert replaces the live capsule of that name as its next version. Returns the stored capsule's id and version.",
			object(`"workspace":{"type":"string"},"name":{"type":"string"},`+fieldProps+`,"upsert":{"type":"boolean"}`, "name", "capsule_text"), t.store),
		op("capsule_fetch", "Fetches one capsule with its text, by id or by name (in a workspace).",
			object(refProps), t.fetch),
		op("capsule_fetch_many", "Fetches several capsules with their texts, by id or by name, in the order given.",
			object(`"capsules":`+refList, "capsules"), t.fetchMany),
		op("capsule_update", "Updates a live capsule, by id or by name. version must be the version you fetched: if the capsule changed since, the update is refused and you fetch it again. Only the fields given change.",
			object(refProps+`,"version":{"type":"integer","minimum":1},`+fieldProps, "version"), t.update),
		op("capsule_delete", "Deletes a live capsule, by id or by name. It stays listable with include_deleted, and its name is free again.",
			object(refProps), t.delete),
		op("capsule_latest", "Returns the newest live capsule of a workspace, of a phase and role when given, with its text.",
			object(`"workspace":{"type":"string"},"phase":{"type":"string"},"role":{"type":"string"}`), t.latest),
		op("capsule_list", "Lists capsules, newest first, without their texts. Page with before: the last id of the previous page.",
			object(filterProps+`,"before":{"type":"integer","minimum":1},"limit":{"type":"integer","minimum":1,"maximum":1000}`), t.list),
		op("capsule_inventory", "Counts the live capsules by workspace, phase and role.", object(""), t.inventory),
		op("capsule_search", `Searches the capsules' names, tags and texts (full text, best match first), with snippets. Words match their stems; quote a phrase ("rate limit"); use OR, NOT and prefix* as in SQLite FTS5.`,
			object(`"query":{"type":"string","minLength":1},`+filterProps+`,"limit":{"type":"integer","minimum":1,"maximum":100}`, "query"), t.search),
		op("capsule_bulk_update", "Sets phase, role or tags on every live capsule the filter selects; returns how many changed.",
			object(`"filter":{"type":"object","properties":{`+filterProps+`},"additionalProperties":false},"set":{"type":"object","properties":{"phase":{"type":"string"},"role":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}},"additionalProperties":false}`, "filter", "set"), t.bulkUpdate),
		op("capsule_bulk_delete", "Deletes every live capsule the filter selects; returns how many.",
			object(`"filter":{"type":"object","properties":{`+filterProps+`},"additionalProperties":false}`, "filter"), t.bulkDelete),
		op("capsule_export", "Exports the capsules the filter selects as JSON lines, oldest first, for capsule_import.",
			object(filterProps), t.export),
		op("capsule_import", "Imports capsules from JSON lines that capsule_export wrote; on_conflict says what to do with a name a live capsule has: skip (the default) or replace.",
			object(`"jsonl":{"type":"string","minLength":1},"on_conflict":{"type":"string","enum":["skip","replace"]}`, "jsonl"), t.importJSONL),
		op("capsule_compose", "Joins several capsules into one markdown bundle, each under its own heading.",
			object(`"capsules":`+refList, "capsules"), t.compose),
	}
}

// op makes a tool of a function of its decoded arguments; what it returns
// is the result, as JSON unless it is a string.
func op[A any](name, description string, params json.RawMessage, fn func(context.Context, A) (any, error)) Tool {
	return Tool{
		Spec: tool.Spec{Name: name, Description: description, Parameters: params, Timeout: 30 * time.Second},
		Handler: tool.HandlerFunc(func(ctx context.Context, raw json.RawMessage) (string, error) {
			var args A
			if err := tool.DecodeArgs(raw, &args); err != nil {
				return "", fmt.Errorf("%s: %w", name, err)
			}
			out, err := fn(ctx, args)
			if err != nil {
				return "", err
			}
			if s, ok := out.(string); ok {
				return s, nil
			}
			data, err := json.Marshal(out)
			return string(data), err
		}),
	}
}

// tools are the handlers' shared state.
type tools struct {
	svc       *Service
	workspace string
}

func (t *tools) in(workspace string) string {
	if workspace == "" {
		return t.workspace
	}
	return workspace
}

type fields struct {
	RunID *string   `json:"run_id"`
	Phase *string   `json:"phase"`
	Role  *string   `json:"role"`
	Tags  *[]string `json:"tags"`
	Text  *string   `json:"capsule_text"`
}

type storeArgs struct {
	Workspace string `json:"workspace"`
	Name      string `json:"name"`
	fields
	Upsert bool `json:"upsert"`
}

func (t *tools) store(ctx context.Context, a storeArgs) (any, error) {
	c := &agentrunner.Capsule{Workspace: t.in(a.Workspace), Name: a.Name}
	for _, f := range []struct{ to, from *string }{{&c.RunID, a.RunID}, {&c.Phase, a.Phase}, {&c.Role, a.Role}, {&c.Text, a.Text}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	if a.Tags != nil {
		c.Tags = *a.Tags
	}
	stored, err := t.svc.Put(ctx, c, a.Upsert)
	if err != nil {
		return nil, err
	}
	return ViewOf(stored, false), nil
}

func (t *tools) ref(r Ref) Ref {
	if r.ID == 0 {
		r.Workspace = t.in(r.Workspace)
	}
	return r
}

func (t *tools) fetch(ctx context.Context, r Ref) (any, error) {
	c, err := t.svc.fetchRef(ctx, t.ref(r))
	if err != nil {
		return nil, err
	}
	return ViewOf(c, true), nil
}

type manyArgs struct {
	Capsules []Ref `json:"capsules"`
}

func (t *tools) refs(rs []Ref) []Ref {
	out := make([]Ref, len(rs))
	for i, r := range rs {
		out[i] = t.ref(r)
	}
	return out
}

func (t *tools) fetchMany(ctx context.Context, a manyArgs) (any, error) {
	cs, err := t.svc.FetchMany(ctx, t.refs(a.Capsules))
	if err != nil {
		return nil, err
	}
	out := make([]View, len(cs))
	for i, c := range cs {
		out[i] = ViewOf(c, true)
	}
	return out, nil
}

type updateArgs struct {
	Ref
	Version int `json:"version"`
	fields
}

func (t *tools) update(ctx context.Context, a updateArgs) (any, error) {
	c, err := t.svc.fetchRef(ctx, t.ref(a.Ref))
	if err != nil {
		return nil, err
	}
	updated, err := t.svc.Update(ctx, c.ID, a.Version, Patch{Text: a.Text, RunID: a.RunID, Phase: a.Phase, Role: a.Role, Tags: a.Tags})
	if err != nil {
		return nil, err
	}
	return ViewOf(updated, false), nil
}

func (t *tools) delete(ctx context.Context, r Ref) (any, error) {
	c, err := t.svc.fetchRef(ctx, t.ref(r))
	if err != nil {
		return nil, err
	}
	if err := t.svc.Delete(ctx, c.ID); err != nil {
		return nil, err
	}
	return fmt.Sprintf("deleted capsule %d (%s/%s); its name is free", c.ID, c.Workspace, c.Name), nil
}

type latestArgs struct {
	Workspace string `json:"workspace"`
	Phase     string `json:"phase"`
	Role      string `json:"role"`
}

func (t *tools) latest(ctx context.Context, a latestArgs) (any, error) {
	c, err := t.svc.Latest(ctx, t.in(a.Workspace), a.Phase, a.Role)
	if err != nil {
		return nil, err
	}
	return ViewOf(c, true), nil
}

type listArgs struct {
	Filter
	Before int64 `json:"before"`
	Limit  int   `json:"limit"`
}

func (t *tools) list(ctx context.Context, a listArgs) (any, error) {
	f := a.Of()
	f.Before, f.Limit = a.Before, a.Limit
	cs, err := t.svc.List(ctx, f)
	if err != nil {
		return nil, err
	}
	out := make([]View, len(cs))
	for i, c := range cs {
		out[i] = ViewOf(c, false)
	}
	return out, nil
}

func (t *tools) inventory(ctx context.Context, _ struct{}) (any, error) {
	counts, err := t.svc.Inventory(ctx)
	if err != nil {
		return nil, err
	}
	type row struct {
		Workspace string `json:"workspace"`
		Phase     string `json:"phase"`
		Role      string `json:"role"`
		Count     int    `json:"count"`
	}
	out := make([]row, len(counts))
	for i, c := range counts {
		out[i] = row{c.Workspace, c.Phase, c.Role, c.N}
	}
	return out, nil
}

type searchArgs struct {
	Query string `json:"query"`
	Filter
	Limit int `json:"limit"`
}

// Hit is a search result as shown.
type Hit struct {
	View
	Rank    float64 `json:"rank"`
	Snippet string  `json:"snippet"`
}

func (t *tools) search(ctx context.Context, a searchArgs) (any, error) {
	f := a.Of()
	f.Limit = a.Limit
	hits, err := t.svc.Search(ctx, a.Query, f)
	if err != nil {
		return nil, err
	}
	out := make([]Hit, len(hits))
	for i, h := range hits {
		out[i] = Hit{View: ViewOf(h.Capsule, false), Rank: h.Rank, Snippet: h.Snippet}
	}
	return out, nil
}

type bulkArgs struct {
	Filter Filter `json:"filter"`
	Set    struct {
		Phase *string   `json:"phase"`
		Role  *string   `json:"role"`
		Tags  *[]string `json:"tags"`
	} `json:"set"`
}

func (t *tools) bulkUpdate(ctx context.Context, a bulkArgs) (any, error) {
	n, err := t.svc.BulkUpdate(ctx, a.Filter.Of(), agentrunner.CapsuleChanges{Phase: a.Set.Phase, Role: a.Set.Role, Tags: a.Set.Tags})
	if err != nil {
		return nil, err
	}
	return map[string]int{"updated": n}, nil
}

type bulkDeleteArgs struct {
	Filter Filter `json:"filter"`
}

func (t *tools) bulkDelete(ctx context.Context, a bulkDeleteArgs) (any, error) {
	n, err := t.svc.BulkDelete(ctx, a.Filter.Of())
	if err != nil {
		return nil, err
	}
	return map[string]int{"deleted": n}, nil
}

func (t *tools) export(ctx context.Context, f Filter) (any, error) {
	var b strings.Builder
	if _, err := t.svc.Export(ctx, &b, f.Of()); err != nil {
		return nil, err
	}
	return b.String(), nil
}

type importArgs struct {
	JSONL      string     `json:"jsonl"`
	OnConflict OnConflict `json:"on_conflict"`
}

func (t *tools) importJSONL(ctx context.Context, a importArgs) (any, error) {
	if a.OnConflict == "" {
		a.OnConflict = Skip
	}
	n, err := t.svc.Import(ctx, strings.NewReader(a.JSONL), a.OnConflict)
	if err != nil {
		return nil, fmt.Errorf("%w (imported before it: %d stored, %d replaced, %d skipped)", err, n.Stored, n.Replaced, n.Skipped)
	}
	return map[string]int{"stored": n.Stored, "replaced": n.Replaced, "skipped": n.Skipped}, nil
}

func (t *tools) compose(ctx context.Context, a manyArgs) (any, error) {
	return t.svc.Compose(ctx, t.refs(a.Capsules))
}
