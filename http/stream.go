package http

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clip"
)

// Timing of event streams.
const (
	// streamPoll is how often a stream looks for new events.
	streamPoll = 500 * time.Millisecond
	// streamKeepAlive is how often an idle stream sends a comment, so
	// proxies and clients see the connection is alive.
	streamKeepAlive = 15 * time.Second
	// streamBatch bounds the events one poll sends.
	streamBatch = 500
)

// handleStream sends events as Server-Sent Events for live views: first
// those after Last-Event-ID (or ?since=), then new ones as they are
// committed. Each event's SSE id is its event id, so a reconnecting client
// misses nothing the store still holds.
func (s *Server) handleStream(w http.ResponseWriter, r *http.Request) {
	f, err := eventQuery(r)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	if last := r.Header.Get("Last-Event-ID"); last != "" {
		id, err := strconv.ParseInt(last, 10, 64)
		if err != nil || id < 0 {
			s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "Last-Event-ID: want an event id, got %q", clip.String(last, maxQuoted)))
			return
		}
		f.AfterID, f.Since = id, time.Time{}
	}
	flusher, ok := w.(http.Flusher)
	if !ok {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EUNAVAILABLE, "this connection cannot stream"))
		return
	}
	if s.streams.Add(1) > maxStreams {
		s.streams.Add(-1)
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EUNAVAILABLE, "too many event streams are open (%d); try again later", maxStreams))
		return
	}
	defer s.streams.Add(-1)
	if f.AfterID == 0 && f.Since.IsZero() {
		// A new client starts with what happens from now on.
		newest, err := s.store.Events(r.Context(), agentrunner.EventFilter{Newest: true, Limit: 1})
		if err != nil {
			s.writeError(w, r, err)
			return
		}
		if len(newest) == 1 {
			f.AfterID = newest[0].ID
		}
	}
	// The stream outlives server.write_timeout, the deadline of one
	// answer: it renews the deadline for each write instead. (The read
	// deadline is lifted by net/http once the request is read.)
	rc := http.NewResponseController(w)
	extend := func() { _ = rc.SetWriteDeadline(time.Now().Add(s.writeTimeout())) }
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.Header().Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	fmt.Fprintf(w, "retry: %d\n\n", (2 * time.Second).Milliseconds())
	flusher.Flush()
	f.Limit = streamBatch
	idle := time.Now()
	tick := time.NewTicker(streamPoll)
	defer tick.Stop()
	for {
		evs, err := s.store.Events(r.Context(), f)
		if err != nil {
			if r.Context().Err() == nil {
				s.log.Error("event stream", "error", err)
			}
			return
		}
		extend()
		for _, e := range evs {
			data, err := json.Marshal(viewOf(e))
			if err != nil {
				s.log.Error("event stream: encode event", "id", e.ID, "error", err)
				continue
			}
			if _, err := fmt.Fprintf(w, "id: %d\nevent: %s\ndata: %s\n\n", e.ID, e.Type, data); err != nil {
				return
			}
			f.AfterID, f.Since = e.ID, time.Time{}
		}
		if len(evs) > 0 {
			flusher.Flush()
			idle = time.Now()
		} else if time.Since(idle) >= streamKeepAlive {
			if _, err := fmt.Fprint(w, ": keep-alive\n\n"); err != nil {
				return
			}
			flusher.Flush()
			idle = time.Now()
		}
		if len(evs) == streamBatch {
			continue // more are waiting
		}
		select {
		case <-r.Context().Done():
			return
		case <-s.stop:
			return
		case <-tick.C:
		}
	}
}
