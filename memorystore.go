package agentrunner

import (
	"context"
	"time"
)

// MemoryEntry is one note an agent appended to its memory (FR-041..043):
// committed to the store, which indexes it for search, and then appended
// to the agent's memory file, a view of the store's entries.
type MemoryEntry struct {
	ID    int64 // assigned by the store, in append order
	Agent string
	// RunID, Step and Attempt say who appended it, when an agent did.
	RunID     string
	Step      string
	Attempt   int
	Text      string
	CreatedAt time.Time
}

// MemoryHit is an entry found by a search, with its rank (lower is
// better) and a snippet around the terms.
type MemoryHit struct {
	Entry   *MemoryEntry
	Rank    float64
	Snippet string
}

// MemoryStore keeps the agents' memory entries. A search query the index
// cannot parse is EINVALID.
type MemoryStore interface {
	// AppendMemory stores an entry and returns it with its ID.
	AppendMemory(ctx context.Context, e *MemoryEntry) (*MemoryEntry, error)
	// MemoryEntries lists an agent's entries after the ID after, oldest
	// first, at most limit (0: all).
	MemoryEntries(ctx context.Context, agent string, after int64, limit int) ([]*MemoryEntry, error)
	// SearchMemory finds entries by full-text query, best first, among
	// those of agents (none: every agent's), at most limit (0: 20).
	SearchMemory(ctx context.Context, query string, agents []string, limit int) ([]*MemoryHit, error)
}
