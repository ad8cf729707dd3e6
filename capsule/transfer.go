package capsule

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
)

// Record is one capsule as export writes it and import reads it: one
// JSON object per line, without the store's id, so that a workspace's
// capsules move between stores.
type Record struct {
	Workspace string     `json:"workspace"`
	Name      string     `json:"name"`
	RunID     string     `json:"run_id,omitempty"`
	Phase     string     `json:"phase,omitempty"`
	Role      string     `json:"role,omitempty"`
	Tags      []string   `json:"tags,omitempty"`
	Text      string     `json:"capsule_text"`
	Version   int        `json:"version"`
	CreatedAt time.Time  `json:"created_at"`
	UpdatedAt time.Time  `json:"updated_at"`
	DeletedAt *time.Time `json:"deleted_at,omitempty"`
}

func recordOf(c *agentrunner.Capsule) Record {
	r := Record{Workspace: c.Workspace, Name: c.Name, RunID: c.RunID, Phase: c.Phase, Role: c.Role, Tags: c.Tags,
		Text: c.Text, Version: c.Version, CreatedAt: c.CreatedAt.UTC(), UpdatedAt: c.UpdatedAt.UTC()}
	if !c.DeletedAt.IsZero() {
		d := c.DeletedAt.UTC()
		r.DeletedAt = &d
	}
	return r
}

func (r Record) capsule() *agentrunner.Capsule {
	c := &agentrunner.Capsule{Workspace: r.Workspace, Name: r.Name, RunID: r.RunID, Phase: r.Phase, Role: r.Role, Tags: r.Tags,
		Text: r.Text, Version: r.Version, CreatedAt: r.CreatedAt, UpdatedAt: r.UpdatedAt}
	if r.DeletedAt != nil {
		c.DeletedAt = *r.DeletedAt
	}
	return c
}

// Export writes the capsules f selects (its Limit and Before ignored) as
// JSON lines, oldest first, and returns how many.
func (s *Service) Export(ctx context.Context, w io.Writer, f agentrunner.CapsuleFilter) (int, error) {
	var all []*agentrunner.Capsule
	f.Before, f.Limit = 0, 1000
	for {
		page, err := s.store.Capsules(ctx, f)
		if err != nil {
			return 0, err
		}
		all = append(all, page...)
		if len(page) < f.Limit {
			break
		}
		f.Before = page[len(page)-1].ID
	}
	slices.Reverse(all)
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	for _, c := range all {
		if err := enc.Encode(recordOf(c)); err != nil {
			return 0, err
		}
	}
	return len(all), nil
}

// OnConflict is what import does with a record whose workspace and name
// a live capsule has already.
type OnConflict string

// The import policies.
const (
	Skip    OnConflict = "skip"
	Replace OnConflict = "replace"
)

// Imported counts what an import did.
type Imported struct {
	Stored, Replaced, Skipped int
}

// Import reads JSON lines that Export wrote and stores each capsule with
// its version and times, deleted ones deleted. A record that fails the
// checks stops the import, naming its line; the records before it are
// stored. onConflict decides about a name a live capsule has.
func (s *Service) Import(ctx context.Context, r io.Reader, onConflict OnConflict) (Imported, error) {
	var n Imported
	if onConflict != Skip && onConflict != Replace {
		return n, agentrunner.Errorf(agentrunner.EINVALID, "on_conflict must be %q or %q, got %q", Skip, Replace, onConflict)
	}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 4*s.maxChars+64<<10)
	for line := 1; sc.Scan(); line++ {
		if len(bytes.TrimSpace(sc.Bytes())) == 0 {
			continue
		}
		if err := s.importLine(ctx, sc.Bytes(), onConflict, &n); err != nil {
			return n, fmt.Errorf("line %d: %w", line, err)
		}
	}
	if err := sc.Err(); err != nil {
		return n, agentrunner.Errorf(agentrunner.EINVALID, "reading the import: %v", err)
	}
	return n, nil
}

func (s *Service) importLine(ctx context.Context, data []byte, onConflict OnConflict, n *Imported) error {
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	var r Record
	if err := dec.Decode(&r); err != nil {
		return agentrunner.Errorf(agentrunner.EINVALID, "not a capsule record: %v", err)
	}
	c := r.capsule()
	if err := s.check(c); err != nil {
		return err
	}
	if c.Version < 1 || c.CreatedAt.IsZero() || c.UpdatedAt.IsZero() {
		return agentrunner.Errorf(agentrunner.EINVALID, "a record needs its version (1 or more), created_at and updated_at")
	}
	replace := false
	if c.DeletedAt.IsZero() {
		_, err := s.store.CapsuleByName(ctx, c.Workspace, c.Name)
		switch {
		case err == nil && onConflict == Skip:
			n.Skipped++
			return nil
		case err == nil:
			replace = true
		case agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND:
			return err
		}
	}
	stored, err := s.store.PutCapsule(ctx, c, replace)
	if err != nil {
		return err
	}
	if !c.DeletedAt.IsZero() {
		if err := s.store.DeleteCapsule(ctx, stored.ID, c.DeletedAt); err != nil {
			return err
		}
	}
	if replace {
		n.Replaced++
	} else {
		n.Stored++
	}
	return nil
}

// Compose fetches the capsules refs name and joins them into one markdown
// bundle: each under its own "## workspace/name" heading, with its
// sections one level deeper.
func (s *Service) Compose(ctx context.Context, refs []Ref) (string, error) {
	cs, err := s.FetchMany(ctx, refs)
	if err != nil {
		return "", err
	}
	var b strings.Builder
	fmt.Fprintf(&b, "# %d capsule(s)\n", len(cs))
	for _, c := range cs {
		fmt.Fprintf(&b, "\n## %s/%s (version %d", c.Workspace, c.Name, c.Version)
		for _, kv := range [][2]string{{"run", c.RunID}, {"phase", c.Phase}, {"role", c.Role}} {
			if kv[1] != "" {
				fmt.Fprintf(&b, ", %s %s", kv[0], kv[1])
			}
		}
		b.WriteString(")\n\n")
		b.WriteString(demote(strings.TrimSpace(c.Text)))
		b.WriteString("\n")
	}
	return b.String(), nil
}

// demote moves the text's headings one level down, outside code fences.
func demote(text string) string {
	lines := strings.Split(text, "\n")
	fence := ""
	for i, l := range lines {
		t := strings.TrimSpace(l)
		if f := fenceOf(t); f != "" {
			if fence == "" {
				fence = f
			} else if strings.HasPrefix(t, fence) {
				fence = ""
			}
			continue
		}
		if fence == "" && strings.HasPrefix(l, "#") {
			lines[i] = "#" + l
		}
	}
	return strings.Join(lines, "\n")
}
