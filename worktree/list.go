package worktree

import (
	"context"
	"path/filepath"
	"strconv"
	"strings"
)

// entry is one worktree as `git worktree list --porcelain` describes it,
// with what Ensure and Remove need beyond the public Worktree.
type entry struct {
	Worktree
	main   bool // the repository's main worktree (listed first)
	bare   bool // the main entry of a bare repository: no files, no HEAD
	locked bool
	reason string // why it is locked
}

// List returns the worktrees of repo, the main worktree first, as
// `git worktree list --porcelain` gives them: Dir is cleaned and in the
// platform's form, Branch is the short name ("" when detached), Head is ""
// for a bare repository or a branch without commits.
func (g Git) List(ctx context.Context, repo string) ([]Worktree, error) {
	entries, err := g.list(ctx, repo)
	if err != nil {
		return nil, err
	}
	wts := make([]Worktree, len(entries))
	for i, e := range entries {
		wts[i] = e.Worktree
	}
	return wts, nil
}

// list runs `git worktree list --porcelain` in repo and parses it.
func (g Git) list(ctx context.Context, repo string) ([]entry, error) {
	out, err := g.run(ctx, repo, "worktree", "list", "--porcelain")
	if err != nil {
		return nil, failed(err, "could not list the worktrees of %s", repo)
	}
	return parseList(out), nil
}

// parseList reads the porcelain format: one "key value" line per
// attribute, a blank line after each worktree. Keys it does not know
// (a newer git's) are skipped.
func parseList(out string) []entry {
	var entries []entry
	for _, line := range strings.Split(out, "\n") {
		key, value, _ := strings.Cut(strings.TrimSuffix(line, "\r"), " ")
		if key == "worktree" {
			dir := filepath.Clean(filepath.FromSlash(unquote(value)))
			entries = append(entries, entry{Worktree: Worktree{Dir: dir}, main: len(entries) == 0})
			continue
		}
		if len(entries) > 0 {
			entries[len(entries)-1].set(key, value)
		}
	}
	return entries
}

// set records one attribute line of a worktree.
func (e *entry) set(key, value string) {
	switch key {
	case "HEAD":
		if strings.Trim(value, "0") != "" { // all zeros: no commit yet
			e.Head = value
		}
	case "branch":
		e.Branch = strings.TrimPrefix(value, "refs/heads/")
	case "bare":
		e.bare = true
	case "locked":
		e.locked, e.reason = true, unquote(value)
	}
}

// unquote undoes git's C-style quoting, which it uses for a lock reason
// (and a path, in some versions) holding a quote, a backslash or a control
// character; an unquoted value is returned as it is.
func unquote(s string) string {
	if len(s) < 2 || s[0] != '"' {
		return s
	}
	if u, err := strconv.Unquote(s); err == nil {
		return u
	}
	return s
}
