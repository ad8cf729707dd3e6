package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"

	"github.com/agentrunner/agentrunner/agentdef"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/repoctx"
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
			ctx.Files, err = repoctx.Files(cmd.Context(), repo)
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
