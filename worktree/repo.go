package worktree

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	"github.com/agentrunner/agentrunner"
)

// IsRepo returns the top-level folder of the working tree that contains
// path: ENOTFOUND when path does not exist, EINVALID when it is not inside
// a git working tree (a plain folder, a bare repository, a .git folder).
func (g Git) IsRepo(ctx context.Context, path string) (string, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return "", agentrunner.Errorf(agentrunner.ENOTFOUND, "repository folder %s does not exist", path)
	}
	out, err := g.run(ctx, path, "rev-parse", "--show-toplevel")
	if err != nil && exitCode(err) < 0 {
		return "", failed(err, "could not ask git whether %s is a repository", path)
	}
	top := strings.TrimSpace(out)
	if err != nil || top == "" {
		return "", invalid(err, "%s is not inside a git repository with a working tree", path)
	}
	return filepath.Clean(filepath.FromSlash(top)), nil
}

// CurrentBranch returns the short name of the branch checked out in repo
// (also one without commits yet). A detached HEAD has no branch: that is
// ENOTFOUND, so a caller that wants a base branch learns it must name one.
func (g Git) CurrentBranch(ctx context.Context, repo string) (string, error) {
	out, err := g.run(ctx, repo, "symbolic-ref", "--quiet", "--short", "HEAD")
	if exitCode(err) == 1 {
		return "", agentrunner.Errorf(agentrunner.ENOTFOUND, "repository %s has no branch checked out: its HEAD is detached", repo)
	}
	if exitCode(err) > 1 {
		return "", invalid(err, "could not read the branch checked out in %s", repo)
	}
	if err != nil {
		return "", failed(err, "could not read the branch checked out in %s", repo)
	}
	return strings.TrimSpace(out), nil
}

// repository is a repository as Ensure and Remove use it: where its main
// working tree is and the git folder that all its worktrees share, which
// is what tells two repositories apart.
type repository struct {
	top    string // the working tree that repo is in, resolved
	common string // its common git folder, resolved
}

// open checks git's version and finds repo's working tree and common
// git folder.
func (g Git) open(ctx context.Context, repo string) (repository, error) {
	if err := g.checkVersion(ctx); err != nil {
		return repository{}, err
	}
	top, err := g.IsRepo(ctx, repo)
	if err != nil {
		return repository{}, err
	}
	common, err := g.commonDir(ctx, top)
	if err != nil {
		return repository{}, failed(err, "could not find the git folder of %s", top)
	}
	return repository{top: resolve(top), common: common}, nil
}

// commonDir returns the resolved git folder shared by the worktrees of
// the repository that dir is in. git prints it relative to dir when it is
// below it.
func (g Git) commonDir(ctx context.Context, dir string) (string, error) {
	out, err := g.run(ctx, dir, "rev-parse", "--git-common-dir")
	if err != nil {
		return "", err
	}
	common := filepath.FromSlash(strings.TrimSpace(out))
	if !filepath.IsAbs(common) {
		common = filepath.Join(dir, common)
	}
	return resolve(common), nil
}

// resolve makes path absolute and follows its symlinks as far as it
// exists, so that paths git prints (real paths) and paths the caller
// gives (a temporary folder on macOS is behind /var -> /private/var)
// compare equal. The part that does not exist yet is kept as given.
func resolve(path string) string {
	abs, err := filepath.Abs(path)
	if err != nil {
		return filepath.Clean(path)
	}
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		return real
	}
	parent := filepath.Dir(abs)
	if parent == abs {
		return abs
	}
	return filepath.Join(resolve(parent), filepath.Base(abs))
}

// samePath compares two resolved paths; Windows' file names ignore case.
func samePath(a, b string) bool {
	if runtime.GOOS == "windows" {
		return strings.EqualFold(a, b)
	}
	return a == b
}
