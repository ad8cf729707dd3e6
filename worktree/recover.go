package worktree

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
)

// This file clears what a kill leaves behind, in the files git documents
// for linked worktrees (gitrepository-layout): <common>/worktrees/<id>/
// holds `locked` (the reason a worktree is locked), `gitdir` (the path of
// the worktree's .git file), `commondir` and HEAD.

// initializing is the lock reason `git worktree add` writes (in the C
// locale, which run sets) before anything else and removes when the
// checkout is complete. A worktree still locked so is the leftover of an
// add that was killed.
const initializing = "initializing"

// clearInterrupted takes away every worktree that a killed
// `git worktree add` left, whatever its folder or branch. It works on the
// files, not through git: killed between two of its writes, add leaves an
// empty commondir that makes `git worktree list`, `unlock` and `add` fail
// for the whole repository. The prune that follows deletes the records.
func clearInterrupted(r repository) error {
	admins, err := os.ReadDir(filepath.Join(r.common, "worktrees"))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	for _, a := range admins {
		if err := clearAdmin(filepath.Join(r.common, "worktrees", a.Name())); err != nil {
			return err
		}
	}
	return nil
}

// clearAdmin clears one interrupted add, in an order that a kill at any
// point leaves recognisable or harmless: its folder is moved aside (when
// it is the add's), then the record's gitdir is deleted (a record without
// one is no worktree to git), then its lock, so prune deletes the rest.
func clearAdmin(admin string) error {
	lock, err := os.ReadFile(filepath.Join(admin, "locked"))
	if err != nil || strings.TrimSpace(string(lock)) != initializing {
		return nil
	}
	dir := worktreeOf(admin)
	if dir != "" && belongsTo(dir, admin) {
		if err := moveAside(dir); err != nil {
			return err
		}
	}
	if err := removeFile(filepath.Join(admin, "gitdir")); err != nil {
		return err
	}
	if err := removeFile(filepath.Join(admin, "locked")); err != nil {
		return err
	}
	if dir != "" {
		removeTrash(dir)
	}
	return nil
}

// worktreeOf returns the folder that the record admin is for, "" when the
// add was killed before it wrote that.
func worktreeOf(admin string) string {
	gitFile := readPath(filepath.Join(admin, "gitdir"), admin)
	if gitFile == "" {
		return ""
	}
	return filepath.Dir(gitFile)
}

// belongsTo reports whether the folder dir is the add's to move aside:
// its .git file points back to the record, or the add was killed before
// it got that far, so the folder is empty or holds only an empty .git
// file. Anything else is someone's and stays where it is.
func belongsTo(dir, admin string) bool {
	if target := readPath(filepath.Join(dir, ".git"), dir); target != "" {
		return samePath(resolve(target), resolve(admin))
	}
	entries, err := os.ReadDir(dir)
	if err != nil || len(entries) > 1 {
		return false
	}
	if len(entries) == 0 {
		return true
	}
	info, err := entries[0].Info()
	return err == nil && entries[0].Name() == ".git" && info.Mode().IsRegular() && info.Size() == 0
}

// readPath reads a path that git wrote into file (a gitdir file holds
// "path", a .git file "gitdir: path"), relative to base when it is
// relative (git 2.48's worktree.useRelativePaths); "" when there is none.
func readPath(file, base string) string {
	b, err := os.ReadFile(file)
	if err != nil {
		return ""
	}
	p := strings.TrimSpace(strings.TrimPrefix(string(b), "gitdir:"))
	if p == "" {
		return ""
	}
	p = filepath.FromSlash(p)
	if !filepath.IsAbs(p) {
		p = filepath.Join(base, p)
	}
	return filepath.Clean(p)
}

// removeFile deletes a file that may already be gone.
func removeFile(path string) error {
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	return nil
}

// trash is the folder that worktree folders are moved into to be deleted:
// beside dir, so the rename stays on one file system, under a name that
// is no branch's (git refuses a name component starting with a dot).
func trash(dir string) string {
	return filepath.Join(filepath.Dir(dir), ".removing-"+filepath.Base(dir))
}

// moveAside renames dir, if it exists, to a name of its own in trash(dir).
// The name is new each time because an earlier one may still be there: a
// git killed with the runner can leave a child (the checkout of an add)
// that goes on writing into its folder for a while, wherever it was moved.
func moveAside(dir string) error {
	if err := os.MkdirAll(trash(dir), 0o755); err != nil {
		return err
	}
	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return err
	}
	err := os.Rename(dir, filepath.Join(trash(dir), hex.EncodeToString(b[:])))
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	return err
}

// removeTrash deletes what was moved aside from dir, as far as it can:
// what is left (a killed git's child still writing into it) is deleted by
// a later call, and meanwhile harms nothing.
func removeTrash(dir string) {
	_ = os.RemoveAll(trash(dir))
}

// staleLock is how old a lock file of the task's branch must be to be a
// killed git's: a running git holds it for milliseconds.
const staleLock = 10 * time.Second

// clearStaleLock deletes refs/heads/<branch>.lock when a killed git left
// it (both `git branch` and the checkout of `git worktree add` write the
// branch under it), since git refuses the branch while it is there. A
// young one may be a running git's: then trying again later helps.
// Repositories that keep refs in reftable have no such file.
func clearStaleLock(r repository, branch string) error {
	lock := filepath.Join(r.common, "refs", "heads", filepath.FromSlash(branch)+".lock")
	info, err := os.Lstat(lock)
	if err != nil {
		return nil
	}
	if age := time.Since(info.ModTime()); age < staleLock {
		return agentrunner.Errorf(agentrunner.EUNAVAILABLE,
			"branch %s of %s is being written by another git (%s is %s old): try again in %s", branch, r.top, lock, age.Round(time.Millisecond), staleLock)
	}
	if err := removeFile(lock); err != nil {
		return failed(err, "could not delete %s, left by a killed git, for branch %s of %s", lock, branch, r.top)
	}
	return nil
}
