package http

import (
	"net/http"
	"net/url"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/backlog"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/internal/clip"
	"github.com/agentrunner/agentrunner/worktree"
)

// Spec 5's backlog through the API: an item is a run of the backlog
// pipeline and a task a child run of an item's run, so the API reads
// both from the store's runs and adds an item by starting a run, through
// the same command as any start.

// BacklogList lists backlog items, newest first.
type BacklogList struct {
	Items []*backlog.ItemView `json:"items"`
}

// TaskList lists tasks of backlog items, newest first.
type TaskList struct {
	Tasks []*backlog.TaskView `json:"tasks"`
}

// AddBacklogItemRequest is the body of POST /api/backlog. Repo is the
// absolute path of a git repository on the server's machine; BaseBranch,
// when empty, is the branch checked out there.
type AddBacklogItemRequest struct {
	Title              string `json:"title"`
	Description        string `json:"description,omitempty"`
	AcceptanceCriteria string `json:"acceptance_criteria,omitempty"`
	Priority           string `json:"priority,omitempty"`
	Repo               string `json:"repo"`
	BaseBranch         string `json:"base_branch,omitempty"`
}

// AddedBacklogItem answers POST /api/backlog: the item when the
// scheduler started its run in time, else the command it will start it
// from.
type AddedBacklogItem struct {
	Item      *backlog.ItemView `json:"item,omitempty"`
	CommandID int64             `json:"command_id,omitempty"`
	Command   *Command          `json:"command,omitempty"`
}

// item is the backlog item the request describes, before Prepare.
func (req AddBacklogItemRequest) item() *backlog.Item {
	return &backlog.Item{Title: req.Title, Description: req.Description, AcceptanceCriteria: req.AcceptanceCriteria,
		Priority: req.Priority, Repo: req.Repo, BaseBranch: req.BaseBranch}
}

// backlogViews returns the views of the backlog of the configuration the
// engine runs with now, and its backlog: section; a workspace without
// one is answered 404, saying how to add it.
func (s *Server) backlogViews(w http.ResponseWriter, r *http.Request) (backlog.Views, *config.Backlog, bool) {
	v := backlog.Views{Store: s.store, Config: s.config()}
	b, err := v.Backlog()
	if err != nil {
		s.writeError(w, r, err)
		return v, nil, false
	}
	return v, b, true
}

// backlogFilter reads the query of a list of items or tasks: status and
// limit, and item where known holds it.
func backlogFilter(r *http.Request, known ...string) (backlog.Filter, error) {
	q, err := strictQuery(r, nil, known...)
	if err != nil {
		return backlog.Filter{}, err
	}
	var f backlog.Filter
	if f.Status, err = statusQuery(q.Get("status")); err != nil {
		return f, err
	}
	if f.Item = q.Get("item"); f.Item != "" && !runIDPattern.MatchString(f.Item) {
		return f, agentrunner.Errorf(agentrunner.EINVALID, "query parameter item: want a backlog item's run id, got %q", clip.String(f.Item, maxQuoted))
	}
	f.Limit, err = limit(r)
	return f, err
}

// pathID reads the run id {id} of an item or a task from the path, or
// answers 400.
func (s *Server) pathID(w http.ResponseWriter, r *http.Request, noun string) (string, bool) {
	id := r.PathValue("id")
	if !runIDPattern.MatchString(id) {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "%s id: want its run's id (letters, digits, _, - and .), got %q", noun, clip.String(id, maxQuoted)))
		return "", false
	}
	return id, true
}

// handleBacklog lists the backlog's items, newest first; status filters.
func (s *Server) handleBacklog(w http.ResponseWriter, r *http.Request) {
	views, _, ok := s.backlogViews(w, r)
	if !ok {
		return
	}
	f, err := backlogFilter(r, "status", "limit")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	items, err := views.Items(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, BacklogList{Items: orEmpty(items)})
}

// handleBacklogItem shows one item with its tasks, in execution order.
func (s *Server) handleBacklogItem(w http.ResponseWriter, r *http.Request) {
	views, _, ok := s.backlogViews(w, r)
	if !ok {
		return
	}
	id, ok := s.pathID(w, r, "backlog item")
	if !ok {
		return
	}
	it, err := views.Item(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, it)
}

// handleAddBacklogItem adds an item: it completes the item from its
// repository (top-level folder, base branch, detected language and
// framework), refusing one that cannot be worked on before anything is
// written, then starts a run of the backlog pipeline with the item as
// its inputs, as POST /api/pipelines/{name}/runs starts any run.
func (s *Server) handleAddBacklogItem(w http.ResponseWriter, r *http.Request) {
	views, b, ok := s.backlogViews(w, r)
	if !ok {
		return
	}
	var body AddBacklogItemRequest
	if !s.decode(w, r, &body, false) {
		return
	}
	it := body.item()
	if err := backlog.Prepare(r.Context(), worktree.Git{}, it); err != nil {
		s.writeError(w, r, refused(err))
		return
	}
	p := s.pipelines()[b.Pipeline]
	if p == nil {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.ECONFLICT, "backlog.pipeline %s is not a pipeline this server runs", b.Pipeline))
		return
	}
	run, cmd, err := s.startRun(r, p, it.Inputs())
	switch {
	case err != nil:
		s.writeError(w, r, err)
	case run == nil:
		writeJSON(w, http.StatusAccepted, AddedBacklogItem{Command: ptr(commandOf(cmd))})
	default:
		v, err := views.Item(r.Context(), run.ID)
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		w.Header().Set("Location", "/api/backlog/"+url.PathEscape(run.ID))
		writeJSON(w, http.StatusCreated, AddedBacklogItem{Item: v, CommandID: cmd.ID})
	}
}

// refused makes an item's EINVALID an EUNPROCESSABLE: the body parsed,
// its content (a missing title, a folder that is not a repository) is
// refused.
func refused(err error) error {
	if agentrunner.ErrorCode(err) == agentrunner.EINVALID {
		return agentrunner.Errorf(agentrunner.EUNPROCESSABLE, "%s", agentrunner.ErrorMessage(err))
	}
	return err
}

// handleTasks lists tasks, newest first: every item's, or with item one
// item's; status filters.
func (s *Server) handleTasks(w http.ResponseWriter, r *http.Request) {
	views, _, ok := s.backlogViews(w, r)
	if !ok {
		return
	}
	f, err := backlogFilter(r, "item", "status", "limit")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	tasks, err := views.Tasks(r.Context(), f)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, TaskList{Tasks: orEmpty(tasks)})
}

// handleTask shows one task.
func (s *Server) handleTask(w http.ResponseWriter, r *http.Request) {
	views, _, ok := s.backlogViews(w, r)
	if !ok {
		return
	}
	id, ok := s.pathID(w, r, "task")
	if !ok {
		return
	}
	t, err := views.Task(r.Context(), id)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	writeJSON(w, http.StatusOK, t)
}
