// Package repoctx is spec 5's ContextDetector: it looks at a repository and
// says which language it is mostly written in and which framework it uses,
// so that a pipeline can pick an agent variant (`plan.angular.yml`) by the
// framework and give its agents the language as a template variable.
//
// Detection reads the tree only: it runs nothing, follows no symlinks, skips
// vendored and generated folders, and stops after MaxFiles files or when
// its context ends. The same tree always gives the same Context.
//
// # Language
//
// Each file's extension is looked up in the table below (case-insensitive);
// files with other extensions are not counted. The language with the most
// files wins; a tie goes to the language whose name sorts first, so a repo
// with two Go files and two Python files is "go".
//
//	.go                        go
//	.ts .tsx .mts .cts         typescript
//	.js .jsx .mjs .cjs         javascript
//	.py                        python
//	.cs                        csharp
//	.java                      java
//	.kt .kts                   kotlin
//	.rb                        ruby
//	.rs                        rust
//	.php                       php
//	.swift                     swift
//	.c .h                      c
//	.cpp .cc .cxx .hpp .hh .hxx cpp
//	.scala                     scala
//	.dart                      dart
//
// Folders named .git, node_modules, vendor, dist, build, bin, obj, target,
// .venv, __pycache__ or coverage are skipped wherever they are (their files
// and their markers alike), and a Go file whose first line is
// `// Code generated … DO NOT EDIT.` is not counted.
//
// # Framework
//
// Marker files are found anywhere in the tree outside the skipped folders
// and each names at most one framework:
//
//	angular.json                    angular
//	package.json                    nextjs if its dependencies or devDependencies
//	                                name next, else react if they name react,
//	                                else vue if they name vue, else none
//	*.csproj *.sln                  dotnet
//	go.mod                          go
//	pom.xml build.gradle(.kts)      spring if it mentions spring-boot, else java
//	Cargo.toml                      rust
//	pyproject.toml requirements.txt django, fastapi or flask if it names one
//	                                (in that order), else python
//	Gemfile                         rails if it names the rails gem, else ruby
//
// When several markers name a framework, a marker at the root beats every
// nested one (a monorepo's packages rank below the repo itself); then the
// rows of the table rank top to bottom (angular.json before package.json
// before *.csproj …); then a shallower marker beats a deeper one; then the
// path that sorts first wins. A package.json that is not valid JSON names
// no framework: it is listed in Problems and detection goes on.
package repoctx

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"regexp"
	"sort"
	"strings"

	"github.com/agentrunner/agentrunner"
)

// DefaultMaxFiles bounds the files one detection looks at, so that a huge
// checkout costs seconds, not minutes; the counts of the files seen are
// a fair sample of the language.
const DefaultMaxFiles = 200_000

// maxMarkerBytes bounds what is read of one marker file: manifests are
// small, and a huge one is not worth the memory.
const maxMarkerBytes = 1 << 20

// Context is what detection found in a repository.
type Context struct {
	// Language is the language with the most files ("" when none is known).
	Language string `json:"language"`
	// Framework is the framework of the highest-ranked marker ("" when none).
	Framework string `json:"framework"`
	// Languages counts the files of each language found.
	Languages map[string]int `json:"languages"`
	// Markers are the marker files found, repo-relative with forward
	// slashes, sorted.
	Markers []string `json:"markers,omitempty"`
	// RepoPath is the absolute path of the repository's root.
	RepoPath string `json:"repo_path"`
	// Problems names the marker files that could not be read or parsed,
	// sorted, one sentence each; they did not stop detection.
	Problems []string `json:"problems,omitempty"`
	// Truncated says the walk stopped at MaxFiles, so the counts are of
	// part of the tree.
	Truncated bool `json:"truncated,omitempty"`
}

// Detector detects a repository's Context. Its zero value is ready to use.
type Detector struct {
	// MaxFiles bounds the files looked at; 0 means DefaultMaxFiles.
	MaxFiles int
}

// Detect detects root's Context with a zero Detector.
func Detect(ctx context.Context, root string) (Context, error) {
	return Detector{}.Detect(ctx, root)
}

// languages maps a lower-case file extension to its language.
var languages = map[string]string{
	".go":    "go",
	".ts":    "typescript",
	".tsx":   "typescript",
	".mts":   "typescript",
	".cts":   "typescript",
	".js":    "javascript",
	".jsx":   "javascript",
	".mjs":   "javascript",
	".cjs":   "javascript",
	".py":    "python",
	".cs":    "csharp",
	".java":  "java",
	".kt":    "kotlin",
	".kts":   "kotlin",
	".rb":    "ruby",
	".rs":    "rust",
	".php":   "php",
	".swift": "swift",
	".c":     "c",
	".h":     "c",
	".cpp":   "cpp",
	".cc":    "cpp",
	".cxx":   "cpp",
	".hpp":   "cpp",
	".hh":    "cpp",
	".hxx":   "cpp",
	".scala": "scala",
	".dart":  "dart",
}

// skipDirs are the vendored, generated and tool folders that say nothing
// about the repository's own code.
var skipDirs = map[string]bool{
	".git": true, "node_modules": true, "vendor": true, "dist": true,
	"build": true, "bin": true, "obj": true, "target": true, ".venv": true,
	"__pycache__": true, "coverage": true,
}

// The kinds of marker, in the order they rank (see the package comment).
const (
	kindAngular = iota
	kindPackageJSON
	kindDotnet
	kindGoMod
	kindJVM
	kindCargo
	kindPython
	kindGemfile
)

// markerKind returns the kind of marker a file name is, and false when it
// is not a marker.
func markerKind(name string) (int, bool) {
	switch name {
	case "angular.json":
		return kindAngular, true
	case "package.json":
		return kindPackageJSON, true
	case "go.mod":
		return kindGoMod, true
	case "pom.xml", "build.gradle", "build.gradle.kts":
		return kindJVM, true
	case "Cargo.toml":
		return kindCargo, true
	case "pyproject.toml", "requirements.txt":
		return kindPython, true
	case "Gemfile":
		return kindGemfile, true
	}
	switch strings.ToLower(path.Ext(name)) {
	case ".csproj", ".sln":
		return kindDotnet, true
	}
	return 0, false
}

// marker is one marker file found.
type marker struct {
	rel  string // repo-relative, forward slashes
	kind int
}

// Detect walks root and returns its Context. It fails with ENOTFOUND when
// root does not exist, EINVALID when it is not a folder, and the context's
// cause when ctx ends first.
func (d Detector) Detect(ctx context.Context, root string) (Context, error) {
	maxFiles := d.MaxFiles
	if maxFiles <= 0 {
		maxFiles = DefaultMaxFiles
	}
	abs, err := filepath.Abs(root)
	if err != nil {
		return Context{}, agentrunner.Errorf(agentrunner.EINVALID, "repository path %q: %v", root, err)
	}
	// The root itself may be a symlink (a worktree link); what is under it
	// is not followed.
	if real, err := filepath.EvalSymlinks(abs); err == nil {
		abs = real
	}
	info, err := os.Stat(abs)
	if errors.Is(err, fs.ErrNotExist) {
		return Context{}, agentrunner.Errorf(agentrunner.ENOTFOUND, "repository %s does not exist", abs)
	}
	if err != nil {
		return Context{}, &agentrunner.Error{Code: agentrunner.EINVALID, Message: "repository " + abs, Err: err}
	}
	if !info.IsDir() {
		return Context{}, agentrunner.Errorf(agentrunner.EINVALID, "repository %s is not a folder", abs)
	}

	out := Context{RepoPath: abs, Languages: map[string]int{}}
	var markers []marker
	files := 0
	errStop := errors.New("stop")
	err = filepath.WalkDir(abs, func(p string, e fs.DirEntry, err error) error {
		if ctx.Err() != nil {
			return context.Cause(ctx)
		}
		if err != nil {
			if p == abs {
				return err
			}
			// An unreadable folder or file says nothing; skip it.
			if e != nil && e.IsDir() {
				return fs.SkipDir
			}
			return nil
		}
		if e.IsDir() {
			if p != abs && skipDirs[e.Name()] {
				return fs.SkipDir
			}
			return nil
		}
		if !e.Type().IsRegular() { // symlinks, sockets, devices
			return nil
		}
		if files >= maxFiles {
			out.Truncated = true
			return errStop
		}
		files++
		name := e.Name()
		if kind, ok := markerKind(name); ok {
			rel, _ := filepath.Rel(abs, p)
			markers = append(markers, marker{rel: filepath.ToSlash(rel), kind: kind})
		}
		lang, ok := languages[strings.ToLower(filepath.Ext(name))]
		if !ok {
			return nil
		}
		if lang == "go" && generatedGo(p) {
			return nil
		}
		out.Languages[lang]++
		return nil
	})
	if err != nil && !errors.Is(err, errStop) {
		if ctx.Err() != nil {
			return Context{}, err
		}
		return Context{}, &agentrunner.Error{Code: agentrunner.EUNAVAILABLE, Message: "reading repository " + abs, Err: err}
	}

	out.Language = topLanguage(out.Languages)
	out.Framework, out.Problems = framework(abs, markers)
	for _, m := range markers {
		out.Markers = append(out.Markers, m.rel)
	}
	sort.Strings(out.Markers)
	return out, nil
}

// topLanguage returns the language with the most files, the one whose name
// sorts first on a tie, and "" for none.
func topLanguage(counts map[string]int) string {
	best, n := "", 0
	for lang, c := range counts {
		if c > n || (c == n && lang < best) {
			best, n = lang, c
		}
	}
	return best
}

// generatedPrefix and generatedSuffix frame Go's marker of generated code.
const (
	generatedPrefix = "// Code generated "
	generatedSuffix = " DO NOT EDIT."
)

// generatedGo reports whether the Go file at p starts with the line that
// marks generated code. A file that cannot be read is counted as written.
func generatedGo(p string) bool {
	f, err := os.Open(p)
	if err != nil {
		return false
	}
	defer f.Close()
	line, err := bufio.NewReaderSize(io.LimitReader(f, 4096), 4096).ReadSlice('\n')
	if err != nil && !errors.Is(err, io.EOF) {
		return false
	}
	line = bytes.TrimRight(line, "\r\n")
	return bytes.HasPrefix(line, []byte(generatedPrefix)) && bytes.HasSuffix(line, []byte(generatedSuffix))
}

// framework returns the framework of the highest-ranked marker that names
// one, and the problems met reading markers.
func framework(root string, markers []marker) (string, []string) {
	sorted := append([]marker(nil), markers...)
	sort.Slice(sorted, func(i, j int) bool {
		a, b := sorted[i], sorted[j]
		ar, br := !strings.Contains(a.rel, "/"), !strings.Contains(b.rel, "/")
		if ar != br {
			return ar
		}
		if a.kind != b.kind {
			return a.kind < b.kind
		}
		ad, bd := strings.Count(a.rel, "/"), strings.Count(b.rel, "/")
		if ad != bd {
			return ad < bd
		}
		return a.rel < b.rel
	})
	// Every marker is read, not only those up to the winner, so that the
	// problems do not depend on which marker wins.
	var found string
	var problems []string
	for _, m := range sorted {
		fw, err := frameworkOf(filepath.Join(root, filepath.FromSlash(m.rel)), m.kind)
		if err != nil {
			problems = append(problems, fmt.Sprintf("%s: %v", m.rel, err))
			continue
		}
		if found == "" {
			found = fw
		}
	}
	sort.Strings(problems)
	return found, problems
}

// Words looked for in manifests, each as a whole word.
var (
	reDjango     = regexp.MustCompile(`(?i)(^|[^a-z0-9_-])django([^a-z0-9_-]|$)`)
	reFastAPI    = regexp.MustCompile(`(?i)(^|[^a-z0-9_-])fastapi([^a-z0-9_-]|$)`)
	reFlask      = regexp.MustCompile(`(?i)(^|[^a-z0-9_-])flask([^a-z0-9_-]|$)`)
	reRails      = regexp.MustCompile(`(?m)^\s*gem\s+['"]rails['"]`)
	reSpringBoot = regexp.MustCompile(`(?i)spring-boot`)
)

// frameworkOf returns the framework one marker names, "" for none.
func frameworkOf(p string, kind int) (string, error) {
	switch kind {
	case kindAngular:
		return "angular", nil
	case kindDotnet:
		return "dotnet", nil
	case kindGoMod:
		return "go", nil
	case kindCargo:
		return "rust", nil
	}
	data, err := readMarker(p)
	if err != nil {
		return "", err
	}
	switch kind {
	case kindPackageJSON:
		return packageFramework(data)
	case kindJVM:
		if reSpringBoot.Match(data) {
			return "spring", nil
		}
		return "java", nil
	case kindPython:
		switch {
		case reDjango.Match(data):
			return "django", nil
		case reFastAPI.Match(data):
			return "fastapi", nil
		case reFlask.Match(data):
			return "flask", nil
		}
		return "python", nil
	case kindGemfile:
		if reRails.Match(data) {
			return "rails", nil
		}
		return "ruby", nil
	}
	return "", nil
}

// readMarker reads at most maxMarkerBytes of a marker file.
func readMarker(p string) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, maxMarkerBytes))
}

// packageFramework returns the framework a package.json's dependencies
// name: nextjs before react before vue.
func packageFramework(data []byte) (string, error) {
	var pkg struct {
		Dependencies    map[string]any `json:"dependencies"`
		DevDependencies map[string]any `json:"devDependencies"`
	}
	if err := json.Unmarshal(data, &pkg); err != nil {
		return "", fmt.Errorf("not valid JSON: %w", err)
	}
	has := func(name string) bool {
		_, a := pkg.Dependencies[name]
		_, b := pkg.DevDependencies[name]
		return a || b
	}
	switch {
	case has("next"):
		return "nextjs", nil
	case has("react"):
		return "react", nil
	case has("vue"):
		return "vue", nil
	}
	return "", nil
}
