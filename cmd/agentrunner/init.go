package main

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"

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

// writeExample writes the embedded example workspace into dir. Without
// overwrite it refuses, before writing anything, if any file exists.
func writeExample(dir string, overwrite bool) ([]string, error) {
	var files []string
	err := fs.WalkDir(crypton.Files, ".", func(path string, d fs.DirEntry, err error) error {
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
			return nil, usageError(fmt.Errorf("%s already has %s; use --force to overwrite", dir, strings.Join(existing, ", ")))
		}
	}
	for _, f := range files {
		data, err := crypton.Files.ReadFile(f)
		if err != nil {
			return nil, err
		}
		dst := filepath.Join(dir, filepath.FromSlash(f))
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(dst, data, 0o644); err != nil {
			return nil, errors.Join(fmt.Errorf("write %s", dst), err)
		}
	}
	return files, nil
}
