package main

import (
	"errors"
	"fmt"
	"github.com/agentrunner/agentrunner/examples"
	"github.com/agentrunner/agentrunner/examples/review"

	"github.com/agentrunner/agentrunner/examples/crypton"
	"github.com/spf13/cobra"
)

func newInitCommand() *cobra.Command {
	var force, parallel bool
	var provider, example string
	cmd := &cobra.Command{
		Use:   "init DIR",
		Short: "Write an example workspace (by default the Crypton learning loop) into DIR",
		Long: `init writes an example workspace into DIR. --example chooses it: crypton (the learning
loop, the default) or review (a review loop whose cap opens a gate for a person, run by
agentrunner serve and started with agentrunner start review). For crypton, --provider sets
every agent's provider: mock (offline, the default), openai, anthropic, or process (the
Claude Code CLI, with the runner's tools over MCP). --parallel writes the loop with Research
and Analyze on parallel branches after Plan, joined by Synthesize; the analysis then reads
the last cycle's research (see docs/pipelines.md). The workspace is ready to run once the
provider's key is set.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch example {
			case "crypton":
			case "review":
				if cmd.Flags().Changed("provider") {
					return usageError(errors.New("--provider applies to the crypton example; the review example's agents are scripts (see its agentrunner.yaml)"))
				}
				if parallel {
					return usageError(errors.New("--parallel applies to the crypton example, the learning loop"))
				}
				return initReview(cmd, args[0], force)
			default:
				return usageError(fmt.Errorf("--example %q: choose crypton or review", example))
			}
			if _, ok := crypton.Providers[provider]; !ok {
				return usageError(fmt.Errorf("--provider %q: choose mock, openai, anthropic or process", provider))
			}
			var opts []crypton.Option
			shape := ""
			if parallel {
				opts, shape = append(opts, crypton.Parallel), ", research and analyze in parallel"
			}
			written, err := writeExample(args[0], force, provider, opts...)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "wrote %d files into %s (agents on the %s provider%s):\n", len(written), args[0], provider, shape)
			for _, f := range written {
				fmt.Fprintf(out, "  %s\n", f)
			}
			switch provider {
			case "openai":
				fmt.Fprintln(out, "set OPENAI_API_KEY (and OPENAI_BASE_URL for an OpenAI-compatible server) before running")
			case "anthropic":
				fmt.Fprintln(out, "set ANTHROPIC_API_KEY before running")
			case "process":
				fmt.Fprintln(out, "the agents run the claude CLI, which must be on PATH and logged in; it gets only the variables providers.claude-code.env passes")
			}
			fmt.Fprintf(out, "next: cd %s && agentrunner validate && agentrunner run --once\n", args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "overwrite files that already exist")
	cmd.Flags().StringVar(&provider, "provider", "mock", "provider of every agent: mock, openai, anthropic or process")
	cmd.Flags().StringVar(&example, "example", "crypton", "the example: crypton or review")
	cmd.Flags().BoolVar(&parallel, "parallel", false, "crypton: run research and analyze in parallel after plan, joined by synthesize")
	return cmd
}

// initReview writes the review example and says how to run it.
func initReview(cmd *cobra.Command, dir string, force bool) error {
	written, err := review.Write(dir, force)
	var exists *examples.ExistsError
	if errors.As(err, &exists) {
		return usageError(err)
	}
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	fmt.Fprintf(out, "wrote %d files into %s (a review loop whose agents are the scripts in agents/):\n", len(written), dir)
	for _, f := range written {
		fmt.Fprintf(out, "  %s\n", f)
	}
	fmt.Fprintf(out, "next: cd %s && agentrunner serve, then in another terminal:\n", dir)
	fmt.Fprintln(out, "  agentrunner start review --input topic=\"durable agents\"; agentrunner gates; agentrunner approve RUN decide -m \"ship it\"")
	return nil
}

// writeExample writes the embedded example workspace into dir with every
// agent on the provider of the given kind, in the shape opts give;
// existing files are a usage error unless overwrite.
func writeExample(dir string, overwrite bool, provider string, opts ...crypton.Option) ([]string, error) {
	files, err := crypton.Write(dir, overwrite, provider, opts...)
	var exists *examples.ExistsError
	if errors.As(err, &exists) {
		return nil, usageError(err)
	}
	return files, err
}
