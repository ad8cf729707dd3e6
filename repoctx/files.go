package repoctx

import (
	"context"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
)

// Files lists a repository's files, relative and slash-separated:
// in a git repository the files git knows and the new files it does not
// ignore, else every file found by a walk.
func Files(ctx context.Context, repo string) ([]string, error) {
	info, err := os.Stat(repo)
	if err != nil {
		return nil, fmt.Errorf("repository: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("repository %s is not a folder", repo)
	}
	if isGitRepo(ctx, repo) {
		out, err := exec.CommandContext(ctx, "git", "-C", repo, "ls-files", "-z", "--cached", "--others", "--exclude-standard").Output()
		if err == nil {
			var files []string
			for f := range strings.SplitSeq(strings.TrimRight(string(out), "\x00"), "\x00") {
				if f != "" {
					files = append(files, f)
				}
			}
			slices.Sort(files)
			return slices.Compact(files), nil
		}
	}
	var files []string
	err = filepath.WalkDir(repo, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() {
			if p != repo && skipDirs[d.Name()] {
				return filepath.SkipDir
			}
			return nil
		}
		rel, err := filepath.Rel(repo, p)
		if err != nil {
			return err
		}
		files = append(files, filepath.ToSlash(rel))
		return nil
	})
	return files, err
}

// isGitRepo says if dir is inside a git work tree.
func isGitRepo(ctx context.Context, dir string) bool {
	if _, err := exec.LookPath("git"); err != nil {
		return false
	}
	out, err := exec.CommandContext(ctx, "git", "-C", dir, "rev-parse", "--is-inside-work-tree").Output()
	return err == nil && strings.TrimSpace(string(out)) == "true"
}
