package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/secrets"
	"github.com/spf13/cobra"
)

// maxSecretBytes bounds a value read from stdin.
const maxSecretBytes = 64 << 10

func newSecretsCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "secrets",
		Short: "Set, list and remove the secrets of the workspace's encrypted secrets file",
		Long: `secrets manages the age-encrypted secrets file of the workspace (secrets.file, default
secrets.age beside the configuration). A secret is named as the variable the configuration
names (api_key_env: OPENAI_API_KEY): a variable of the environment, or a NAME_FILE variable
naming a file, wins over the file. The identity that decrypts the file is
AGENTRUNNER_AGE_IDENTITY (or the file AGENTRUNNER_AGE_IDENTITY_FILE names), else
secrets.identity_file; make one with secrets keygen. serve reads the file again at each
reload, so a rotated key is used from the next request on.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	var path string
	cmd.PersistentFlags().StringVarP(&path, "config", "c", config.FileName, "configuration file")
	cmd.AddCommand(newSecretsSetCommand(&path), newSecretsListCommand(&path), newSecretsRmCommand(&path), newSecretsKeygenCommand())
	return cmd
}

// secretsFile opens the workspace's secrets file. The configuration may
// have other problems (a key it needs may be the one being set), so only
// a file that does not decode is refused.
func secretsFile(path string, need bool) (*secrets.File, error) {
	cfg, err := loadConfig(path)
	if cfg == nil {
		return nil, failureError(err)
	}
	f, err := secrets.OpenFile(cfg, os.LookupEnv, need)
	if err != nil {
		return nil, failureError(err)
	}
	if need && f.Identity == nil {
		return nil, failureError(fmt.Errorf("no age identity to encrypt %s with: make one with `agentrunner secrets keygen FILE`, then set secrets.identity_file: FILE or %s", f.Path, secrets.IdentityEnv))
	}
	return f, nil
}

func newSecretsSetCommand(path *string) *cobra.Command {
	return &cobra.Command{
		Use:   "set NAME",
		Short: "Store the secret NAME, its value read from stdin (never a flag)",
		Long: `set reads the value from stdin, so it stays out of shell history and ps:
printf %s "$KEY" | agentrunner secrets set OPENAI_API_KEY. One trailing line break is dropped.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := secrets.CheckName(args[0]); err != nil {
				return usageError(err)
			}
			value, err := readSecret(cmd.InOrStdin())
			if err != nil {
				return usageError(err)
			}
			f, err := secretsFile(*path, true)
			if err != nil {
				return err
			}
			if err := f.Set(args[0], value); err != nil {
				return failureError(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "stored %s in %s; a running serve takes it at its next reload (agentrunner reload)\n", args[0], f.Path)
			return nil
		},
	}
}

// readSecret reads a value from r, without its trailing line break.
func readSecret(r io.Reader) (string, error) {
	data, err := io.ReadAll(io.LimitReader(r, maxSecretBytes+1))
	if err != nil {
		return "", err
	}
	if len(data) > maxSecretBytes {
		return "", fmt.Errorf("the value on stdin is longer than %d bytes", maxSecretBytes)
	}
	value := strings.TrimSuffix(strings.TrimSuffix(string(data), "\n"), "\r")
	if value == "" {
		return "", errors.New("no value on stdin: pipe the secret in, e.g. printf %s \"$KEY\" | agentrunner secrets set NAME")
	}
	return value, nil
}

func newSecretsListCommand(path *string) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "List the names of the stored secrets (never their values)",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			f, err := secretsFile(*path, false)
			if err != nil {
				return err
			}
			names, err := f.Names()
			if err != nil {
				return failureError(err)
			}
			for _, name := range names {
				fmt.Fprintln(cmd.OutOrStdout(), name)
			}
			return nil
		},
	}
}

func newSecretsRmCommand(path *string) *cobra.Command {
	return &cobra.Command{
		Use:   "rm NAME",
		Short: "Remove the secret NAME from the secrets file",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			f, err := secretsFile(*path, true)
			if err != nil {
				return err
			}
			if err := f.Remove(args[0]); err != nil {
				return failureError(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s from %s\n", args[0], f.Path)
			return nil
		},
	}
}

func newSecretsKeygenCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "keygen FILE",
		Short: "Make an age identity in FILE (readable by its owner only; never replaced)",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			id, err := secrets.NewIdentity(args[0])
			if err != nil {
				return failureError(err)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "wrote an age identity to %s (public key %s)\nuse it with secrets: {identity_file: %s} in the configuration, or %s_FILE=%s; keep a copy: without it the secrets file cannot be read\n",
				args[0], id.Recipient(), args[0], secrets.IdentityEnv, args[0])
			return nil
		},
	}
}
