package capsule

import (
	"context"
	"fmt"
	"strings"
	"time"
	"unicode"

	"github.com/agentrunner/agentrunner"
)

// Limits on a capsule's fields besides its text.
const (
	maxNameLen = 200
	maxTagLen  = 64
	maxTags    = 32
	// maxMany bounds the capsules one fetch_many or compose asks for.
	maxMany = 50
)

// Service is the capsule operations, checked, on a store. Every surface
// (tools, REST, CLI) calls it, so each gets the same checks and errors.
type Service struct {
	store    agentrunner.CapsuleStore
	maxChars int
	clock    agentrunner.Clock
}

// Options configure a Service.
type Options struct {
	// MaxChars is the size cap of a capsule's text; 0: DefaultMaxChars.
	MaxChars int
	// Clock stamps the capsules' times; nil: the system clock.
	Clock agentrunner.Clock
}

// NewService returns the operations on store.
func NewService(store agentrunner.CapsuleStore, opts Options) *Service {
	s := &Service{store: store, maxChars: opts.MaxChars, clock: opts.Clock}
	if s.maxChars <= 0 {
		s.maxChars = DefaultMaxChars
	}
	if s.clock == nil {
		s.clock = agentrunner.SystemClock{}
	}
	return s
}

// MaxChars is the size cap of a capsule's text.
func (s *Service) MaxChars() int { return s.maxChars }

// Put stores a new capsule, or with upsert the next version of the live
// one of the same name, once its fields and text pass the checks.
func (s *Service) Put(ctx context.Context, c *agentrunner.Capsule, upsert bool) (*agentrunner.Capsule, error) {
	if err := s.check(c); err != nil {
		return nil, err
	}
	now := s.clock.Now().UTC()
	in := *c
	in.ID, in.Version, in.CreatedAt, in.UpdatedAt, in.DeletedAt = 0, 0, now, now, time.Time{}
	return s.store.PutCapsule(ctx, &in, upsert)
}

// Fetch returns the live capsule of a workspace by name.
func (s *Service) Fetch(ctx context.Context, workspace, name string) (*agentrunner.Capsule, error) {
	if err := required("workspace", workspace, "name", name); err != nil {
		return nil, err
	}
	return s.store.CapsuleByName(ctx, workspace, name)
}

// FetchID returns a capsule by id, live or deleted.
func (s *Service) FetchID(ctx context.Context, id int64) (*agentrunner.Capsule, error) {
	if id <= 0 {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "id must be a positive capsule id, got %d", id)
	}
	return s.store.CapsuleByID(ctx, id)
}

// Ref names a capsule by id, or by workspace and name.
type Ref struct {
	ID        int64  `json:"id,omitempty"`
	Workspace string `json:"workspace,omitempty"`
	Name      string `json:"name,omitempty"`
}

func (r Ref) String() string {
	if r.ID > 0 {
		return fmt.Sprintf("#%d", r.ID)
	}
	return r.Workspace + "/" + r.Name
}

// FetchMany returns the capsules refs name, in their order; a capsule
// that cannot be fetched fails the whole call, naming it.
func (s *Service) FetchMany(ctx context.Context, refs []Ref) ([]*agentrunner.Capsule, error) {
	if len(refs) == 0 || len(refs) > maxMany {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "name 1 to %d capsules, got %d", maxMany, len(refs))
	}
	out := make([]*agentrunner.Capsule, 0, len(refs))
	for i, r := range refs {
		c, err := s.fetchRef(ctx, r)
		if err != nil {
			return nil, fmt.Errorf("capsule %d (%s): %w", i+1, r, err)
		}
		out = append(out, c)
	}
	return out, nil
}

func (s *Service) fetchRef(ctx context.Context, r Ref) (*agentrunner.Capsule, error) {
	switch {
	case r.ID > 0 && (r.Workspace != "" || r.Name != ""):
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "give an id, or a workspace and a name, not both")
	case r.ID > 0:
		return s.FetchID(ctx, r.ID)
	}
	return s.Fetch(ctx, r.Workspace, r.Name)
}

// Patch is what an update changes; a nil field is kept.
type Patch struct {
	Text  *string
	RunID *string
	Phase *string
	Role  *string
	Tags  *[]string
}

// Update applies p to the live capsule id, if its version is still
// version: an update never overwrites a version its caller did not read.
func (s *Service) Update(ctx context.Context, id int64, version int, p Patch) (*agentrunner.Capsule, error) {
	if version < 1 {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "version must be the version you read (1 or more), got %d", version)
	}
	c, err := s.FetchID(ctx, id)
	if err != nil {
		return nil, err
	}
	next := *c
	for _, f := range []struct {
		to   *string
		from *string
	}{{&next.Text, p.Text}, {&next.RunID, p.RunID}, {&next.Phase, p.Phase}, {&next.Role, p.Role}} {
		if f.from != nil {
			*f.to = *f.from
		}
	}
	if p.Tags != nil {
		next.Tags = *p.Tags
	}
	if err := s.check(&next); err != nil {
		return nil, err
	}
	next.UpdatedAt = s.clock.Now().UTC()
	return s.store.UpdateCapsule(ctx, &next, version)
}

// Delete deletes a live capsule, softly: it can still be listed with
// IncludeDeleted and fetched by id, and its name is free.
func (s *Service) Delete(ctx context.Context, id int64) error {
	if id <= 0 {
		return agentrunner.Errorf(agentrunner.EINVALID, "id must be a positive capsule id, got %d", id)
	}
	return s.store.DeleteCapsule(ctx, id, s.clock.Now().UTC())
}

// Latest returns the newest live capsule of a workspace, of a phase and
// role when they are given.
func (s *Service) Latest(ctx context.Context, workspace, phase, role string) (*agentrunner.Capsule, error) {
	if err := required("workspace", workspace); err != nil {
		return nil, err
	}
	cs, err := s.store.Capsules(ctx, agentrunner.CapsuleFilter{Workspace: workspace, Phase: phase, Role: role, Limit: 1})
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, agentrunner.Errorf(agentrunner.ENOTFOUND, "workspace %q has no live capsule%s", workspace, describe(phase, role))
	}
	return cs[0], nil
}

func describe(phase, role string) string {
	var parts []string
	if phase != "" {
		parts = append(parts, "phase "+phase)
	}
	if role != "" {
		parts = append(parts, "role "+role)
	}
	if len(parts) == 0 {
		return ""
	}
	return " of " + strings.Join(parts, " and ")
}

// List lists capsules, newest first.
func (s *Service) List(ctx context.Context, f agentrunner.CapsuleFilter) ([]*agentrunner.Capsule, error) {
	if f.Limit < 0 || f.Before < 0 {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "limit and before must not be negative")
	}
	return s.store.Capsules(ctx, f)
}

// Search finds capsules by full-text query, best first.
func (s *Service) Search(ctx context.Context, query string, f agentrunner.CapsuleFilter) ([]*agentrunner.CapsuleHit, error) {
	if strings.TrimSpace(query) == "" {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "query is empty: give the words to search for")
	}
	if f.Limit < 0 {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "limit must not be negative")
	}
	return s.store.SearchCapsules(ctx, query, f)
}

// Inventory counts the live capsules by workspace, phase and role.
func (s *Service) Inventory(ctx context.Context) ([]agentrunner.CapsuleCount, error) {
	return s.store.CapsuleInventory(ctx)
}

// BulkUpdate sets phase, role or tags on every live capsule f selects.
// A filter must select something narrower than everything.
func (s *Service) BulkUpdate(ctx context.Context, f agentrunner.CapsuleFilter, ch agentrunner.CapsuleChanges) (int, error) {
	if err := bulkFilter(f); err != nil {
		return 0, err
	}
	if ch.Phase == nil && ch.Role == nil && ch.Tags == nil {
		return 0, agentrunner.Errorf(agentrunner.EINVALID, "nothing to set: give phase, role or tags")
	}
	if ch.Tags != nil {
		if err := checkTags(*ch.Tags); err != nil {
			return 0, err
		}
	}
	return s.store.UpdateCapsules(ctx, f, ch, s.clock.Now().UTC())
}

// BulkDelete deletes every live capsule f selects.
func (s *Service) BulkDelete(ctx context.Context, f agentrunner.CapsuleFilter) (int, error) {
	if err := bulkFilter(f); err != nil {
		return 0, err
	}
	return s.store.DeleteCapsules(ctx, f, s.clock.Now().UTC())
}

func bulkFilter(f agentrunner.CapsuleFilter) error {
	if f.Workspace == "" && f.RunID == "" && f.Phase == "" && f.Role == "" && f.Tag == "" {
		return agentrunner.Errorf(agentrunner.EINVALID, "a bulk change needs a filter: give workspace, run_id, phase, role or tag")
	}
	return nil
}

// check checks a capsule's fields and lints its text.
func (s *Service) check(c *agentrunner.Capsule) error {
	if err := required("workspace", c.Workspace, "name", c.Name); err != nil {
		return err
	}
	for _, f := range []struct{ key, v string }{{"workspace", c.Workspace}, {"name", c.Name}, {"run_id", c.RunID}, {"phase", c.Phase}, {"role", c.Role}} {
		if err := plain(f.key, f.v, maxNameLen); err != nil {
			return err
		}
	}
	if err := checkTags(c.Tags); err != nil {
		return err
	}
	return Lint(c.Text, s.maxChars)
}

func checkTags(tags []string) error {
	if len(tags) > maxTags {
		return agentrunner.Errorf(agentrunner.EINVALID, "%d tags, more than %d", len(tags), maxTags)
	}
	for i, t := range tags {
		if t == "" {
			return agentrunner.Errorf(agentrunner.EINVALID, "tags[%d] is empty", i)
		}
		if err := plain(fmt.Sprintf("tags[%d]", i), t, maxTagLen); err != nil {
			return err
		}
	}
	return nil
}

// plain refuses a field longer than limit or with control characters.
func plain(key, v string, limit int) error {
	if len(v) > limit {
		return agentrunner.Errorf(agentrunner.EINVALID, "%s is %d bytes, more than %d", key, len(v), limit)
	}
	if i := strings.IndexFunc(v, unicode.IsControl); i >= 0 {
		return agentrunner.Errorf(agentrunner.EINVALID, "%s has a control character at byte %d", key, i)
	}
	return nil
}

// required fails unless every value of the key, value pairs is set.
func required(kv ...string) error {
	var missing []string
	for i := 0; i+1 < len(kv); i += 2 {
		if strings.TrimSpace(kv[i+1]) == "" {
			missing = append(missing, kv[i])
		}
	}
	if len(missing) > 0 {
		return agentrunner.Errorf(agentrunner.EINVALID, "%s %s required", strings.Join(missing, " and "), map[bool]string{true: "is", false: "are"}[len(missing) == 1])
	}
	return nil
}
