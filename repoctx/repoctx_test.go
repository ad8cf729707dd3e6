package repoctx_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/repoctx"
)

func TestDetectFixtures(t *testing.T) {
	tests := []struct {
		dir  string
		want repoctx.Context
	}{
		{"go", repoctx.Context{
			Language: "go", Framework: "go",
			// The four generated .pb.go files are not counted.
			Languages: map[string]int{"go": 3, "python": 2},
			Markers:   []string{"go.mod"},
		}},
		{"angular", repoctx.Context{
			Language: "typescript", Framework: "angular",
			Languages: map[string]int{"typescript": 3, "javascript": 1},
			Markers:   []string{"angular.json", "package.json"},
		}},
		{"react", repoctx.Context{
			Language: "typescript", Framework: "react",
			Languages: map[string]int{"typescript": 2, "javascript": 1},
			Markers:   []string{"package.json"},
		}},
		{"nextjs", repoctx.Context{
			Language: "javascript", Framework: "nextjs",
			Languages: map[string]int{"javascript": 1},
			Markers:   []string{"package.json"},
		}},
		{"vue", repoctx.Context{
			Language: "javascript", Framework: "vue",
			Languages: map[string]int{"javascript": 1},
			Markers:   []string{"package.json"},
		}},
		{"dotnet", repoctx.Context{
			// obj/ is skipped: its three files would make it a tie.
			Language: "csharp", Framework: "dotnet",
			Languages: map[string]int{"csharp": 2, "javascript": 1},
			Markers:   []string{"Shop.sln", "src/Shop.Api/Shop.Api.csproj"},
		}},
		{"django", repoctx.Context{
			Language: "python", Framework: "django",
			Languages: map[string]int{"python": 3, "javascript": 1},
			Markers:   []string{"requirements.txt"},
		}},
		{"monorepo", repoctx.Context{
			// No marker at the root: angular.json ranks above go.mod.
			Language: "go", Framework: "angular",
			Languages: map[string]int{"go": 3, "typescript": 2},
			Markers:   []string{"backend/go.mod", "frontend/angular.json", "frontend/package.json"},
		}},
		{"gomono", repoctx.Context{
			// The root's go.mod beats the nested React app.
			Language: "typescript", Framework: "go",
			Languages: map[string]int{"go": 1, "typescript": 3},
			Markers:   []string{"go.mod", "legacy/package.json", "web/package.json"},
			// A broken nested package.json is named though go.mod wins.
			Problems: []string{"legacy/package.json: not valid JSON: unexpected end of JSON input"},
		}},
		{"vendored", repoctx.Context{
			Language: "go", Framework: "go",
			Languages: map[string]int{"go": 1},
			Markers:   []string{"go.mod"},
		}},
		{"ties", repoctx.Context{
			// Two files each: the name that sorts first wins. go.mod ranks
			// above pyproject.toml.
			Language: "go", Framework: "go",
			Languages: map[string]int{"go": 2, "python": 2, "typescript": 2},
			Markers:   []string{"go.mod", "pyproject.toml"},
		}},
		{"malformed", repoctx.Context{
			Language: "python", Framework: "flask",
			Languages: map[string]int{"python": 1},
			Markers:   []string{"package.json", "requirements.txt"},
			Problems:  []string{"package.json: not valid JSON: invalid character '}' looking for beginning of object key string"},
		}},
		{"spring", repoctx.Context{
			Language: "java", Framework: "spring",
			Languages: map[string]int{"java": 1},
			Markers:   []string{"pom.xml"},
		}},
		{"rust", repoctx.Context{
			Language: "rust", Framework: "rust",
			Languages: map[string]int{"rust": 1},
			Markers:   []string{"Cargo.toml"},
		}},
		{"rails", repoctx.Context{
			Language: "ruby", Framework: "rails",
			Languages: map[string]int{"ruby": 1},
			Markers:   []string{"Gemfile"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.dir, func(t *testing.T) {
			root := filepath.Join("testdata", tt.dir)
			got, err := repoctx.Detect(t.Context(), root)
			if err != nil {
				t.Fatal(err)
			}
			abs, err := filepath.Abs(root)
			if err != nil {
				t.Fatal(err)
			}
			if abs, err = filepath.EvalSymlinks(abs); err != nil {
				t.Fatal(err)
			}
			tt.want.RepoPath = abs
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Detect(%s) mismatch (-want +got):\n%s", tt.dir, diff)
			}
		})
	}
}

// write creates the files under root, each with its content.
func write(t *testing.T, root string, files map[string]string) {
	t.Helper()
	for name, content := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestDetectEmpty(t *testing.T) {
	root := t.TempDir()
	got, err := repoctx.Detect(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	abs, _ := filepath.EvalSymlinks(root)
	want := repoctx.Context{RepoPath: abs, Languages: map[string]int{}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("mismatch (-want +got):\n%s", diff)
	}
}

// A .git folder (which a fixture under testdata cannot hold) is skipped.
func TestDetectSkipsGit(t *testing.T) {
	root := t.TempDir()
	write(t, root, map[string]string{
		"main.py":          "x",
		".git/hooks/a.rb":  "x",
		".git/hooks/b.rb":  "x",
		".git/Gemfile":     "gem 'rails'",
		"sub/.git/c.rb":    "x",
		"sub/.git/Gemfile": "gem 'rails'",
	})
	got, err := repoctx.Detect(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	if got.Language != "python" || got.Framework != "" || len(got.Markers) != 0 {
		t.Errorf("got %+v, want python, no framework, no markers", got)
	}
}

func TestDetectDoesNotFollowSymlinks(t *testing.T) {
	outside := t.TempDir()
	write(t, outside, map[string]string{"a.rs": "x", "b.rs": "x", "Cargo.toml": "[package]"})
	root := t.TempDir()
	write(t, root, map[string]string{"main.go": "package main"})
	if err := os.Symlink(outside, filepath.Join(root, "linked")); err != nil {
		t.Skip("symlinks not available:", err)
	}
	if err := os.Symlink(filepath.Join(outside, "a.rs"), filepath.Join(root, "a.rs")); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(filepath.Join(outside, "Cargo.toml"), filepath.Join(root, "Cargo.toml")); err != nil {
		t.Fatal(err)
	}
	got, err := repoctx.Detect(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]int{"go": 1}
	if diff := cmp.Diff(want, got.Languages); diff != "" || got.Framework != "" || got.Markers != nil {
		t.Errorf("got %+v, want only main.go (-want +got languages):\n%s", got, diff)
	}
}

// The root may itself be a symlink to the repository.
func TestDetectRootSymlink(t *testing.T) {
	link := filepath.Join(t.TempDir(), "repo")
	target, err := filepath.Abs(filepath.Join("testdata", "rust"))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(target, link); err != nil {
		t.Skip("symlinks not available:", err)
	}
	got, err := repoctx.Detect(t.Context(), link)
	if err != nil {
		t.Fatal(err)
	}
	if got.Language != "rust" || got.Framework != "rust" {
		t.Errorf("got %+v, want rust/rust", got)
	}
}

func TestDetectMaxFiles(t *testing.T) {
	root := t.TempDir()
	files := map[string]string{}
	for _, n := range strings.Split("a b c d e f g h i j", " ") {
		files[n+".py"] = "x"
	}
	write(t, root, files)
	got, err := repoctx.Detector{MaxFiles: 4}.Detect(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	if !got.Truncated || got.Languages["python"] != 4 {
		t.Errorf("got %+v, want 4 python files and Truncated", got)
	}
	got, err = repoctx.Detector{MaxFiles: 10}.Detect(t.Context(), root)
	if err != nil {
		t.Fatal(err)
	}
	if got.Truncated || got.Languages["python"] != 10 {
		t.Errorf("got %+v, want 10 python files, not Truncated", got)
	}
}

func TestDetectCanceled(t *testing.T) {
	ctx, cancel := context.WithCancelCause(t.Context())
	cause := errors.New("shutting down")
	cancel(cause)
	_, err := repoctx.Detect(ctx, filepath.Join("testdata", "go"))
	if !errors.Is(err, cause) {
		t.Errorf("err = %v, want %v", err, cause)
	}
}

func TestDetectBadRoot(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "f.go")
	write(t, dir, map[string]string{"f.go": "package f"})
	tests := []struct {
		root string
		code string
	}{
		{filepath.Join(dir, "missing"), agentrunner.ENOTFOUND},
		{file, agentrunner.EINVALID},
	}
	for _, tt := range tests {
		_, err := repoctx.Detect(t.Context(), tt.root)
		if got := agentrunner.ErrorCode(err); got != tt.code {
			t.Errorf("Detect(%s) code = %q (%v), want %q", tt.root, got, err, tt.code)
		}
	}
}
