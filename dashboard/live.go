package dashboard

import (
	"net/http"
	"net/url"

	"github.com/agentrunner/agentrunner"
)

// handleLive streams events to a page as Server-Sent Events: the API's
// own stream (GET /api/events/stream), served as the signed-in operator,
// since a browser's EventSource cannot send the API's credential header
// but does send the session cookie. run, if given, keeps the run's events
// only. The page's script uses each event to refresh its live parts.
func (d *Dashboard) handleLive(w http.ResponseWriter, r *http.Request, s *session) {
	q := url.Values{}
	if run := r.URL.Query().Get("run"); run != "" {
		if !runIDPattern.MatchString(run) {
			d.fail(w, r, s, errorf(agentrunner.EINVALID, "run: want a run id"))
			return
		}
		q.Set("cycle_id", run)
	}
	req, err := http.NewRequestWithContext(r.Context(), http.MethodGet, "/api/events/stream?"+q.Encode(), nil)
	if err != nil {
		d.fail(w, r, s, fmtErr("make the stream request", err))
		return
	}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		req.Header.Set("Last-Event-ID", last)
	}
	d.opts.API.ServeAs(s.principal(), w, req)
}
