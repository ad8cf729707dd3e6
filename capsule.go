package agentrunner

import (
	"context"
	"time"
)

// Capsule is a structured hand-off note (spec 3): what one agent, or one
// session, leaves for the next. Its Text is markdown with six sections in
// order (CapsuleSections). A capsule's Name is unique among the live
// capsules of its Workspace; a deleted one frees its name.
type Capsule struct {
	ID        int64 // assigned by the store
	Workspace string
	Name      string
	RunID     string
	Phase     string
	Role      string
	Tags      []string
	Text      string
	// Version starts at 1 and grows by one with each update, which must
	// name the version it read (optimistic concurrency).
	Version   int
	CreatedAt time.Time
	UpdatedAt time.Time
	// DeletedAt is set once the capsule is deleted (soft); zero while live.
	DeletedAt time.Time
}

// CapsuleSections are the sections a capsule's text has, in this order.
var CapsuleSections = []string{"Objective", "Status", "Decisions", "Next actions", "Key locations", "Open questions"}

// CapsuleFilter selects capsules, newest first (by ID). Empty fields
// select any; Tag selects the capsules that have that tag.
type CapsuleFilter struct {
	Workspace string
	RunID     string
	Phase     string
	Role      string
	Tag       string
	// IncludeDeleted selects deleted capsules too.
	IncludeDeleted bool
	// Before, if set, selects the capsules whose ID is below it: the
	// next page after a page that ended with that ID.
	Before int64
	// Limit bounds the capsules returned; 0: the store's default (100).
	Limit int
}

// CapsuleHit is a capsule found by a search, with its rank (lower is
// better: bm25) and a snippet of its text around the terms.
type CapsuleHit struct {
	Capsule *Capsule
	Rank    float64
	Snippet string
}

// CapsuleCount is how many live capsules a workspace has of one phase
// and role.
type CapsuleCount struct {
	Workspace string
	Phase     string
	Role      string
	N         int
}

// CapsuleChanges are what a bulk update sets on every capsule a filter
// selects; a nil field is left alone.
type CapsuleChanges struct {
	Phase *string
	Role  *string
	Tags  *[]string
}

// CapsuleStore keeps capsules. Errors are ENOTFOUND (no such live
// capsule), ECONFLICT (a live capsule has the name already; an update of
// a version that is not the current one) and EINVALID (a search query
// the index cannot parse).
type CapsuleStore interface {
	// PutCapsule stores a new capsule (its ID is ignored) with the times
	// it carries, at its Version when that is 1 or more (an import), else
	// at version 1; or with upsert replaces the live capsule of the same
	// workspace and name as its next version (keeping its ID and
	// CreatedAt, taking c.UpdatedAt).
	PutCapsule(ctx context.Context, c *Capsule, upsert bool) (*Capsule, error)
	// CapsuleByName returns the live capsule of a workspace with the name.
	CapsuleByName(ctx context.Context, workspace, name string) (*Capsule, error)
	// CapsuleByID returns a capsule, live or deleted.
	CapsuleByID(ctx context.Context, id int64) (*Capsule, error)
	// UpdateCapsule replaces the text, run, phase, role and tags of the
	// live capsule c.ID, as of c.UpdatedAt, if its version is still
	// version.
	UpdateCapsule(ctx context.Context, c *Capsule, version int) (*Capsule, error)
	// DeleteCapsule deletes a live capsule (softly).
	DeleteCapsule(ctx context.Context, id int64, at time.Time) error
	// Capsules lists capsules, newest first.
	Capsules(ctx context.Context, f CapsuleFilter) ([]*Capsule, error)
	// SearchCapsules finds the capsules whose text matches a full-text
	// query, best first, among those f selects.
	SearchCapsules(ctx context.Context, query string, f CapsuleFilter) ([]*CapsuleHit, error)
	// CapsuleInventory counts the live capsules by workspace, phase and
	// role, ordered by all three.
	CapsuleInventory(ctx context.Context) ([]CapsuleCount, error)
	// UpdateCapsules applies changes to every live capsule f selects (its
	// Limit and Before ignored), each as its next version, and returns how
	// many it changed.
	UpdateCapsules(ctx context.Context, f CapsuleFilter, changes CapsuleChanges, at time.Time) (int, error)
	// DeleteCapsules deletes every live capsule f selects and returns how
	// many.
	DeleteCapsules(ctx context.Context, f CapsuleFilter, at time.Time) (int, error)
}
