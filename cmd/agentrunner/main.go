// Command agentrunner runs pipelines of LLM agents deterministically and
// durably. See the README for the commands and the configuration.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/internal/childenv"
	"github.com/spf13/cobra"
)

// Exit statuses.
const (
	exitOK      = 0
	exitFailure = 1 // the work failed: a cycle failed, validation found problems
	exitUsage   = 2 // bad flags or a bad configuration: nothing started
)

// exitError carries an exit status through cobra.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

func usageError(err error) error   { return withCode(exitUsage, err) }
func failureError(err error) error { return withCode(exitFailure, err) }

func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

func main() {
	// Agents run as the runner's user: without this they could read the
	// runner's secrets in /proc/<pid>/environ, whatever their own
	// environment holds.
	if err := childenv.ProtectRunner(); err != nil {
		fmt.Fprintf(os.Stderr, "agentrunner: warning: cannot hide the runner's environment from the processes it starts: %v\n", err)
	}
	ctx, stop := shutdownOnSignal(context.Background(), os.Exit)
	code := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line and returns the exit status.
func run(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	root := newRootCommand(stdout, stderr)
	root.SetArgs(args)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var problems config.Problems
	if errors.As(err, &problems) {
		fmt.Fprintf(stderr, "agentrunner: the configuration has %d problem(s):\n", len(problems))
		for _, p := range problems {
			fmt.Fprintf(stderr, "  %s\n", p)
		}
	} else {
		fmt.Fprintf(stderr, "agentrunner: %v\n", err)
	}
	var ee *exitError
	if errors.As(err, &ee) {
		return ee.code
	}
	if problems != nil {
		return exitUsage
	}
	return exitFailure
}

func newRootCommand(stdout, stderr io.Writer) *cobra.Command {
	root := &cobra.Command{
		Use:   "agentrunner",
		Short: "Run pipelines of LLM agents deterministically and durably",
		Long: `agentrunner drives pipelines of LLM agents: it assembles each agent's context,
runs it, validates its output against the output template, moves messages between
agents and records every state change durably, so a crash resumes where it stopped.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetOut(stdout)
	root.SetErr(stderr)
	logs := persistentLogFlags(root)
	root.PersistentPreRunE = func(cmd *cobra.Command, _ []string) error { return logs.prepare(cmd) }
	build := readBuild()
	root.Version = build.Version
	root.SetVersionTemplate(build.String() + "\n")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	root.AddCommand(
		newInitCommand(),
		newValidateCommand(),
		newRunCommand(),
		newServeCommand(),
		newDemoCommand(),
		newStatusCommand(),
		newToolsCommand(),
		newResumeCommand(),
		newMCPCommand(),
		newDBCommand(),
		newArchiveCommand(),
		newCapsuleCommand(),
		newMemoryCommand(),
		newTodosCommand(),
		newAgentsCommand(),
		newSecretsCommand(),
		newVersionCommand(),
		newExecsvcCommand(),
	)
	root.AddCommand(remoteCommands()...)
	root.AddCommand(runCommands()...)
	root.AddCommand(backlogCommands()...)
	root.AddCommand(newHealthcheckCommand(), newServiceCommand())
	// Cobra reports wrong arguments and unknown commands as plain errors,
	// which would exit 1; they are usage errors like bad flags (exit 2).
	for _, c := range root.Commands() {
		if c.Args != nil {
			c.Args = usageArgs(c.Args)
		}
	}
	// Giving the root its own argument check (which needs it runnable) is
	// the only way to replace cobra's unknown-command error.
	root.Args = unknownCommand
	root.SuggestionsMinimumDistance = 2
	root.RunE = func(cmd *cobra.Command, _ []string) error { return cmd.Help() }
	return root
}

// usageArgs turns the errors of an argument check into usage errors.
func usageArgs(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		return usageError(check(cmd, args))
	}
}

// unknownCommand rejects a first word that names no command, suggesting
// the closest commands.
func unknownCommand(cmd *cobra.Command, args []string) error {
	if len(args) == 0 {
		return nil
	}
	msg := fmt.Sprintf("unknown command %q for %q", args[0], cmd.CommandPath())
	if s := cmd.SuggestionsFor(args[0]); len(s) > 0 {
		msg += fmt.Sprintf(" (did you mean %s?)", strings.Join(s, " or "))
	}
	return usageError(errors.New(msg))
}

// configFlag adds -c/--config to a command.
func configFlag(cmd *cobra.Command, path *string) {
	cmd.Flags().StringVarP(path, "config", "c", config.FileName, "configuration file")
}
