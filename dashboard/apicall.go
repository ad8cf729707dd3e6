package dashboard

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"github.com/agentrunner/agentrunner"
)

// maxAPIAnswer bounds what an in-process API call may answer: an artifact
// larger than this is not rendered in a page.
const maxAPIAnswer = 4 << 20

// recorder is the ResponseWriter of an in-process API call: it keeps the
// status and up to maxAPIAnswer bytes of the body.
type recorder struct {
	header http.Header
	status int
	body   bytes.Buffer
	over   bool
}

func newRecorder() *recorder { return &recorder{header: http.Header{}} }

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(p []byte) (int, error) {
	r.WriteHeader(http.StatusOK)
	if room := maxAPIAnswer - r.body.Len(); len(p) > room {
		r.body.Write(p[:max(room, 0)])
		r.over = true
		return len(p), nil
	}
	return r.body.Write(p)
}

// apiAnswer is what an in-process API call answered.
type apiAnswer struct {
	Status int
	Header http.Header
	Body   []byte
	// Truncated: the body was longer than maxAPIAnswer.
	Truncated bool
}

// call sends one request through the API's handlers as the session's
// principal. body, when not nil, is sent as JSON. An answer with an error
// status is returned as an agentrunner error with the API's code and
// message, so pages show what the API would have said.
func (d *Dashboard) call(ctx context.Context, s *session, method, target string, body any) (*apiAnswer, error) {
	var rd io.Reader
	if body != nil {
		data, err := json.Marshal(body)
		if err != nil {
			return nil, fmtErr("encode the API request", err)
		}
		rd = bytes.NewReader(data)
	}
	req, err := http.NewRequestWithContext(ctx, method, target, rd)
	if err != nil {
		return nil, fmtErr("make the API request", err)
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	rec := newRecorder()
	d.opts.API.ServeAs(s.principal(), rec, req)
	ans := &apiAnswer{Status: rec.status, Header: rec.header, Body: rec.body.Bytes(), Truncated: rec.over}
	if ans.Status >= 400 {
		return ans, apiError(ans)
	}
	return ans, nil
}

// callJSON is call, decoding a successful answer into out.
func (d *Dashboard) callJSON(ctx context.Context, s *session, method, target string, body, out any) error {
	ans, err := d.call(ctx, s, method, target, body)
	if err != nil {
		return err
	}
	if err := json.Unmarshal(ans.Body, out); err != nil {
		return fmtErr(fmt.Sprintf("decode the answer of %s %s", method, target), err)
	}
	return nil
}

// apiError turns an API error answer into an error with its code and
// message.
func apiError(ans *apiAnswer) error {
	var e struct {
		Error struct {
			Code    string `json:"code"`
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(ans.Body, &e) != nil || e.Error.Code == "" {
		return fmt.Errorf("the API answered %d", ans.Status)
	}
	if e.Error.Code == agentrunner.EINTERNAL {
		return fmt.Errorf("the API answered 500 internal error")
	}
	return agentrunner.Errorf(e.Error.Code, "%s", e.Error.Message)
}
