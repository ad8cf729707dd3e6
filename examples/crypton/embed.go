// Package crypton embeds the example workspace of the Crypton learning loop,
// which `agentrunner init` and `agentrunner demo` write out.
package crypton

import (
	"embed"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Files is the workspace: agentrunner.yaml, tools.md, agent_prompts/ and
// output_templates/.
//
//go:embed agentrunner.yaml tools.md agent_prompts output_templates
var Files embed.FS

// ExistsError lists the files Write would have overwritten.
type ExistsError struct {
	Dir   string
	Files []string
}

func (e *ExistsError) Error() string {
	return fmt.Sprintf("%s already has %s; use --force to overwrite", e.Dir, strings.Join(e.Files, ", "))
}

// Providers maps the provider kinds `init --provider` offers to the
// example's provider of that kind.
var Providers = map[string]string{"mock": "mock", "openai": "openai", "anthropic": "anthropic", "process": "claude-code"}

// defaultProvider is the line of agentrunner.yaml that sets every agent's
// provider.
const defaultProvider = "  provider: mock "

// Write writes the workspace into dir and returns the files it wrote, with
// every agent on the provider of the given kind ("" keeps mock). Without
// overwrite it writes nothing if any file exists, and returns an
// *ExistsError naming them.
func Write(dir string, overwrite bool, kind string) ([]string, error) {
	provider := "mock"
	if kind != "" {
		var ok bool
		if provider, ok = Providers[kind]; !ok {
			return nil, fmt.Errorf("unknown provider %q (choose mock, openai, anthropic or process)", kind)
		}
	}
	var files []string
	err := fs.WalkDir(Files, ".", func(path string, d fs.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			files = append(files, path)
		}
		return err
	})
	if err != nil {
		return nil, err
	}
	if !overwrite {
		var existing []string
		for _, f := range files {
			if _, err := os.Stat(filepath.Join(dir, f)); err == nil {
				existing = append(existing, f)
			}
		}
		if len(existing) > 0 {
			return nil, &ExistsError{Dir: dir, Files: existing}
		}
	}
	for _, f := range files {
		data, err := Files.ReadFile(f)
		if err != nil {
			return nil, err
		}
		if f == "agentrunner.yaml" {
			if !strings.Contains(string(data), defaultProvider) {
				return nil, fmt.Errorf("the example's agentrunner.yaml has no %q line to set the provider", strings.TrimSpace(defaultProvider))
			}
			data = []byte(strings.Replace(string(data), defaultProvider, "  provider: "+provider+" ", 1))
		}
		dst := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return nil, fmt.Errorf("write %s: %w", dst, err)
		}
	}
	return files, nil
}
