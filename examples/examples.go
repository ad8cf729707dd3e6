// Package examples writes the example workspaces that `agentrunner init`
// and `agentrunner demo` set up; each lives in its own package beside this
// one, embedded in the binary.
package examples

import (
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// ExistsError lists the files Write would have overwritten.
type ExistsError struct {
	Dir   string
	Files []string
}

func (e *ExistsError) Error() string {
	return fmt.Sprintf("%s already has %s; use --force to overwrite", e.Dir, strings.Join(e.Files, ", "))
}

// Write writes the files of a workspace into dir and returns their paths.
// edit, if set, may change a file's content on the way. Without overwrite
// it writes nothing if any file exists, and returns an *ExistsError naming
// them. Shell scripts are written executable.
func Write(dir string, files fs.FS, overwrite bool, edit func(path string, data []byte) ([]byte, error)) ([]string, error) {
	var paths []string
	err := fs.WalkDir(files, ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			paths = append(paths, path)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if err := refuseExisting(dir, paths, overwrite); err != nil {
		return nil, err
	}
	for _, p := range paths {
		if err := writeOne(dir, files, p, edit); err != nil {
			return nil, err
		}
	}
	return paths, nil
}

func refuseExisting(dir string, paths []string, overwrite bool) error {
	if overwrite {
		return nil
	}
	var existing []string
	for _, p := range paths {
		if _, err := os.Stat(filepath.Join(dir, filepath.FromSlash(p))); err == nil {
			existing = append(existing, p)
		}
	}
	if len(existing) > 0 {
		return &ExistsError{Dir: dir, Files: existing}
	}
	return nil
}

func writeOne(dir string, files fs.FS, p string, edit func(string, []byte) ([]byte, error)) error {
	data, err := fs.ReadFile(files, p)
	if err != nil {
		return err
	}
	if edit != nil {
		if data, err = edit(p, data); err != nil {
			return err
		}
	}
	dst := filepath.Join(dir, filepath.FromSlash(p))
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if strings.HasSuffix(p, ".sh") {
		mode = 0o755
	}
	if err := os.WriteFile(dst, data, mode); err != nil {
		return fmt.Errorf("write %s: %w", dst, err)
	}
	return nil
}

// SetProvider sets the provider of an example's agentrunner.yaml: it
// replaces the line that starts with line (its defaults' "  provider:
// NAME ") with the same line naming provider, and fails if there is none.
func SetProvider(data []byte, line, provider string) ([]byte, error) {
	if !strings.Contains(string(data), line) {
		return nil, fmt.Errorf("the example's agentrunner.yaml has no %q line to set the provider", strings.TrimSpace(line))
	}
	return []byte(strings.Replace(string(data), line, "  provider: "+provider+" ", 1)), nil
}
