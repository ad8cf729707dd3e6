package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/agentrunner/agentrunner"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/spf13/cobra"
)

// runCommands are the remote commands of the graph scheduler's runs and
// gates.
func runCommands() []*cobra.Command {
	return []*cobra.Command{
		newStartCommand(),
		newRunsCommand(),
		newRunStatusCommand(),
		newAttemptCommand(),
		newGatesCommand(),
		newDecideCommand(agentrunner.DecisionApprove, "Approve a waiting gate: the run goes on along the gate's approve route"),
		newDecideCommand(agentrunner.DecisionReject, "Reject a waiting gate: the run follows the gate's reject route, or fails"),
		newDecideCommand(agentrunner.DecisionRoute, "Send the run of a waiting gate to a named step"),
		newAnswerCommand(),
		newAbortRunCommand(),
		newResumeRunCommand(),
	}
}

// parseInputs reads --input k=v flags: a value that parses as JSON is
// that value (7, true, {"a":1}, "quoted"), else the string as given.
func parseInputs(flags []string) (map[string]any, error) {
	if len(flags) == 0 {
		return nil, nil
	}
	out := map[string]any{}
	for _, f := range flags {
		k, v, ok := strings.Cut(f, "=")
		if !ok || strings.TrimSpace(k) == "" {
			return nil, usageError(fmt.Errorf("--input %q: want KEY=VALUE", clipCell(f)))
		}
		if _, dup := out[k]; dup {
			return nil, usageError(fmt.Errorf("--input %s is given twice", k))
		}
		var val any
		if err := json.Unmarshal([]byte(v), &val); err != nil {
			val = v
		}
		out[k] = val
	}
	return out, nil
}

func newStartCommand() *cobra.Command {
	var r remote
	var inputs []string
	cmd := &cobra.Command{
		Use:   "start PIPELINE",
		Short: "Start a run of a pipeline on a running server and print its id",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			in, err := parseInputs(inputs)
			if err != nil {
				return err
			}
			c, err := r.client(cmd)
			if err != nil {
				return err
			}
			started, err := call(cmd, c, func(ctx context.Context) (*arhttp.StartedRun, error) { return c.StartRun(ctx, args[0], in) })
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case r.asJSON:
				return printJSON(out, started)
			case started.Run != nil:
				fmt.Fprintln(out, started.Run.ID)
			default:
				fmt.Fprintf(cmd.ErrOrStderr(), "run requested: command %d; the scheduler has not started it yet, `agentrunner audit` shows its run id when it does\n", started.Command.ID)
			}
			return nil
		},
	}
	cmd.Flags().StringArrayVar(&inputs, "input", nil, "an input variable KEY=VALUE, repeatable; VALUE is JSON when it parses as JSON, else a string")
	r.flags(cmd)
	return cmd
}

func newRunsCommand() *cobra.Command {
	var r remote
	var q arhttp.RunQuery
	cmd := &cobra.Command{
		Use:   "runs",
		Short: "List the runs of pipelines, newest first, from a running server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validLimit(cmd, q.Limit); err != nil {
				return err
			}
			c, err := r.client(cmd)
			if err != nil {
				return err
			}
			list, err := call(cmd, c, func(ctx context.Context) (*arhttp.RunList, error) { return c.Runs(ctx, q) })
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if r.asJSON {
				return printJSON(out, list)
			}
			return printRuns(out, list)
		},
	}
	cmd.Flags().StringVar(&q.Pipeline, "pipeline", "", "only the runs of this pipeline")
	cmd.Flags().StringVar(&q.Status, "status", "", "only runs with this status: queued, running, halted, completed, failed, aborted")
	cmd.Flags().StringVar(&q.Before, "before", "", "list the runs after this run id")
	limitFlag(cmd, &q.Limit)
	r.flags(cmd)
	show := newRunStatusCommand()
	show.Use, show.Short = "show RUN", "Show one run with its step runs, attempts and child runs (as run-status does)"
	show.Args = usageArgs(cobra.ExactArgs(1)) // subcommands are not wrapped by the root's loop
	cmd.AddCommand(show)
	return cmd
}

func printRuns(out io.Writer, list *arhttp.RunList) error {
	if len(list.Runs) == 0 {
		fmt.Fprintln(out, "no runs")
		return nil
	}
	w := newTable(out)
	row(w, "ID", "PIPELINE", "STATUS", "STARTED", "DURATION", "ERROR")
	for _, run := range list.Runs {
		row(w, run.ID, run.Pipeline, string(run.Status), fmtTime(run.StartedAt), fmtMS(run.DurationMS), clipTo(run.Error, lastWidth))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	if list.NextBefore != "" {
		fmt.Fprintf(out, "more: agentrunner runs --before %s\n", list.NextBefore)
	}
	return nil
}

func newRunStatusCommand() *cobra.Command {
	var r remote
	cmd := &cobra.Command{
		Use:   "run-status RUN",
		Short: "Show one run with its step runs and their attempts, from a running server",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := r.client(cmd)
			if err != nil {
				return err
			}
			d, err := call(cmd, c, func(ctx context.Context) (*arhttp.RunDetail, error) { return c.Run(ctx, args[0]) })
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if r.asJSON {
				return printJSON(out, d)
			}
			return printRun(out, d)
		},
	}
	r.flags(cmd)
	return cmd
}

func printRun(out io.Writer, d *arhttp.RunDetail) error {
	run := d.Run
	fmt.Fprintf(out, "run:       %s\n", run.ID)
	fmt.Fprintf(out, "pipeline:  %s\n", run.Pipeline)
	fmt.Fprintf(out, "status:    %s\n", run.Status)
	fmt.Fprintf(out, "started:   %s\n", fmtTime(run.StartedAt))
	fmt.Fprintf(out, "ended:     %s\n", orNone(fmtTimePtr(run.EndedAt)))
	fmt.Fprintf(out, "duration:  %s\n", fmtMS(run.DurationMS))
	if len(run.Inputs) > 0 {
		fmt.Fprintf(out, "inputs:    %s\n", clipTo(details(run.Inputs), lastWidth))
	}
	if run.Error != "" {
		fmt.Fprintf(out, "error:     %s\n", oneLine(run.Error))
	}
	if run.Parent != "" {
		fmt.Fprintf(out, "parent:    %s\n", run.Parent)
	}
	fmt.Fprintln(out)
	if len(d.Steps) == 0 {
		fmt.Fprintln(out, "no step runs")
	} else {
		w := newTable(out)
		row(w, "STEP", "VISIT", "STATUS", "LABEL", "ATTEMPTS", "OPENED", "DETAIL")
		for _, sr := range d.Steps {
			row(w, sr.Step, strconv.Itoa(sr.Visit), string(sr.Status), sr.Label, attemptsCell(sr.Attempts), fmtTime(sr.OpenedAt), clipTo(stepDetail(sr), lastWidth))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	return printChildren(out, d.Children)
}

// printChildren lists the runs a run started (its sub-agents' runs), with
// their tasks and what their attempts spent (TOKENS: input/output, CALLS:
// tool calls); nothing for a run that
// started none.
func printChildren(out io.Writer, children []arhttp.ChildRun) error {
	if len(children) == 0 {
		return nil
	}
	fmt.Fprintf(out, "\nchildren: %d\n", len(children))
	w := newTable(out)
	row(w, "CHILD", "PIPELINE", "STATUS", "TASK", "BUDGET", "ATTEMPTS", "TOKENS", "CALLS")
	for _, c := range children {
		budget := ""
		if c.ToolBudget > 0 {
			budget = strconv.Itoa(c.ToolBudget)
		}
		row(w, c.ID, c.Pipeline, string(c.Status), clipTo(c.TaskName, 40), budget, strconv.Itoa(c.Attempts),
			fmt.Sprintf("%d/%d", c.InputTokens, c.OutputTokens), strconv.Itoa(c.ToolCalls))
	}
	return w.Flush()
}

// attemptsCell shows a step run's attempts as "1:failed(timeout) 2:succeeded".
func attemptsCell(as []arhttp.AttemptSummary) string {
	var parts []string
	for _, a := range as {
		s := strconv.Itoa(a.Number) + ":" + string(a.Status)
		if a.ErrorClass != "" {
			s += "(" + string(a.ErrorClass) + ")"
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, " ")
}

// stepDetail is a step run's error, its gate's decision, or its SIGNAL
// BLOCK.
func stepDetail(sr arhttp.StepRun) string {
	if g := sr.Signal; g != nil && sr.Error == "" {
		return fmt.Sprintf("signal %s: confidence %d, risk %s, next %s", g.Step, g.Confidence, g.Risk, g.Next)
	}
	if d := sr.Decision; d != nil {
		s := fmt.Sprintf("%s by %s", d.Action, d.Operator)
		if d.To != "" {
			s += " to " + d.To
		}
		if d.Comment != "" {
			s += ": " + d.Comment
		}
		return s
	}
	return sr.Error
}

func newGatesCommand() *cobra.Command {
	var r remote
	cmd := &cobra.Command{
		Use:   "gates",
		Short: "List the gates that wait for an operator's decision, from a running server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := r.client(cmd)
			if err != nil {
				return err
			}
			list, err := call(cmd, c, func(ctx context.Context) (*arhttp.GateList, error) { return c.Gates(ctx) })
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if r.asJSON {
				return printJSON(out, list)
			}
			if len(list.Gates) == 0 {
				fmt.Fprintln(out, "no gates waiting")
				return nil
			}
			w := newTable(out)
			row(w, "RUN", "PIPELINE", "STEP", "VISIT", "OPENED", "TIMEOUT")
			for _, g := range list.Gates {
				timeout := fmtTimePtr(g.TimeoutAt)
				if timeout != "" {
					timeout += " then " + g.Default
				}
				row(w, g.Run, g.Pipeline, g.Step, strconv.Itoa(g.Visit), fmtTime(g.OpenedAt), timeout)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			printQuestions(out, list.Gates)
			return nil
		},
	}
	r.flags(cmd)
	return cmd
}

// printQuestions prints what the state agents waiting at gates asked,
// and how to answer.
func printQuestions(out io.Writer, gates []arhttp.Gate) {
	for _, g := range gates {
		if g.Question == "" && g.Why == "" {
			continue
		}
		fmt.Fprintf(out, "\n%s %s: %s\n", g.Run, g.Step, g.Why)
		if g.Question != "" {
			fmt.Fprintf(out, "  question: %s\n", g.Question)
		}
		for _, o := range g.Options {
			fmt.Fprintf(out, "    - %s\n", o)
		}
		fmt.Fprintf(out, "  answer:  agentrunner answer %s %s -m \"…\"   (or approve / reject)\n", g.Run, g.Step)
	}
}

// newAnswerCommand answers the question of a state agent waiting at a
// gate: the step runs again with the answer in its prompt.
func newAnswerCommand() *cobra.Command {
	var r remote
	var answer string
	cmd := &cobra.Command{
		Use:   "answer RUN STEP -m ANSWER",
		Short: "Answer the question of an agent waiting at a gate: its step runs again with the answer in its prompt",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(answer) == "" {
				return usageError(errors.New("answer needs -m ANSWER, the answer the agent is given"))
			}
			d := arhttp.GateDecision{Decision: agentrunner.DecisionRoute, To: args[1], Comment: answer}
			return override(cmd, &r, "answer", func(ctx context.Context, c *arhttp.Client) (*arhttp.Command, error) {
				return c.Decide(ctx, args[0], args[1], d)
			})
		},
	}
	cmd.Flags().StringVarP(&answer, "message", "m", "", "the answer")
	r.flags(cmd)
	cmd.Long = cmd.Short + ".\n\nIt is the decision to route the gate's step to itself, with the answer as its comment:\nthe next visit's prompt holds the question and the answer. `agentrunner gates` shows the questions."
	return cmd
}

// newDecideCommand returns the command of one gate decision.
func newDecideCommand(action agentrunner.DecisionAction, short string) *cobra.Command {
	var r remote
	var d arhttp.GateDecision
	cmd := &cobra.Command{
		Use:   string(action) + " RUN STEP",
		Short: short,
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			d.Decision = action
			if action == agentrunner.DecisionRoute && d.To == "" {
				return usageError(errors.New("route needs --to STEP, the step to send the run to"))
			}
			return override(cmd, &r, string(action), func(ctx context.Context, c *arhttp.Client) (*arhttp.Command, error) {
				return c.Decide(ctx, args[0], args[1], d)
			})
		},
	}
	reasonFlag(cmd, &d.Comment, "m", "message")
	if action == agentrunner.DecisionRoute {
		cmd.Flags().StringVar(&d.To, "to", "", "the step of the pipeline to send the run to")
	}
	r.flags(cmd)
	cmd.Long += "\n\nThe decision is a durable command attributed to the API key's name; a gate takes one\ndecision, a second one is refused. `agentrunner audit` shows what the scheduler did."
	return cmd
}

func newAbortRunCommand() *cobra.Command {
	var r remote
	var reason string
	cmd := &cobra.Command{
		Use:   "abort-run RUN",
		Short: "Abort a run of a pipeline: its running attempts are stopped and it ends aborted",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return override(cmd, &r, "abort-run", func(ctx context.Context, c *arhttp.Client) (*arhttp.Command, error) {
				return c.AbortRun(ctx, args[0], reason)
			})
		},
	}
	reasonFlag(cmd, &reason, "")
	r.flags(cmd)
	return cmd
}

func newResumeRunCommand() *cobra.Command {
	var r remote
	var reason string
	cmd := &cobra.Command{
		Use:   "resume-run RUN",
		Short: "Resume a halted run of a pipeline: the step that failed runs again with a new round of retries",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			return override(cmd, &r, "resume-run", func(ctx context.Context, c *arhttp.Client) (*arhttp.Command, error) {
				return c.ResumeRun(ctx, args[0], reason)
			})
		},
	}
	reasonFlag(cmd, &reason, "")
	r.flags(cmd)
	return cmd
}

func newAttemptCommand() *cobra.Command {
	var r remote
	var validation bool
	cmd := &cobra.Command{
		Use:   "attempt RUN STEP N",
		Short: "Print the prompt an attempt's agent saw, or with --validation why its output was rejected, as the store committed it, from a running server",
		Args:  cobra.ExactArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			n, err := strconv.Atoi(args[2])
			if err != nil || n < 1 {
				return usageError(fmt.Errorf("N: want an attempt number from 1, got %q", clipCell(args[2])))
			}
			c, err := r.client(cmd)
			if err != nil {
				return err
			}
			read := c.AttemptPrompt
			if validation {
				read = c.AttemptValidation
			}
			data, err := call(cmd, c, func(ctx context.Context) ([]byte, error) { return read(ctx, args[0], args[1], n) })
			if err != nil {
				return err
			}
			_, err = cmd.OutOrStdout().Write(data)
			return err
		},
	}
	cmd.Flags().BoolVar(&validation, "validation", false, "print the validation report of the attempt's rejected output instead of its prompt")
	serverFlag(cmd, &r.server)
	configFlag(cmd, &r.config)
	cmd.Long = cmd.Short + "." + remoteLong
	return cmd
}
