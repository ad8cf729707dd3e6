package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	"github.com/agentrunner/agentrunner/agentdef"
	"github.com/agentrunner/agentrunner/config"
	"github.com/spf13/cobra"
	"go.yaml.in/yaml/v3"
)

func newAgentsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "agents",
		Short: "Inspect the agent configurations of agents/defaults and agents/variants",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newAgentsResolveCommand())
	return cmd
}

func newAgentsResolveCommand() *cobra.Command {
	var path, state, repo string
	var ctx agentdef.Context
	cmd := &cobra.Command{
		Use:   "resolve --state STATE --repo PATH",
		Short: "Show which agent handles a state for a repository, and why",
		Long: `resolve reads the agents of the workspace (agents/defaults and agents/variants next
to the configuration file), lists the files of the repository (git ls-files in a
git repository, else every file but those under .git, node_modules and vendor),
and prints the agent chosen for the state, the reason and every candidate.
The language and the framework are given by flags.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Checked here, not by cobra, so that a missing flag is a
			// usage error like a bad one.
			switch {
			case state == "":
				return usageError(errors.New("--state is required: the state whose agent to resolve"))
			case repo == "":
				return usageError(errors.New("--repo is required: the repository the agent works on"))
			}
			dir := filepath.Dir(path)
			set, err := agentdef.Load(dir)
			var ps agentdef.Problems
			if errors.As(err, &ps) {
				cps := make(config.Problems, len(ps))
				for i, p := range ps {
					cps[i] = config.Problem(p)
				}
				return usageError(cps)
			} else if err != nil {
				return failureError(err)
			}
			ctx.Files, err = repoFiles(cmd.Context(), repo)
			if err != nil {
				return failureError(err)
			}
			a, reason, err := set.Resolve(state, ctx)
			if err != nil {
				return failureError(err)
			}
			return printResolved(cmd.OutOrStdout(), a, reason)
		},
	}
	cmd.Flags().StringVar(&state, "state", "", "the task state or backlog item state (required)")
	cmd.Flags().StringVar(&repo, "repo", "", "the repository the agent works on (required)")
	cmd.Flags().StringVar(&ctx.Framework, "framework", "", "the repository's framework, e.g. angular")
	cmd.Flags().StringVar(&ctx.Language, "language", "", "the repository's language, e.g. typescript")
	configFlag(cmd, &path)
	return cmd
}

func printResolved(w io.Writer, a *agentdef.Agent, r agentdef.Reason) error {
	kind := "default"
	if a.Variant {
		kind = "variant"
	}
	fmt.Fprintf(w, "agent: %s (%s, %s, from %s)\n", a.ID, a.Name, kind, a.File)
	fmt.Fprintf(w, "reason: %s\n", r.Why)
	fmt.Fprintln(w, "candidates:")
	width := 0
	for _, c := range r.Candidates {
		width = max(width, len(c.ID))
	}
	for _, c := range r.Candidates {
		mark, kind, fit := " ", "variant", "no match"
		if c.ID == r.Winner {
			mark = "*"
		}
		if !c.Variant {
			kind = "default"
		}
		switch {
		case !c.Variant:
			fit = "fallback"
		case c.Matched:
			fit = "matches"
		}
		fmt.Fprintf(w, "  %s %-*s  %s  %s: %s\n", mark, width, c.ID, kind, fit, c.Detail)
	}
	fmt.Fprintln(w, "resolved:")
	var b bytes.Buffer
	enc := yaml.NewEncoder(&b)
	enc.SetIndent(2)
	if err := enc.Encode(a); err != nil {
		return err
	}
	for line := range strings.Lines(b.String()) {
		fmt.Fprint(w, "  "+line)
	}
	return nil
}

// skipDirs are the folders a walk of a repository that is not a git
// repository leaves out.
var skipDirs = []string{".git", "node_modules", "vendor"}

// repoFiles lists a repository's files, relative and slash-separated:
// in a git repository the files git knows and the new files it does not
// ignore, else every file found by a walk.
func repoFiles(ctx context.Context, repo string) ([]string, error) {
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
			if p != repo && slices.Contains(skipDirs, d.Name()) {
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
