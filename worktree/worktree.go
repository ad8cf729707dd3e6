// Package worktree is spec 5's WorktreeService: each task of a backlog item
// works in a git worktree of its own, on a branch of its own made from the
// item's base branch, in a folder under a configured root. It runs the git
// binary (git 2.31 or newer); it links no git library.
//
// # Crash safety
//
// The runner can be killed at any moment and started again, and it then
// calls Ensure or Remove again. Each call therefore first looks at what is
// there and only then does the steps that are missing, each of which
// leaves a state the next call recognises:
//
//   - The branch is made (`git branch`) before the worktree is added, and
//     an existing branch is never moved: a branch left by a killed call, or
//     kept from an earlier worktree, is checked out as it is, commits kept.
//   - `git worktree add` locks the worktree with the reason "initializing"
//     until its checkout is complete. A worktree still locked so is the
//     leftover of an add that was killed: every Ensure and Remove first
//     takes all of them away (recover.go), reading git's files directly
//     because some of these leftovers make `git worktree list` fail. Their
//     folders hold only git's half-done checkout; a folder that holds
//     anything else is left alone.
//   - A worktree whose folder was deleted by hand is forgotten with
//     `git worktree prune` and added again.
//   - A worktree is taken away by renaming its folder aside in one step
//     (into .removing-<name> beside it), pruning git's record of it, then
//     deleting the renamed folder. `git worktree remove` deletes file by
//     file: killed halfway, it leaves a folder with some of the files that
//     git may already have forgotten, which no later call could tell from
//     someone's own files. What a killed call left in .removing-<name> is
//     deleted by the next Ensure or Remove of the same folder. Renaming
//     also moves the folder away from a git that was killed with the
//     runner but whose child (the checkout of an add) still writes; until
//     that child ends, adding the worktree again can fail with git's
//     message, and a later call succeeds.
//   - git writes the branch under refs/heads/<branch>.lock; a kill in that
//     instant leaves the file, and git refuses the branch while it is
//     there. Ensure deletes it once it is ten seconds old (no running git
//     holds it that long) and until then fails with EUNAVAILABLE.
//
// A folder that holds other files is never deleted or used: Ensure refuses
// it. Calls for the same repository must not run at the same time (the
// runner holds its workspace lock), and nobody else may be adding a
// worktree to it at that moment: its "initializing" lock would be taken
// for a killed add's.
package worktree

import (
	"context"
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

	"github.com/agentrunner/agentrunner"
)

// Worktree is one worktree of a repository.
type Worktree struct {
	// Dir is the absolute, cleaned folder of the worktree, as git records
	// it (with symlinks resolved).
	Dir string
	// Branch is the short name of the branch checked out ("" if detached).
	Branch string
	// Head is the commit checked out.
	Head string
}

// Ensure makes dir a worktree of repo with branch checked out and returns
// it, with created true when this call added it. A branch that does not
// exist yet is made at base (a branch or commit, read only then, without
// upstream tracking); an existing branch is checked out as it is, so the
// commits made on it are kept. Calling Ensure again, also after a kill at
// any point, ends in the same one worktree (see the package comment).
//
// It refuses (EINVALID) a relative dir, an invalid branch name and a base
// that is no commit, and (ECONFLICT) a dir that holds other files, is a
// worktree of another branch or repository, or is a locked worktree whose
// folder is gone, and a branch already checked out in another worktree.
func (g Git) Ensure(ctx context.Context, repo, dir, branch, base string) (Worktree, bool, error) {
	r, dir, err := g.prepare(ctx, repo, dir)
	if err != nil {
		return Worktree{}, false, err
	}
	if err := g.checkBranch(ctx, r, branch); err != nil {
		return Worktree{}, false, err
	}
	entries, err := g.tidy(ctx, r, dir)
	if err != nil {
		return Worktree{}, false, err
	}
	if e, ok := find(entries, dir); ok {
		wt, err := existing(r, e, branch)
		return wt, false, err
	}
	if err := g.add(ctx, r, entries, dir, branch, base); err != nil {
		return Worktree{}, false, err
	}
	wt, err := g.added(ctx, r, dir, branch)
	return wt, err == nil, err
}

// Remove takes the worktree at dir out of repo and deletes its folder,
// whatever changes it holds; its branch is kept. A dir that is no worktree
// of repo (never made, or removed already) is not an error and is left as
// it is. It refuses the main worktree (EINVALID) and a worktree locked by
// someone (ECONFLICT).
func (g Git) Remove(ctx context.Context, repo, dir string) error {
	r, dir, err := g.prepare(ctx, repo, dir)
	if err != nil {
		return err
	}
	entries, err := g.tidy(ctx, r, dir)
	if err != nil {
		return err
	}
	e, ok := find(entries, dir)
	if !ok {
		return nil
	}
	if e.main {
		return agentrunner.Errorf(agentrunner.EINVALID, "%s is the main worktree of %s and cannot be removed", dir, r.top)
	}
	if e.locked {
		return agentrunner.Errorf(agentrunner.ECONFLICT, "worktree %s of %s is locked (%s): unlock it with git worktree unlock first", dir, r.top, e.reason)
	}
	return g.discard(ctx, r, dir)
}

// prepare opens repo and checks dir: it must be absolute (a relative one
// would depend on the runner's working folder) and not a root. It returns
// dir resolved.
func (g Git) prepare(ctx context.Context, repo, dir string) (repository, string, error) {
	if !filepath.IsAbs(dir) || filepath.Dir(filepath.Clean(dir)) == filepath.Clean(dir) {
		return repository{}, "", agentrunner.Errorf(agentrunner.EINVALID, "worktree folder %q for %s must be an absolute path below a root", dir, repo)
	}
	if strings.ContainsAny(dir, "\n\r") {
		return repository{}, "", agentrunner.Errorf(agentrunner.EINVALID, "worktree folder %q for %s must not contain a line break", dir, repo)
	}
	r, err := g.open(ctx, repo)
	if err != nil {
		return repository{}, "", err
	}
	return r, resolve(dir), nil
}

// checkBranch refuses a name git would not take for a new branch, and "@",
// which git takes but reads as HEAD where `git worktree add` expects a
// branch.
func (g Git) checkBranch(ctx context.Context, r repository, branch string) error {
	out, err := g.run(ctx, r.top, "check-ref-format", "--branch", branch)
	if err != nil && exitCode(err) < 0 {
		return failed(err, "could not check branch name %q for %s", branch, r.top)
	}
	if err != nil || strings.TrimSpace(out) != branch || branch == "@" {
		return invalid(err, "%q is not a valid branch name for a worktree of %s", branch, r.top)
	}
	return nil
}

// tidy clears what killed calls and hand-deleted folders left (see
// recover.go), then returns the worktrees that remain.
func (g Git) tidy(ctx context.Context, r repository, dir string) ([]entry, error) {
	removeTrash(dir)
	if err := clearInterrupted(r); err != nil {
		return nil, failed(err, "could not clear an interrupted git worktree add in %s", r.top)
	}
	if err := g.prune(ctx, r); err != nil {
		return nil, err
	}
	return g.list(ctx, r.top)
}

// find returns the worktree at dir.
func find(entries []entry, dir string) (entry, bool) {
	for _, e := range entries {
		if samePath(resolve(e.Dir), dir) {
			return e, true
		}
	}
	return entry{}, false
}

// existing checks that the worktree already at dir is the one asked for.
// A locked one is used as it is (a lock keeps git from pruning it, not
// anyone from working in it) unless its folder is gone: tidy pruned the
// others whose folder is gone, but git keeps locked ones.
func existing(r repository, e entry, branch string) (Worktree, error) {
	switch {
	case e.main:
		return Worktree{}, agentrunner.Errorf(agentrunner.EINVALID, "%s is the main worktree of %s, not a folder for a task's worktree", e.Dir, r.top)
	case e.locked && !isDir(e.Dir):
		return Worktree{}, agentrunner.Errorf(agentrunner.ECONFLICT, "worktree %s of %s is missing but locked (%s): unlock it with git worktree unlock first", e.Dir, r.top, e.reason)
	case e.Branch != branch:
		return Worktree{}, agentrunner.Errorf(agentrunner.ECONFLICT, "%s is already a worktree of %s on %s, not on branch %s", e.Dir, r.top, describe(e), branch)
	}
	return e.Worktree, nil
}

// describe names what a worktree has checked out, for messages.
func describe(e entry) string {
	if e.Branch == "" {
		return "a detached HEAD"
	}
	return "branch " + e.Branch
}

// add makes branch if it is missing and adds the worktree at dir, after
// checking that the branch is not checked out elsewhere (git would refuse
// with a less clear message) and that dir is free.
func (g Git) add(ctx context.Context, r repository, entries []entry, dir, branch, base string) error {
	for _, e := range entries {
		if e.Branch == branch {
			return agentrunner.Errorf(agentrunner.ECONFLICT, "branch %s of %s is already checked out in %s, so it cannot also be checked out in %s", branch, r.top, e.Dir, dir)
		}
	}
	if err := g.checkFree(ctx, r, dir); err != nil {
		return err
	}
	if err := clearStaleLock(r, branch); err != nil {
		return err
	}
	if err := g.ensureBranch(ctx, r, branch, base); err != nil {
		return err
	}
	if _, err := g.run(ctx, r.top, "worktree", "add", "--", dir, branch); err != nil {
		return failed(err, "could not add worktree %s on branch %s to %s", dir, branch, r.top)
	}
	return nil
}

// added returns the worktree that add has just made at dir.
func (g Git) added(ctx context.Context, r repository, dir, branch string) (Worktree, error) {
	entries, err := g.list(ctx, r.top)
	if err != nil {
		return Worktree{}, err
	}
	e, ok := find(entries, dir)
	if !ok || e.Branch != branch {
		return Worktree{}, failed(nil, "git added worktree %s on branch %s to %s but does not list it", dir, branch, r.top)
	}
	return e.Worktree, nil
}

// checkFree accepts a dir that does not exist or is an empty folder, the
// two places `git worktree add` can use; anything else is someone's, and
// is refused untouched.
func (g Git) checkFree(ctx context.Context, r repository, dir string) error {
	info, err := os.Lstat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return failed(err, "could not look at worktree folder %s for %s", dir, r.top)
	}
	if !info.IsDir() {
		return agentrunner.Errorf(agentrunner.ECONFLICT, "%s exists and is not a folder, so it cannot become a worktree of %s", dir, r.top)
	}
	empty, err := isEmpty(dir)
	if err != nil || empty {
		return err
	}
	if other := g.otherRepo(ctx, r, dir); other != "" {
		return agentrunner.Errorf(agentrunner.ECONFLICT, "%s belongs to another repository (%s), so it cannot become a worktree of %s", dir, other, r.top)
	}
	return agentrunner.Errorf(agentrunner.ECONFLICT, "%s holds files and is not a worktree of %s: refusing to use it (nothing was deleted)", dir, r.top)
}

// isDir reports whether path is a folder.
func isDir(path string) bool {
	info, err := os.Stat(path)
	return err == nil && info.IsDir()
}

// isEmpty reports whether the folder dir has no entries.
func isEmpty(dir string) (bool, error) {
	f, err := os.Open(dir)
	if err != nil {
		return false, failed(err, "could not read worktree folder %s", dir)
	}
	defer f.Close()
	if _, err := f.Readdirnames(1); err == io.EOF {
		return true, nil
	} else if err != nil {
		return false, failed(err, "could not read worktree folder %s", dir)
	}
	return false, nil
}

// otherRepo returns the git folder of the repository that dir is itself a
// repository or worktree of, when that is not r; "" otherwise. Only a .git
// in dir counts: a folder inside r's own working tree is no other one.
func (g Git) otherRepo(ctx context.Context, r repository, dir string) string {
	if _, err := os.Lstat(filepath.Join(dir, ".git")); err != nil {
		return ""
	}
	common, err := g.commonDir(ctx, dir)
	if err != nil || samePath(common, r.common) {
		return ""
	}
	return common
}

// ensureBranch makes branch at base unless it exists. An existing branch
// is left where it is: it may hold the task's commits.
func (g Git) ensureBranch(ctx context.Context, r repository, branch, base string) error {
	_, err := g.run(ctx, r.top, "rev-parse", "--verify", "--quiet", "refs/heads/"+branch)
	if err == nil {
		return nil
	}
	if exitCode(err) != 1 {
		return failed(err, "could not look up branch %s in %s", branch, r.top)
	}
	commit, err := g.commit(ctx, r, branch, base)
	if err != nil {
		return err
	}
	if _, err := g.run(ctx, r.top, "branch", "--no-track", branch, commit); err != nil {
		return failed(err, "could not make branch %s at %s in %s", branch, base, r.top)
	}
	return nil
}

// commit resolves base to the commit the new branch starts at.
func (g Git) commit(ctx context.Context, r repository, branch, base string) (string, error) {
	if base == "" {
		return "", agentrunner.Errorf(agentrunner.EINVALID, "branch %s of %s needs a base branch or commit to start from", branch, r.top)
	}
	out, err := g.run(ctx, r.top, "rev-parse", "--verify", "--quiet", "--end-of-options", base+"^{commit}")
	if err != nil && exitCode(err) < 0 {
		return "", failed(err, "could not resolve base %q in %s", base, r.top)
	}
	if err != nil {
		return "", invalid(err, "base %q of branch %s is not a commit in %s", base, branch, r.top)
	}
	return strings.TrimSpace(out), nil
}

// prune makes git forget the worktrees whose folder is gone; locked
// ones it keeps.
func (g Git) prune(ctx context.Context, r repository) error {
	if _, err := g.run(ctx, r.top, "worktree", "prune"); err != nil {
		return failed(err, "could not prune the worktrees of %s", r.top)
	}
	return nil
}

// discard takes the worktree at dir away so that a kill at any point
// leaves a state the next call finishes: the folder is renamed aside in
// one step, git's record of it pruned, then the renamed folder deleted.
func (g Git) discard(ctx context.Context, r repository, dir string) error {
	if err := moveAside(dir); err != nil {
		return failed(err, "could not move worktree %s of %s aside to remove it", dir, r.top)
	}
	if err := g.prune(ctx, r); err != nil {
		return err
	}
	removeTrash(dir)
	return nil
}
