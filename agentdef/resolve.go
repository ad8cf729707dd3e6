package agentdef

import (
	"fmt"
	"path"
	"slices"
	"strings"
)

// Context is what is known of the repository an agent works on.
type Context struct {
	Language  string
	Framework string
	// Files are the repository's files, relative and slash-separated.
	Files []string
}

// Candidate is one agent Resolve considered.
type Candidate struct {
	ID string
	// Variant is false for the state's default agent.
	Variant bool
	// Matched says if the variant's match fits the context; always true
	// for the default.
	Matched bool
	// Detail says what fit, or the first thing that did not.
	Detail string
}

// Reason says why Resolve chose its agent.
type Reason struct {
	// Winner is the id of the chosen agent.
	Winner string
	// Variant is true when a variant won over the default.
	Variant bool
	// Why is one sentence.
	Why string
	// Candidates are the matching variants, most specific first, then the
	// variants that do not match (by id), then the default.
	Candidates []Candidate
}

func (r Reason) String() string { return r.Why }

// Resolve returns the agent for a state (a state or a backlog_state) in a
// context: the most specific matching variant, else the default agent
// (see the package documentation for the order).
func (s *Set) Resolve(state string, ctx Context) (*Agent, Reason, error) {
	var def *Agent
	var matched, unmatched []*Agent
	details := map[string]string{}
	for _, id := range s.ids {
		a := s.agents[id]
		if a.State != state && a.BacklogState != state {
			continue
		}
		if !a.Variant {
			def = a
			continue
		}
		ok, detail := fits(a.Match, ctx)
		details[id] = detail
		if ok {
			matched = append(matched, a)
		} else {
			unmatched = append(unmatched, a)
		}
	}
	if def == nil && len(matched)+len(unmatched) == 0 {
		return nil, Reason{}, fmt.Errorf("no agent handles the state %q (states: %s)", state, strings.Join(s.states(), ", "))
	}
	slices.SortStableFunc(matched, func(a, b *Agent) int { return moreSpecific(a.Match, b.Match, a.ID, b.ID) })

	var r Reason
	for _, a := range matched {
		r.Candidates = append(r.Candidates, Candidate{ID: a.ID, Variant: true, Matched: true, Detail: details[a.ID]})
	}
	for _, a := range unmatched {
		r.Candidates = append(r.Candidates, Candidate{ID: a.ID, Variant: true, Detail: details[a.ID]})
	}
	if def != nil {
		r.Candidates = append(r.Candidates, Candidate{ID: def.ID, Matched: true, Detail: "the default agent of the state"})
	}
	switch {
	case len(matched) > 0:
		win := matched[0]
		r.Winner, r.Variant = win.ID, true
		r.Why = fmt.Sprintf("variant %s matches %s", win.ID, details[win.ID])
		if len(matched) > 1 {
			r.Why += fmt.Sprintf(" and is the most specific of %d matching variants (next: %s, %s)",
				len(matched), matched[1].ID, whyBeats(win, matched[1]))
		}
		if def != nil {
			r.Why += fmt.Sprintf("; it wins over the default %s", def.ID)
		}
		return win, r, nil
	case def != nil:
		r.Winner = def.ID
		if len(unmatched) == 0 {
			r.Why = fmt.Sprintf("%s is the default agent of %s and it has no variants", def.ID, state)
		} else {
			r.Why = fmt.Sprintf("%s is the default agent of %s; none of its %d variants matches", def.ID, state, len(unmatched))
		}
		return def, r, nil
	}
	return nil, r, fmt.Errorf("no variant of state %q matches and it has no default agent (in agents/defaults)", state)
}

func (s *Set) states() []string {
	var out []string
	for _, a := range s.agents {
		if st := a.StateName(); !slices.Contains(out, st) {
			out = append(out, st)
		}
	}
	slices.Sort(out)
	return out
}

// fits says if a match fits the context and describes what fit, or what
// did not.
func fits(m *Match, ctx Context) (bool, string) {
	if m == nil {
		return false, "it has no match"
	}
	var what []string
	if len(m.Files) > 0 {
		for _, f := range m.Files {
			if !slices.ContainsFunc(ctx.Files, func(p string) bool { ok, _ := path.Match(f, p); return ok }) {
				return false, fmt.Sprintf("no file %s in the repository", f)
			}
		}
		what = append(what, "files "+strings.Join(m.Files, ", "))
	}
	if m.Framework != "" {
		if !strings.EqualFold(m.Framework, ctx.Framework) {
			return false, differs("framework", m.Framework, ctx.Framework)
		}
		what = append(what, "framework "+m.Framework)
	}
	if m.Language != "" {
		if !strings.EqualFold(m.Language, ctx.Language) {
			return false, differs("language", m.Language, ctx.Language)
		}
		what = append(what, "language "+m.Language)
	}
	return true, strings.Join(what, " and ")
}

func differs(what, want, got string) string {
	if got == "" {
		return fmt.Sprintf("%s %s, and the repository's %s is not known", what, want, what)
	}
	return fmt.Sprintf("%s %s, not %s", what, want, got)
}

// rank is the specificity of a match, compared key by key.
func rank(m *Match) [4]int {
	b := func(x bool) int {
		if x {
			return 1
		}
		return 0
	}
	return [4]int{b(len(m.Files) > 0), b(m.Framework != ""), b(m.Language != ""), m.conditions()}
}

// moreSpecific orders the more specific match first, then the smaller id.
func moreSpecific(a, b *Match, aID, bID string) int {
	ra, rb := rank(a), rank(b)
	for i := range ra {
		if ra[i] != rb[i] {
			return rb[i] - ra[i]
		}
	}
	return strings.Compare(aID, bID)
}

// whyBeats says which rule puts a before b.
func whyBeats(a, b *Agent) string {
	ra, rb := rank(a.Match), rank(b.Match)
	rules := []string{"it matches files", "it matches a framework", "it matches a language", fmt.Sprintf("it has more conditions (%d to %d)", ra[3], rb[3])}
	for i := range ra {
		if ra[i] != rb[i] {
			return rules[i]
		}
	}
	return "equally specific, the smaller id wins"
}
