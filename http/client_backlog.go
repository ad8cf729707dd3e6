package http

import (
	"context"
	"net/http"
	"net/url"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/backlog"
)

// BacklogFilter narrows Backlog; empty fields select everything.
type BacklogFilter struct {
	// Status is a run status: the items whose runs have it.
	Status string
	// Limit is the list's size; 0 is the server's default.
	Limit int
}

// TaskFilter narrows Tasks; empty fields select everything.
type TaskFilter struct {
	// Item is a backlog item's id: its tasks only.
	Item   string
	Status string
	Limit  int
}

// Backlog lists the backlog's items, newest first. A workspace without a
// backlog is ENOTFOUND.
func (c *Client) Backlog(ctx context.Context, f BacklogFilter) (*BacklogList, error) {
	q := url.Values{}
	setLimit(q, f.Limit)
	if f.Status != "" {
		q.Set("status", f.Status)
	}
	var out BacklogList
	if err := c.do(ctx, http.MethodGet, []string{"api", "backlog"}, q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// AddBacklogItem adds an item: a run of the backlog pipeline with the
// item, completed from its repository on the server's machine, as its
// inputs. The answer holds the item when the server's scheduler started
// its run in time, else the command it will start it from. An item that
// cannot be worked on (no title, a repo that is not an absolute path to
// a git repository) is EUNPROCESSABLE, naming the field.
func (c *Client) AddBacklogItem(ctx context.Context, req AddBacklogItemRequest) (*AddedBacklogItem, error) {
	var out AddedBacklogItem
	if err := c.do(ctx, http.MethodPost, []string{"api", "backlog"}, nil, req, &out); err != nil {
		return nil, err
	}
	if out.Item == nil && out.Command == nil {
		return nil, unexpected(agentrunner.EINTERNAL, "POST /api/backlog: the answer holds neither the item nor its command")
	}
	return &out, nil
}

// BacklogItem returns one item with its tasks in execution order;
// ENOTFOUND when there is none.
func (c *Client) BacklogItem(ctx context.Context, id string) (*backlog.ItemView, error) {
	var out backlog.ItemView
	if err := c.do(ctx, http.MethodGet, []string{"api", "backlog", id}, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Tasks lists tasks, newest first: every item's, or one item's.
func (c *Client) Tasks(ctx context.Context, f TaskFilter) (*TaskList, error) {
	q := url.Values{}
	setLimit(q, f.Limit)
	for k, v := range map[string]string{"item": f.Item, "status": f.Status} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var out TaskList
	if err := c.do(ctx, http.MethodGet, []string{"api", "tasks"}, q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Task returns one task; ENOTFOUND when there is none.
func (c *Client) Task(ctx context.Context, id string) (*backlog.TaskView, error) {
	var out backlog.TaskView
	if err := c.do(ctx, http.MethodGet, []string{"api", "tasks", id}, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}
