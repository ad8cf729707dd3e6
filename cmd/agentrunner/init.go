package main

import (
	"errors"
	"fmt"

	"github.com/agentrunner/agentrunner/examples/crypton"
	"github.com/spf13/cobra"
)

func newInitCommand() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "init DIR",
		Short: "Write the example workspace (the Crypton learning loop) into DIR",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			written, err := writeExample(args[0], force)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			fmt.Fprintf(out, "wrote %d files into %s:\n", len(written), args[0])
			for _, f := range written {
				fmt.Fprintf(out, "  %s\n", f)
			}
			fmt.Fprintf(out, "next: cd %s && agentrunner validate && agentrunner run --once\n", args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "overwrite files that already exist")
	return cmd
}

// writeExample writes the embedded example workspace into dir; existing
// files are a usage error unless overwrite.
func writeExample(dir string, overwrite bool) ([]string, error) {
	files, err := crypton.Write(dir, overwrite)
	var exists *crypton.ExistsError
	if errors.As(err, &exists) {
		return nil, usageError(err)
	}
	return files, err
}
