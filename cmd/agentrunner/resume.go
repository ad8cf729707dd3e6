package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/engine"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// maxReasonBytes is the API's bound on an operator's reason, applied to
// the local resume too, so the audit log holds the same either way.
const maxReasonBytes = 1024

func newResumeCommand() *cobra.Command {
	var path, operator, reason, server string
	cmd := &cobra.Command{
		Use:   "resume",
		Short: "Lift a pause, and resume a loop halted by a step that failed for good",
		Long: `resume records an operator's order that does both things a stopped workspace may need:
it lifts a pause (agentrunner pause), and it resumes the halted cycle, whose step gets a new
attempt and a new round of retries. It refuses when the workspace is neither paused nor
halted. A running serve applies it within a second; otherwise the next run applies it. The
order is durable and applied exactly once.

With --server or $AGENTRUNNER_SERVER the order goes through that server's API, with the
API key in $AGENTRUNNER_API_KEY, and the operator is the key's name.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(reason) > maxReasonBytes || !utf8.ValidString(reason) {
				return usageError(fmt.Errorf("--reason is %d bytes or not UTF-8; at most %d bytes of text", len(reason), maxReasonBytes))
			}
			if s, from := explicitServer(server); s != "" {
				if cmd.Flags().Changed("operator") {
					return usageError(errors.New("--operator is for the local workspace; through a server the operator is the API key's name"))
				}
				return resumeRemote(cmd, s, from, reason)
			}
			return resumeLocal(cmd, path, operator, reason)
		},
	}
	cmd.Flags().StringVar(&operator, "operator", os.Getenv("USER"), "who resumes, for the audit log")
	reasonFlag(cmd, &reason, "", "note")
	serverFlag(cmd, &server)
	configFlag(cmd, &path)
	return cmd
}

// resumeLocal writes the resume order into the workspace's store, when
// it is paused or its loop halted.
func resumeLocal(cmd *cobra.Command, path, operator, reason string) error {
	cfg, err := loadConfig(path)
	if err != nil {
		return err
	}
	store, err := openStore(cmd.Context(), cfg)
	if err != nil {
		return failureError(err)
	}
	defer store.Close()
	ctl, err := store.Control(cmd.Context())
	if err != nil {
		return failureError(err)
	}
	c, err := store.UnfinishedCycle(cmd.Context(), cfg.Name)
	if err != nil && agentrunner.ErrorCode(err) != agentrunner.ENOTFOUND {
		return failureError(err)
	}
	what, err := resumable(ctl, c)
	if err != nil {
		return err
	}
	order := &agentrunner.Command{Kind: agentrunner.CommandResume, Operator: operator, CreatedAt: time.Now().UTC()}
	if reason != "" {
		order.Args = map[string]any{"reason": reason}
	}
	if err := store.AddCommand(cmd.Context(), order); err != nil {
		return failureError(err)
	}
	fmt.Fprintf(cmd.OutOrStdout(), "resume requested (command %d): %s\n", order.ID, what)
	return nil
}

// resumeRemote orders the resume through the server's API, after checking
// that the workspace is paused or its loop halted, as the local resume
// does.
func resumeRemote(cmd *cobra.Command, server, from, reason string) error {
	c, err := newAPIClient(cmd, server, from)
	if err != nil {
		return err
	}
	st, err := call(cmd, c, func(ctx context.Context) (*engine.Status, error) { return c.Status(ctx) })
	if err != nil {
		return err
	}
	list, err := call(cmd, c, func(ctx context.Context) (*arhttp.CycleList, error) { return c.Cycles(ctx, 1, "") })
	if err != nil {
		return err
	}
	ctl := &agentrunner.Control{Paused: st.Paused, PausedBy: st.PausedBy}
	var newest *agentrunner.Cycle
	if len(list.Cycles) == 1 {
		cy := list.Cycles[0]
		newest = &agentrunner.Cycle{ID: cy.ID, Status: cy.Status, Step: cy.Step}
	}
	what, err := resumable(ctl, newest)
	if err != nil {
		return err
	}
	order, err := call(cmd, c, func(ctx context.Context) (*arhttp.Command, error) {
		return c.Override(ctx, agentrunner.CommandResume, arhttp.OverrideRequest{Reason: reason})
	})
	if err != nil {
		return err
	}
	fmt.Fprintf(cmd.OutOrStdout(), "resume requested (command %d by %s): %s\n", order.ID, order.Operator, what)
	return nil
}

// resumable says what a resume will do in a workspace with this control
// state and newest cycle (nil: none): lift its pause, resume its halted
// cycle, or both. With neither it is an error: the engine would ignore the
// order.
func resumable(ctl *agentrunner.Control, c *agentrunner.Cycle) (string, error) {
	var what []string
	if ctl.Paused {
		what = append(what, "lifts the pause by "+orNone(ctl.PausedBy))
	}
	if c != nil && c.Status == agentrunner.CycleHalted {
		what = append(what, fmt.Sprintf("resumes cycle %s at step %s", c.ID, c.Step))
	}
	if len(what) > 0 {
		return strings.Join(what, "; "), nil
	}
	state := "no unfinished cycle"
	if c != nil && !c.Status.Finished() {
		state = "at step " + c.Step
	}
	return "", failureError(fmt.Errorf("nothing to resume: the workspace is not paused and the loop is not halted (%s)", state))
}

// reasonFlag adds --reason, an operator's reason for the audit log, which
// every command that gives an order has under this one name; the names
// some had before stay as hidden aliases that say to use --reason.
func reasonFlag(cmd *cobra.Command, reason *string, shorthand string, aliases ...string) {
	cmd.Flags().StringVarP(reason, "reason", shorthand, "", "why, for the audit log")
	for _, a := range aliases {
		cmd.Flags().StringVar(reason, a, "", "why, for the audit log")
		// Hidden rather than deprecated: cobra prints pflag's deprecation
		// notice on stdout, where it would mix with the command's output;
		// warnReplaced says it on stderr instead.
		_ = cmd.Flags().MarkHidden(a) // the flag exists: no error
		_ = cmd.Flags().SetAnnotation(a, replacedBy, []string{"reason"})
	}
}

// replacedBy annotates a flag kept as an alias of the one it names.
const replacedBy = "agentrunner_replaced_by"

// warnReplaced says on stderr which given flags are old names of others.
func warnReplaced(cmd *cobra.Command) {
	cmd.Flags().Visit(func(f *pflag.Flag) {
		if by := f.Annotations[replacedBy]; len(by) == 1 {
			fmt.Fprintf(cmd.ErrOrStderr(), "agentrunner: --%s is an old name of --%s; use --%s\n", f.Name, by[0], by[0])
		}
	})
}
