package http

import (
	"context"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"

	"github.com/agentrunner/agentrunner"
)

// RunQuery narrows Runs; empty fields select everything.
type RunQuery struct {
	Pipeline string
	Status   string
	// Before is a run id: the page starts after it.
	Before string
	// Limit is the page's size; 0 is the server's default.
	Limit int
}

// Runs lists runs, newest first.
func (c *Client) Runs(ctx context.Context, f RunQuery) (*RunList, error) {
	q := url.Values{}
	setLimit(q, f.Limit)
	for k, v := range map[string]string{"pipeline": f.Pipeline, "status": f.Status, "before": f.Before} {
		if v != "" {
			q.Set(k, v)
		}
	}
	var out RunList
	if err := c.do(ctx, http.MethodGet, []string{"api", "runs"}, q, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Run returns one run with its step runs; ENOTFOUND when there is none.
func (c *Client) Run(ctx context.Context, id string) (*RunDetail, error) {
	var out RunDetail
	if err := c.do(ctx, http.MethodGet, []string{"api", "runs", id}, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// StartRun starts a run of pipeline with inputs. The answer holds the run
// when the server's scheduler started it in time, else the command it
// will start it from. A pipeline the server does not have is ENOTFOUND;
// inputs its schema refuses are EUNPROCESSABLE.
func (c *Client) StartRun(ctx context.Context, pipeline string, inputs map[string]any) (*StartedRun, error) {
	var out StartedRun
	if err := c.do(ctx, http.MethodPost, []string{"api", "pipelines", pipeline, "runs"}, nil, StartRunRequest{Inputs: inputs}, &out); err != nil {
		return nil, err
	}
	if out.Run == nil && out.Command == nil {
		return nil, unexpected(agentrunner.EINTERNAL, "POST /api/pipelines/%s/runs: the answer holds neither the run nor its command", pipeline)
	}
	return &out, nil
}

// Gates lists the gates that wait for a decision, oldest first.
func (c *Client) Gates(ctx context.Context) (*GateList, error) {
	var out GateList
	if err := c.do(ctx, http.MethodGet, []string{"api", "gates"}, nil, nil, &out); err != nil {
		return nil, err
	}
	return &out, nil
}

// Decide gives a decision on the gate step of run: the command the
// scheduler applies. A gate that does not wait, or that has a decision
// already, is ECONFLICT.
func (c *Client) Decide(ctx context.Context, run, step string, d GateDecision) (*Command, error) {
	return c.command(ctx, []string{"api", "runs", run, "gates", step}, d)
}

// ResumeRun resumes a halted run: the command the scheduler applies. A
// run that is not halted is ECONFLICT.
func (c *Client) ResumeRun(ctx context.Context, run, reason string) (*Command, error) {
	return c.command(ctx, []string{"api", "runs", run, "resume"}, struct {
		Reason string `json:"reason,omitempty"`
	}{reason})
}

// AbortRun ends a run: the command the scheduler applies.
func (c *Client) AbortRun(ctx context.Context, run, reason string) (*Command, error) {
	return c.command(ctx, []string{"api", "runs", run, "abort"}, struct {
		Reason string `json:"reason,omitempty"`
	}{reason})
}

// AttemptPrompt returns the prompt attempt n of step gave its agent in
// run, as the store committed it; ENOTFOUND, saying why, when the store
// has none.
func (c *Client) AttemptPrompt(ctx context.Context, run, step string, n int) ([]byte, error) {
	return c.attemptFile(ctx, run, step, n, "prompt")
}

// AttemptValidation returns the validation report of attempt n of step's
// rejected output in run, as the store committed it; ENOTFOUND, saying
// why, when the store has none.
func (c *Client) AttemptValidation(ctx context.Context, run, step string, n int) ([]byte, error) {
	return c.attemptFile(ctx, run, step, n, "validation")
}

// attemptFile reads the stored file of kind of an attempt: text, at most
// MaxResponseBytes.
func (c *Client) attemptFile(ctx context.Context, run, step string, n int, kind string) ([]byte, error) {
	resp, err := c.send(ctx, http.MethodGet, []string{"api", "runs", run, "steps", step, "attempts", strconv.Itoa(n), kind}, nil, nil, "text/markdown, text/plain")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, c.answerError(resp)
	}
	where := "GET " + resp.Request.URL.Path
	if mt := mediaType(resp); !strings.HasPrefix(mt, "text/") {
		return nil, unexpected(agentrunner.EINTERNAL, "%s: the server answered with %s, not text", where, orUnknown(mt))
	}
	data, err := io.ReadAll(io.LimitReader(resp.Body, MaxResponseBytes+1))
	if err != nil {
		return nil, c.transportError(ctx, err)
	}
	if len(data) > MaxResponseBytes {
		return nil, unexpected(agentrunner.EINTERNAL, "%s: the answer is longer than %d bytes", where, MaxResponseBytes)
	}
	return data, nil
}
