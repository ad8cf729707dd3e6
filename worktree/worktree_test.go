package worktree

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
)

// fixture is a repository made for one test: main has one commit, first,
// with the file a.txt.
type fixture struct {
	t     *testing.T
	g     Git
	repo  string
	first string
	root  string // an empty folder for the test's worktrees
}

// newRepo makes a repository in a temporary folder. git reads no user or
// system configuration: HOME points at an empty folder, and the author is
// named in the environment, since Ensure never commits but the test does.
func newRepo(t *testing.T) *fixture {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	home := t.TempDir()
	f := &fixture{t: t, g: Git{Env: []string{
		"HOME=" + home, "XDG_CONFIG_HOME=" + home, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=Test", "GIT_COMMITTER_EMAIL=test@example.com",
	}}}
	f.repo = filepath.Join(t.TempDir(), "repo")
	f.root = t.TempDir()
	f.git("", "init", "--quiet", "-b", "main", f.repo)
	f.first = f.commit(f.repo, "a.txt", "a\n")
	return f
}

// git runs git in dir and fails the test if git fails.
func (f *fixture) git(dir string, args ...string) string {
	f.t.Helper()
	out, err := f.g.run(f.t.Context(), dir, args...)
	if err != nil {
		f.t.Fatal(err)
	}
	return strings.TrimSpace(out)
}

// commit writes name in the worktree dir, commits it and returns the commit.
func (f *fixture) commit(dir, name, content string) string {
	f.t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o644); err != nil {
		f.t.Fatal(err)
	}
	f.git(dir, "add", name)
	f.git(dir, "commit", "--quiet", "-m", "add "+name)
	return f.git(dir, "rev-parse", "HEAD")
}

// dir is a folder for a worktree under the test's root.
func (f *fixture) dir(name string) string { return filepath.Join(f.root, name) }

// ensure calls Ensure and fails the test on an error.
func (f *fixture) ensure(dir, branch, base string) (Worktree, bool) {
	f.t.Helper()
	wt, created, err := f.g.Ensure(f.t.Context(), f.repo, dir, branch, base)
	if err != nil {
		f.t.Fatal(err)
	}
	return wt, created
}

// worktrees returns the worktrees git lists for the repository.
func (f *fixture) worktrees() []entry {
	f.t.Helper()
	entries, err := f.g.list(f.t.Context(), f.repo)
	if err != nil {
		f.t.Fatal(err)
	}
	return entries
}

// wantOne checks that git lists the main worktree and wt, nothing else.
func (f *fixture) wantOne(wt Worktree) {
	f.t.Helper()
	entries := f.worktrees()
	if len(entries) != 2 {
		f.t.Fatalf("git lists %d worktrees, want the main one and %s: %+v", len(entries), wt.Dir, entries)
	}
	if diff := cmp.Diff(wt, entries[1].Worktree); diff != "" {
		f.t.Errorf("listed worktree (-returned +listed):\n%s", diff)
	}
	if entries[1].locked {
		f.t.Errorf("worktree %s is still locked (%s)", wt.Dir, entries[1].reason)
	}
}

// wantFile checks a file's content.
func wantFile(t *testing.T, path, want string) {
	t.Helper()
	got, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Errorf("%s holds %q, want %q", path, got, want)
	}
}

// wantError checks an error's code and that its message names each of
// names.
func wantError(t *testing.T, err error, code string, names ...string) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want %s", code)
	}
	if got := agentrunner.ErrorCode(err); got != code {
		t.Errorf("code %s, want %s: %v", got, code, err)
	}
	for _, n := range names {
		if !strings.Contains(err.Error(), n) {
			t.Errorf("error %q does not name %q", err, n)
		}
	}
}

func TestEnsureCreates(t *testing.T) {
	t.Parallel()
	f := newRepo(t)
	dir := f.dir("task-1")
	wt, created := f.ensure(dir, "task-1", "main")
	want := Worktree{Dir: resolve(dir), Branch: "task-1", Head: f.first}
	if diff := cmp.Diff(want, wt); diff != "" || !created {
		t.Errorf("Ensure = %+v, created %v; want created (-want +got):\n%s", wt, created, diff)
	}
	wantFile(t, filepath.Join(dir, "a.txt"), "a\n")
	if got, err := f.g.CurrentBranch(t.Context(), dir); err != nil || got != "task-1" {
		t.Errorf("CurrentBranch(worktree) = %q, %v; want task-1", got, err)
	}
	f.wantOne(wt)
}

func TestEnsureAgainReturnsTheSameWorktree(t *testing.T) {
	t.Parallel()
	f := newRepo(t)
	dir := f.dir("task")
	first, _ := f.ensure(dir, "task", "main")
	again, created := f.ensure(dir, "task", "main")
	if created {
		t.Error("second Ensure says it created the worktree")
	}
	if diff := cmp.Diff(first, again); diff != "" {
		t.Errorf("second Ensure (-first +second):\n%s", diff)
	}
	f.wantOne(again)
}

// A lock keeps git from pruning a worktree, not anyone from using it.
func TestEnsureUsesLockedWorktree(t *testing.T) {
	t.Parallel()
	f := newRepo(t)
	dir := f.dir("task")
	first, _ := f.ensure(dir, "task", "main")
	f.git(f.repo, "worktree", "lock", "--reason", "kept for review", dir)
	again, created := f.ensure(dir, "task", "main")
	if created || again != first {
		t.Errorf("Ensure of a locked worktree = %+v, created %v; want %+v", again, created, first)
	}
}

func TestEnsureInEmptyFolder(t *testing.T) {
	t.Parallel()
	f := newRepo(t)
	dir := f.dir("task")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	wt, created := f.ensure(dir, "task", f.first)
	if !created || wt.Head != f.first {
		t.Errorf("Ensure in an empty folder = %+v, created %v", wt, created)
	}
	f.wantOne(wt)
}

func TestCommitsSurviveRemoveAndEnsure(t *testing.T) {
	t.Parallel()
	f := newRepo(t)
	dir := f.dir("task")
	f.ensure(dir, "task", "main")
	made := f.commit(dir, "b.txt", "b\n")
	if err := f.g.Remove(t.Context(), f.repo, dir); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("Remove left %s: %v", dir, err)
	}
	if got := f.git(f.repo, "rev-parse", "refs/heads/task"); got != made {
		t.Fatalf("after Remove branch task is at %s, want the commit made in the worktree %s", got, made)
	}
	wt, created := f.ensure(dir, "task", "main")
	if !created || wt.Head != made {
		t.Errorf("Ensure after Remove = %+v, created %v; want created at %s", wt, created, made)
	}
	wantFile(t, filepath.Join(dir, "b.txt"), "b\n")
	f.wantOne(wt)
}

// A kill after `git branch` and before `git worktree add` leaves the
// branch without a worktree; base has moved on since, and the branch must
// not follow it.
func TestEnsureKeepsExistingBranch(t *testing.T) {
	t.Parallel()
	f := newRepo(t)
	f.git(f.repo, "branch", "task", f.first)
	second := f.commit(f.repo, "c.txt", "c\n")
	wt, created := f.ensure(f.dir("task"), "task", "main")
	if !created || wt.Head != f.first {
		t.Errorf("Ensure on an existing branch = %+v, created %v; want it at %s, not base's %s", wt, created, f.first, second)
	}
	f.wantOne(wt)
}

func TestEnsureRepairsDeletedFolder(t *testing.T) {
	t.Parallel()
	f := newRepo(t)
	dir := f.dir("task")
	f.ensure(dir, "task", "main")
	made := f.commit(dir, "b.txt", "b\n")
	if err := os.RemoveAll(dir); err != nil {
		t.Fatal(err)
	}
	wt, created := f.ensure(dir, "task", "main")
	if !created || wt.Head != made {
		t.Errorf("Ensure after the folder was deleted = %+v, created %v; want created at %s", wt, created, made)
	}
	wantFile(t, filepath.Join(dir, "b.txt"), "b\n")
	f.wantOne(wt)
}

// The states a kill during `git worktree add` can leave, made from a
// complete worktree: it stays locked as "initializing" while git writes
// its record (gitdir, the folder's .git file, commondir, HEAD) and then
// checks the files out. A write cut short leaves an empty file; an empty
// commondir makes `git worktree list` fail for the whole repository.
var interruptedAdds = []struct {
	name string
	// kill turns the worktree at dir, whose record is admin, into what a
	// kill leaves.
	kill func(f *fixture, dir, admin string)
}{
	{"during the checkout", func(f *fixture, dir, admin string) {
		mustRemove(f.t, filepath.Join(dir, "a.txt"))
	}},
	{"before HEAD", func(f *fixture, dir, admin string) {
		mustWrite(f.t, filepath.Join(admin, "HEAD"), "")
		emptyFolder(f.t, dir, true)
	}},
	{"while writing commondir", func(f *fixture, dir, admin string) {
		mustWrite(f.t, filepath.Join(admin, "commondir"), "")
		emptyFolder(f.t, dir, true)
	}},
	{"while writing the .git file", func(f *fixture, dir, admin string) {
		mustRemove(f.t, filepath.Join(admin, "commondir"))
		emptyFolder(f.t, dir, false)
		mustWrite(f.t, filepath.Join(dir, ".git"), "")
	}},
	{"before the .git file", func(f *fixture, dir, admin string) {
		mustRemove(f.t, filepath.Join(admin, "commondir"))
		emptyFolder(f.t, dir, false)
	}},
	{"while writing gitdir", func(f *fixture, dir, admin string) {
		mustWrite(f.t, filepath.Join(admin, "gitdir"), "")
		emptyFolder(f.t, dir, false)
	}},
	{"and the folder was deleted", func(f *fixture, dir, admin string) {
		mustRemove(f.t, dir)
	}},
}

// interrupt makes a worktree at dir on branch and turns it into what a kill
// during its add leaves.
func (f *fixture) interrupt(dir, branch string, kill func(f *fixture, dir, admin string)) {
	f.t.Helper()
	f.ensure(dir, branch, "main")
	admin := readPath(filepath.Join(dir, ".git"), dir)
	f.git(f.repo, "worktree", "lock", "--reason", initializing, dir)
	kill(f, dir, admin)
}

func TestEnsureAfterInterruptedAdd(t *testing.T) {
	t.Parallel()
	for _, tt := range interruptedAdds {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newRepo(t)
			dir := f.dir("task")
			f.interrupt(dir, "task", tt.kill)
			wt, created := f.ensure(dir, "task", "main")
			if !created || wt.Head != f.first {
				t.Errorf("Ensure = %+v, created %v; want it added again at %s", wt, created, f.first)
			}
			wantFile(t, filepath.Join(dir, "a.txt"), "a\n")
			f.wantOne(wt)
		})
	}
}

// An interrupted add of another task must not stop this one, nor stay.
func TestEnsureClearsOtherInterruptedAdds(t *testing.T) {
	t.Parallel()
	for _, tt := range interruptedAdds {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newRepo(t)
			other := f.dir("other")
			f.interrupt(other, "other", tt.kill)
			wt, _ := f.ensure(f.dir("task"), "task", "main")
			f.wantOne(wt)
			wantNoFiles(t, other)
			if _, err := os.Stat(trash(other)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the folder of the interrupted add was moved to %s and not deleted: %v", trash(other), err)
			}
		})
	}
}

func TestRemoveAfterInterruptedAdd(t *testing.T) {
	t.Parallel()
	for _, tt := range interruptedAdds {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newRepo(t)
			dir := f.dir("task")
			f.interrupt(dir, "task", tt.kill)
			if err := f.g.Remove(t.Context(), f.repo, dir); err != nil {
				t.Fatal(err)
			}
			if n := len(f.worktrees()); n != 1 {
				t.Errorf("git lists %d worktrees after Remove, want 1", n)
			}
			wantNoFiles(t, dir)
		})
	}
}

// wantNoFiles checks that the folder of an interrupted add is gone, or
// empty when the add was killed before it recorded the folder (nothing
// then tells it from any other empty folder).
func wantNoFiles(t *testing.T, dir string) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil && !errors.Is(err, os.ErrNotExist) || len(entries) > 0 {
		t.Errorf("the folder of the interrupted add %s is still there: %v, %d entries", dir, err, len(entries))
	}
}

// A folder of an interrupted add that someone has put files in since is
// not deleted: only git's record of it goes.
func TestInterruptedAddKeepsForeignFiles(t *testing.T) {
	t.Parallel()
	f := newRepo(t)
	dir := f.dir("task")
	f.interrupt(dir, "task", func(f *fixture, dir, admin string) {
		mustRemove(f.t, filepath.Join(dir, ".git"))
		mustWrite(f.t, filepath.Join(dir, "notes.txt"), "mine")
	})
	wt, _ := f.ensure(f.dir("other"), "other", "main")
	f.wantOne(wt)
	wantFile(t, filepath.Join(dir, "notes.txt"), "mine")
	_, _, err := f.g.Ensure(t.Context(), f.repo, dir, "task", "main")
	wantError(t, err, agentrunner.ECONFLICT, resolve(dir), "holds files")
}

// mustRemove deletes a file or a folder.
func mustRemove(t *testing.T, path string) {
	t.Helper()
	if err := os.RemoveAll(path); err != nil {
		t.Fatal(err)
	}
}

// emptyFolder deletes what dir holds, its .git file too unless keepGit.
func emptyFolder(t *testing.T, dir string, keepGit bool) {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if !keepGit || e.Name() != ".git" {
			mustRemove(t, filepath.Join(dir, e.Name()))
		}
	}
}

// A branch lock file left by a killed git is deleted once it is old; a
// young one may be a running git's and makes Ensure ask to try again.
func TestEnsureBranchLock(t *testing.T) {
	t.Parallel()
	for _, existing := range []bool{false, true} {
		t.Run(fmt.Sprintf("branch exists %v", existing), func(t *testing.T) {
			t.Parallel()
			f := newRepo(t)
			if existing {
				f.git(f.repo, "branch", "task", "main")
			}
			lock := filepath.Join(f.repo, ".git", "refs", "heads", "task.lock")
			mustWrite(t, lock, "")
			_, _, err := f.g.Ensure(t.Context(), f.repo, f.dir("task"), "task", "main")
			wantError(t, err, agentrunner.EUNAVAILABLE, "branch task", lock)
			old := time.Now().Add(-time.Hour)
			if err := os.Chtimes(lock, old, old); err != nil {
				t.Fatal(err)
			}
			wt, _ := f.ensure(f.dir("task"), "task", "main")
			f.wantOne(wt)
			if _, err := os.Stat(lock); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the stale lock %s is still there: %v", lock, err)
			}
		})
	}
}

// A kill during Remove, after the folder was renamed aside (next to what
// an earlier kill left there): both Ensure and Remove finish the job.
func TestKilledRemove(t *testing.T) {
	t.Parallel()
	for _, then := range []string{"ensure", "remove"} {
		t.Run(then, func(t *testing.T) {
			t.Parallel()
			f := newRepo(t)
			dir := f.dir("task")
			f.ensure(dir, "task", "main")
			made := f.commit(dir, "b.txt", "b\n")
			mustWrite(t, filepath.Join(trash(dir), "earlier", "x.txt"), "left by an earlier kill")
			if err := moveAside(dir); err != nil {
				t.Fatal(err)
			}
			if then == "ensure" {
				wt, created := f.ensure(dir, "task", "main")
				if !created || wt.Head != made {
					t.Errorf("Ensure = %+v, created %v; want created at %s", wt, created, made)
				}
				f.wantOne(wt)
			} else {
				if err := f.g.Remove(t.Context(), f.repo, dir); err != nil {
					t.Fatal(err)
				}
				if n := len(f.worktrees()); n != 1 {
					t.Errorf("git lists %d worktrees after Remove, want 1", n)
				}
			}
			if _, err := os.Stat(trash(dir)); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the renamed folder %s is still there: %v", trash(dir), err)
			}
		})
	}
}

func TestEnsureRefuses(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name string
		// setup prepares the repository and returns the folder and branch
		// to ensure, and what the error must name.
		setup func(f *fixture) (dir, branch string, names []string)
		code  string
	}{
		{"folder with other files", func(f *fixture) (string, string, []string) {
			dir := f.dir("task")
			mustWrite(f.t, filepath.Join(dir, "notes.txt"), "mine")
			return dir, "task", []string{resolve(dir), "holds files"}
		}, agentrunner.ECONFLICT},
		{"a file", func(f *fixture) (string, string, []string) {
			dir := f.dir("task")
			mustWrite(f.t, dir, "mine")
			return dir, "task", []string{resolve(dir), "not a folder"}
		}, agentrunner.ECONFLICT},
		{"worktree on another branch", func(f *fixture) (string, string, []string) {
			dir := f.dir("task")
			f.ensure(dir, "other", "main")
			return dir, "task", []string{resolve(dir), "branch other", "branch task"}
		}, agentrunner.ECONFLICT},
		{"worktree of another repository", func(f *fixture) (string, string, []string) {
			dir := f.dir("task")
			other := newRepo(f.t)
			if _, _, err := other.g.Ensure(f.t.Context(), other.repo, dir, "task", "main"); err != nil {
				f.t.Fatal(err)
			}
			return dir, "task", []string{resolve(dir), "another repository"}
		}, agentrunner.ECONFLICT},
		{"branch checked out elsewhere", func(f *fixture) (string, string, []string) {
			elsewhere := f.dir("first")
			f.ensure(elsewhere, "task", "main")
			return f.dir("second"), "task", []string{resolve(elsewhere), "already checked out"}
		}, agentrunner.ECONFLICT},
		{"branch of the main worktree", func(f *fixture) (string, string, []string) {
			return f.dir("task"), "main", []string{"branch main", resolve(f.repo)}
		}, agentrunner.ECONFLICT},
		{"locked worktree whose folder is gone", func(f *fixture) (string, string, []string) {
			dir := f.dir("task")
			f.ensure(dir, "task", "main")
			f.git(f.repo, "worktree", "lock", "--reason", "on a removable disk", dir)
			mustRemove(f.t, dir)
			return dir, "task", []string{resolve(dir), "on a removable disk"}
		}, agentrunner.ECONFLICT},
		{"main worktree", func(f *fixture) (string, string, []string) {
			return f.repo, "main", []string{"main worktree"}
		}, agentrunner.EINVALID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			f := newRepo(t)
			dir, branch, names := tt.setup(f)
			before := snapshot(t, dir)
			_, _, err := f.g.Ensure(t.Context(), f.repo, dir, branch, "main")
			wantError(t, err, tt.code, names...)
			if diff := cmp.Diff(before, snapshot(t, dir)); diff != "" {
				t.Errorf("the refused folder changed (-before +after):\n%s", diff)
			}
		})
	}
}

// snapshot returns the files under dir (not .git's) and their content.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	files := map[string]string{}
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if errors.Is(err, os.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		if d.Name() == ".git" && d.IsDir() {
			return filepath.SkipDir
		}
		if d.IsDir() || d.Name() == ".git" {
			return nil
		}
		b, err := os.ReadFile(path)
		files[path] = string(b)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// mustWrite writes a file, making its folder.
func mustWrite(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
		t.Fatal(err)
	}
}

func TestEnsureInvalidInput(t *testing.T) {
	t.Parallel()
	f := newRepo(t)
	missing := filepath.Join(t.TempDir(), "missing")
	tests := []struct {
		name                    string
		repo, dir, branch, base string
		code                    string
		names                   []string
	}{
		{"dots in branch", f.repo, f.dir("a"), "a..b", "main", agentrunner.EINVALID, []string{`"a..b"`}},
		{"space in branch", f.repo, f.dir("a"), "a b", "main", agentrunner.EINVALID, []string{`"a b"`}},
		{"branch like an option", f.repo, f.dir("a"), "-f", "main", agentrunner.EINVALID, []string{`"-f"`}},
		{"branch @", f.repo, f.dir("a"), "@", "main", agentrunner.EINVALID, []string{`"@"`}},
		{"empty branch", f.repo, f.dir("a"), "", "main", agentrunner.EINVALID, []string{`""`}},
		{"missing base", f.repo, f.dir("a"), "task", "nope", agentrunner.EINVALID, []string{`"nope"`, "task"}},
		{"base like an option", f.repo, f.dir("a"), "task", "--all", agentrunner.EINVALID, []string{`"--all"`}},
		{"empty base", f.repo, f.dir("a"), "task", "", agentrunner.EINVALID, []string{"task", "base"}},
		{"relative folder", f.repo, "worktrees/a", "task", "main", agentrunner.EINVALID, []string{"worktrees/a"}},
		{"not a repository", t.TempDir(), f.dir("a"), "task", "main", agentrunner.EINVALID, []string{"not inside a git repository"}},
		{"missing repository", missing, f.dir("a"), "task", "main", agentrunner.ENOTFOUND, []string{missing}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, _, err := f.g.Ensure(t.Context(), tt.repo, tt.dir, tt.branch, tt.base)
			wantError(t, err, tt.code, tt.names...)
		})
	}
	if n := len(f.worktrees()); n != 1 {
		t.Errorf("git lists %d worktrees after refused calls, want 1", n)
	}
	if _, err := f.g.run(t.Context(), f.repo, "rev-parse", "--verify", "--quiet", "refs/heads/task"); err == nil {
		t.Error("a refused Ensure made branch task")
	}
}

// The folder given through a symlink (as macOS's temporary folders are)
// is the same worktree as git's real path.
func TestEnsureThroughSymlink(t *testing.T) {
	t.Parallel()
	if runtime.GOOS == "windows" {
		t.Skip("symlinks need privileges on Windows")
	}
	f := newRepo(t)
	link := filepath.Join(t.TempDir(), "link")
	if err := os.Symlink(f.root, link); err != nil {
		t.Fatal(err)
	}
	first, _ := f.ensure(filepath.Join(link, "task"), "task", "main")
	again, created := f.ensure(f.dir("task"), "task", "main")
	if created || first != again || first.Dir != resolve(f.dir("task")) {
		t.Errorf("Ensure through a symlink = %+v, then %+v (created %v)", first, again, created)
	}
	if err := f.g.Remove(t.Context(), f.repo, filepath.Join(link, "task")); err != nil {
		t.Fatal(err)
	}
	if n := len(f.worktrees()); n != 1 {
		t.Errorf("git lists %d worktrees after Remove through a symlink, want 1", n)
	}
}

func TestEnsureStopsWithContext(t *testing.T) {
	t.Parallel()
	f := newRepo(t)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	_, _, err := f.g.Ensure(ctx, f.repo, f.dir("task"), "task", "main")
	if !errors.Is(err, context.Canceled) {
		t.Errorf("Ensure with an ended context = %v, want context.Canceled", err)
	}
	wantError(t, err, agentrunner.EUNAVAILABLE)
}

// A runner started from a git hook inherits GIT_DIR, which must not make
// git act on that other repository.
func TestIgnoresInheritedRepository(t *testing.T) {
	f := newRepo(t)
	other := newRepo(t)
	t.Setenv("GIT_DIR", filepath.Join(other.repo, ".git"))
	wt, _ := f.ensure(f.dir("task"), "task", "main")
	if wt.Head != f.first {
		t.Errorf("Ensure = %+v, want it at %s of its own repository", wt, f.first)
	}
	if n := len(other.worktrees()); n != 1 {
		t.Errorf("the inherited repository has %d worktrees, want 1", n)
	}
}

func TestRemove(t *testing.T) {
	t.Parallel()
	f := newRepo(t)
	dir := f.dir("task")
	if err := f.g.Remove(t.Context(), f.repo, dir); err != nil {
		t.Errorf("Remove of a worktree never made = %v, want nil", err)
	}
	f.ensure(dir, "task", "main")
	mustWrite(t, filepath.Join(dir, "untracked.txt"), "x")
	for range 2 {
		if err := f.g.Remove(t.Context(), f.repo, dir); err != nil {
			t.Fatal(err)
		}
	}
	if n := len(f.worktrees()); n != 1 {
		t.Errorf("git lists %d worktrees after Remove, want 1", n)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("Remove left %s: %v", dir, err)
	}
	f.git(f.repo, "rev-parse", "--verify", "refs/heads/task")
}

func TestRemoveRefuses(t *testing.T) {
	t.Parallel()
	f := newRepo(t)
	dir := f.dir("task")
	f.ensure(dir, "task", "main")
	f.git(f.repo, "worktree", "lock", "--reason", "kept for review", dir)
	err := f.g.Remove(t.Context(), f.repo, dir)
	wantError(t, err, agentrunner.ECONFLICT, resolve(dir), "kept for review")
	wantFile(t, filepath.Join(dir, "a.txt"), "a\n")
	err = f.g.Remove(t.Context(), f.repo, f.repo)
	wantError(t, err, agentrunner.EINVALID, "main worktree")
}

func TestList(t *testing.T) {
	t.Parallel()
	f := newRepo(t)
	wt, _ := f.ensure(f.dir("task"), "task", "main")
	got, err := f.g.List(t.Context(), f.repo)
	if err != nil {
		t.Fatal(err)
	}
	want := []Worktree{{Dir: resolve(f.repo), Branch: "main", Head: f.first}, wt}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("List (-want +got):\n%s", diff)
	}
}

func TestParseList(t *testing.T) {
	t.Parallel()
	sha := strings.Repeat("a", 40)
	out := "worktree /r\nHEAD " + sha + "\nbranch refs/heads/main\n\n" +
		"worktree /w/one\nHEAD " + sha + "\ndetached\nlocked\n\n" +
		"worktree /w/two\nHEAD " + sha + "\nbranch refs/heads/feat/x\nlocked \"why\\nnot\"\nprunable gitdir file points to non-existent location\n\n" +
		"worktree \"/w/th\\\"ree\"\nHEAD " + sha + "\nbranch refs/heads/t\nlocked initializing\r\n\r\n"
	want := []entry{
		{Worktree: Worktree{Dir: filepath.FromSlash("/r"), Branch: "main", Head: sha}, main: true},
		{Worktree: Worktree{Dir: filepath.FromSlash("/w/one"), Head: sha}, locked: true},
		{Worktree: Worktree{Dir: filepath.FromSlash("/w/two"), Branch: "feat/x", Head: sha}, locked: true, reason: "why\nnot"},
		{Worktree: Worktree{Dir: filepath.FromSlash(`/w/th"ree`), Branch: "t", Head: sha}, locked: true, reason: initializing},
	}
	got := parseList(out)
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(entry{})); diff != "" {
		t.Errorf("parseList (-want +got):\n%s", diff)
	}
	bare := parseList("worktree /srv/r.git\nbare\n\nworktree /w/new\nHEAD " + strings.Repeat("0", 40) + "\nbranch refs/heads/new\n\n")
	if len(bare) != 2 || !bare[0].bare || !bare[0].main || bare[1].Head != "" || bare[1].Branch != "new" {
		t.Errorf("parseList of a bare repository and a branch without commits = %+v", bare)
	}
}

func TestCurrentBranch(t *testing.T) {
	t.Parallel()
	f := newRepo(t)
	if got, err := f.g.CurrentBranch(t.Context(), f.repo); err != nil || got != "main" {
		t.Errorf("CurrentBranch = %q, %v; want main", got, err)
	}
	f.git(f.repo, "checkout", "--quiet", "--detach")
	got, err := f.g.CurrentBranch(t.Context(), f.repo)
	wantError(t, err, agentrunner.ENOTFOUND, f.repo, "detached")
	if got != "" {
		t.Errorf("CurrentBranch of a detached HEAD = %q, want \"\"", got)
	}
	_, err = f.g.CurrentBranch(t.Context(), t.TempDir())
	wantError(t, err, agentrunner.EINVALID)
}

func TestIsRepo(t *testing.T) {
	t.Parallel()
	f := newRepo(t)
	sub := filepath.Join(f.repo, "sub", "dir")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	if top, err := f.g.IsRepo(t.Context(), sub); err != nil || top != resolve(f.repo) {
		t.Errorf("IsRepo(%s) = %q, %v; want %s", sub, top, err, resolve(f.repo))
	}
	plain := t.TempDir()
	_, err := f.g.IsRepo(t.Context(), plain)
	wantError(t, err, agentrunner.EINVALID, plain)
	_, err = f.g.IsRepo(t.Context(), filepath.Join(f.repo, ".git"))
	wantError(t, err, agentrunner.EINVALID)
	missing := filepath.Join(plain, "missing")
	_, err = f.g.IsRepo(t.Context(), missing)
	wantError(t, err, agentrunner.ENOTFOUND, missing)
}

func TestBranchName(t *testing.T) {
	t.Parallel()
	tests := []struct {
		parts []string
		want  string
	}{
		{[]string{"ITEM-12", "3", "Add the Login page!"}, "item-12-3-add-the-login-page"},
		{[]string{"agentrunner/", "item 7", "Fix bug"}, "agentrunner/item-7-fix-bug"},
		{[]string{"Café crème", "naïve"}, "cafe-creme-naive"},
		{[]string{"snake_case", "  spaces  ", "--dashes--"}, "snake-case-spaces-dashes"},
		{[]string{"v1.2..3", "...dots..."}, "v1.2.3-dots"},
		{[]string{"a/.hidden/b"}, "a/hidden/b"},
		{[]string{"//a//b//"}, "a/b"},
		{[]string{"db.lock"}, "db-lock"},
		{[]string{"x.lock/y"}, "x-lock/y"},
		{[]string{"HEAD"}, "head"},
		{[]string{"@{-1}", "~^:?*[\\"}, "1"},
		{[]string{"日本語"}, ""},
		{nil, ""},
	}
	for _, tt := range tests {
		got := BranchName(tt.parts...)
		if got != tt.want {
			t.Errorf("BranchName(%q) = %q, want %q", tt.parts, got, tt.want)
		}
		if len(got) > MaxBranchLen {
			t.Errorf("BranchName(%q) is %d bytes long, more than %d", tt.parts, len(got), MaxBranchLen)
		}
	}
}

// A long name is cut at MaxBranchLen and ends in a hash of the whole
// name, so names that differ only past the cut stay different.
func TestBranchNameCutsLongNames(t *testing.T) {
	t.Parallel()
	long := strings.Repeat("word ", 30)
	one, two := BranchName("7", long, "one"), BranchName("7", long, "two")
	if one == two {
		t.Errorf("BranchName gives %q for two names that differ at the end", one)
	}
	sum := sha256.Sum256([]byte("7-" + strings.TrimSuffix(strings.Repeat("word-", 30), "-") + "-one"))
	want := "7-" + strings.TrimSuffix(strings.Repeat("word-", 10), "-") + "-wor-" + hex.EncodeToString(sum[:4])
	if one != want || len(one) > MaxBranchLen {
		t.Errorf("BranchName of a long text = %q (%d bytes), want %q", one, len(one), want)
	}
}

// Every name BranchName makes is one git takes.
func TestBranchNameIsValid(t *testing.T) {
	t.Parallel()
	f := newRepo(t)
	inputs := [][]string{
		{"ITEM-12", "3", "Add the Login page!"}, {"a/.b/..c/d.lock"}, {"x.lock", "y"},
		{strings.Repeat("ab.", 40)}, {strings.Repeat("a/", 40)}, {"-leading", "trailing-"},
		{"with @{braces}", "and\\backslash"}, {"ÉCOLE", "façade", "Ωmega"},
	}
	for _, parts := range inputs {
		name := BranchName(parts...)
		if _, err := f.g.run(t.Context(), f.repo, "check-ref-format", "--branch", name); err != nil {
			t.Errorf("BranchName(%q) = %q, which git refuses: %v", parts, name, err)
		}
	}
}

func TestParseVersion(t *testing.T) {
	t.Parallel()
	tests := []struct {
		out          string
		major, minor int
		ok           bool
	}{
		{"git version 2.39.5\n", 2, 39, true},
		{"git version 2.45.1.windows.1\n", 2, 45, true},
		{"git version 2.39.3 (Apple Git-146)\n", 2, 39, true},
		{"git version 3.0\n", 3, 0, true},
		{"hub version 2.14.2\n", 0, 0, false},
		{"git version x.y\n", 0, 0, false},
		{"", 0, 0, false},
	}
	for _, tt := range tests {
		major, minor, ok := parseVersion(tt.out)
		if major != tt.major || minor != tt.minor || ok != tt.ok {
			t.Errorf("parseVersion(%q) = %d, %d, %v; want %d, %d, %v", tt.out, major, minor, ok, tt.major, tt.minor, tt.ok)
		}
	}
}
