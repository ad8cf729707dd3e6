// Command agentrunner runs pipelines of LLM agents deterministically and
// durably. See the README for the commands and the configuration.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/agentrunner/agentrunner/config"
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
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
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
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return usageError(err) })
	root.AddCommand(
		newInitCommand(),
		newValidateCommand(),
		newRunCommand(),
		newServeCommand(),
		newDemoCommand(),
		newStatusCommand(),
	)
	return root
}

// configFlag adds -c/--config to a command.
func configFlag(cmd *cobra.Command, path *string) {
	cmd.Flags().StringVarP(path, "config", "c", config.FileName, "configuration file")
}
