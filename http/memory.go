package http

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clip"
	"github.com/agentrunner/agentrunner/memory"
)

// The agents' memories (FR-040..043) are read and written through the
// memory Log, which the agents' tools and the CLI share: an append goes to
// the store, which indexes it, and then to the agent's memory file. The
// API checks its requests, and leaves the checks of an entry and of a
// search to the Log, so its messages are the Log's.

// MemoryEntry is a memory entry as the API shows it.
type MemoryEntry struct {
	ID    int64  `json:"id"`
	Agent string `json:"agent"`
	// CycleID, Step and Attempt say who appended it, when an agent did.
	CycleID string    `json:"cycle_id,omitempty"`
	Step    string    `json:"step,omitempty"`
	Attempt int       `json:"attempt,omitempty"`
	Time    time.Time `json:"time"`
	Text    string    `json:"text"`
}

// MemoryEntries are an agent's memory entries, oldest first.
type MemoryEntries struct {
	Agent   string        `json:"agent"`
	Entries []MemoryEntry `json:"entries"`
}

// MemoryAppended is the entry an append stored; Warning, when set, says
// that the agent's memory file is behind the store.
type MemoryAppended struct {
	MemoryEntry
	Warning string `json:"warning,omitempty"`
}

// MemoryHit is an entry a search found, with its rank and a snippet.
type MemoryHit struct {
	ID      int64     `json:"id"`
	Agent   string    `json:"agent"`
	CycleID string    `json:"cycle_id,omitempty"`
	Time    time.Time `json:"time"`
	Rank    float64   `json:"rank"`
	Snippet string    `json:"snippet"`
	Text    string    `json:"text"`
}

// MemoryHits are the entries a search found, best first.
type MemoryHits struct {
	Hits []MemoryHit `json:"hits"`
}

// MemoryRequest is the body of POST /api/memory/{agent}.
type MemoryRequest struct {
	Text string `json:"text"`
}

// memoryEntry shows an entry.
func memoryEntry(e *agentrunner.MemoryEntry) MemoryEntry {
	return MemoryEntry{ID: e.ID, Agent: e.Agent, CycleID: e.RunID, Step: e.Step, Attempt: e.Attempt, Time: e.CreatedAt.UTC(), Text: e.Text}
}

// memories returns the memory Log, or answers that there is none.
func (s *Server) memories(w http.ResponseWriter, r *http.Request) *memory.Log {
	if s.opts.Memory == nil {
		s.writeError(w, r, agentrunner.Errorf(agentrunner.EUNAVAILABLE, "memories are not served by this server"))
	}
	return s.opts.Memory
}

// handleMemory lists an agent's memory entries, oldest first.
func (s *Server) handleMemory(w http.ResponseWriter, r *http.Request) {
	l := s.memories(w, r)
	if l == nil {
		return
	}
	agent := s.agentOf(w, r)
	if agent == "" {
		return
	}
	if !s.noQuery(w, r) {
		return
	}
	entries, err := l.Entries(r.Context(), agent)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := MemoryEntries{Agent: agent, Entries: make([]MemoryEntry, len(entries))}
	for i, e := range entries {
		out.Entries[i] = memoryEntry(e)
	}
	writeJSON(w, http.StatusOK, out)
}

// handlePostMemory appends an operator's note to an agent's memory: to the
// store, then to the agent's memory file. When the file write fails after
// the store took the entry, the entry is answered with a warning: the
// store has it, and the next append adds it to the file.
func (s *Server) handlePostMemory(w http.ResponseWriter, r *http.Request) {
	l := s.memories(w, r)
	if l == nil {
		return
	}
	agent := s.agentOf(w, r)
	if agent == "" {
		return
	}
	if !s.noQuery(w, r) {
		return
	}
	var body MemoryRequest
	if !s.decode(w, r, &body, false) {
		return
	}
	e, err := l.Append(r.Context(), agentrunner.MemoryEntry{Agent: agent, Text: body.Text})
	if e == nil {
		s.writeError(w, r, err)
		return
	}
	p, _ := PrincipalFrom(r.Context())
	who := []any{"operator", p.Name, "role", p.Role, "via", p.Via, "remote", r.RemoteAddr}
	s.log.Info("memory appended", append([]any{"agent", agent, "id", e.ID}, who...)...)
	out := MemoryAppended{MemoryEntry: memoryEntry(e)}
	if err != nil {
		// The cause (a path, a file system's error) goes to the log only.
		s.log.Warn("memory file behind the store", append([]any{"agent", agent, "id", e.ID, "error", err}, who...)...)
		out.Warning = "entry " + strconv.FormatInt(e.ID, 10) + " is stored, and the memory file of " + agent +
			" is behind: writing it failed (the server's log says why); the next append to the agent's memory adds the entry to it"
	}
	writeJSON(w, http.StatusCreated, out)
}

// handleSearchMemory finds memory entries by full-text query, best first:
// of the agents named, or of every agent.
func (s *Server) handleSearchMemory(w http.ResponseWriter, r *http.Request) {
	l := s.memories(w, r)
	if l == nil {
		return
	}
	q, err := strictQuery(r, []string{"agent"}, "q", "agent", "limit")
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	agents := q["agent"]
	for _, a := range agents {
		if s.cfg.Agents[a] == nil {
			s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "query parameter agent: no agent %q (agents: %s)",
				clip.String(a, maxQuoted), strings.Join(slices.Sorted(maps.Keys(s.cfg.Agents)), ", ")))
			return
		}
	}
	// The Log bounds the limit; only a limit that is not a number is
	// refused here.
	var limit int
	if v := q.Get("limit"); v != "" {
		if limit, err = strconv.Atoi(v); err != nil {
			s.writeError(w, r, agentrunner.Errorf(agentrunner.EINVALID, "query parameter limit: want an integer from 1 to 100, got %q", clip.String(v, maxQuoted)))
			return
		}
	}
	hits, err := l.Search(r.Context(), q.Get("q"), agents, limit)
	if err != nil {
		s.writeError(w, r, err)
		return
	}
	out := MemoryHits{Hits: make([]MemoryHit, len(hits))}
	for i, h := range hits {
		out.Hits[i] = MemoryHit{ID: h.Entry.ID, Agent: h.Entry.Agent, CycleID: h.Entry.RunID, Time: h.Entry.CreatedAt.UTC(),
			Rank: h.Rank, Snippet: h.Snippet, Text: h.Entry.Text}
	}
	writeJSON(w, http.StatusOK, out)
}
