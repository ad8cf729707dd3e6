package main

import (
	"errors"
	"fmt"

	"github.com/agentrunner/agentrunner/examples/crypton"
	"github.com/spf13/cobra"
)

func newInitCommand() *cobra.Command {
	var force bool
	var provider string
	cmd := &cobra.Command{
		Use:   "init DIR",
		Short: "Write the example workspace (the Crypton learning loop) into DIR",
		Long: `init writes the example workspace into DIR. --provider sets every agent's provider:
mock (offline, the default), openai, anthropic, or process (the Claude Code CLI, with the
runner's tools over MCP). The workspace is ready to run once the provider's key is set.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if _, ok := crypton.Providers[provider]; !ok {
				return usageError(fmt.Errorf("--provider %q: choose mock, openai, anthropic or process", provider))
			}
			written, err := writeExample(args[0], force, provider)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "wrote %d files into %s (agents on the %s provider):\n", len(written), args[0], provider)
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
	return cmd
}

// writeExample writes the embedded example workspace into dir with every
// agent on the provider of the given kind; existing files are a usage
// error unless overwrite.
func writeExample(dir string, overwrite bool, provider string) ([]string, error) {
	files, err := crypton.Write(dir, overwrite, provider)
	var exists *crypton.ExistsError
	if errors.As(err, &exists) {
		return nil, usageError(err)
	}
	return files, err
}
