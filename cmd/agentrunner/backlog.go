package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentrunner/agentrunner/backlog"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/spf13/cobra"
)

// backlogCommands are the remote commands of spec 5's backlog: items and
// their tasks, read from and added through a running server.
func backlogCommands() []*cobra.Command {
	return []*cobra.Command{newBacklogCommand(), newTasksCommand()}
}

func newBacklogCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "backlog",
		Short: "Add backlog items and show them with their states and tasks, through a running server",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newBacklogAddCommand(), newBacklogListCommand(), newBacklogShowCommand())
	return cmd
}

func newTasksCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "tasks",
		Short: "Show the tasks of backlog items with their states, branches and worktrees, through a running server",
		Args:  cobra.NoArgs,
		RunE:  func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newTasksListCommand(), newTasksShowCommand())
	return cmd
}

func newBacklogAddCommand() *cobra.Command {
	var r remote
	var req arhttp.AddBacklogItemRequest
	cmd := &cobra.Command{
		Use:   "add --title TITLE --repo PATH",
		Short: "Add a backlog item about a git repository: a run of the backlog pipeline starts with it",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			// Checked here, not by cobra, so that a missing flag is a
			// usage error like a bad one.
			switch {
			case strings.TrimSpace(req.Title) == "":
				return usageError(errors.New("--title is required: what the item is about"))
			case strings.TrimSpace(req.Repo) == "":
				return usageError(errors.New("--repo is required: the git repository the item is about"))
			}
			// The server resolves nothing from its own folder: a
			// relative path means the one here.
			repo, err := filepath.Abs(req.Repo)
			if err != nil {
				return usageError(fmt.Errorf("--repo %s: %v", req.Repo, err))
			}
			body := req
			body.Repo = repo
			c, err := r.client(cmd)
			if err != nil {
				return err
			}
			added, err := call(cmd, c, func(ctx context.Context) (*arhttp.AddedBacklogItem, error) { return c.AddBacklogItem(ctx, body) })
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			switch {
			case r.asJSON:
				return printJSON(out, added)
			case added.Item != nil:
				printAdded(out, added.Item)
			default:
				fmt.Fprintf(cmd.ErrOrStderr(), "item requested: command %d; the scheduler has not started its run yet, `agentrunner audit` shows its id when it does\n", added.Command.ID)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&req.Title, "title", "", "the item's title (required)")
	cmd.Flags().StringVar(&req.Description, "description", "", "what the item is about; taken as given, so pass several lines as several lines ($'- first\\n- second' in bash)")
	cmd.Flags().StringVar(&req.AcceptanceCriteria, "acceptance", "", "the item's acceptance criteria")
	cmd.Flags().StringVar(&req.Priority, "priority", "", "the item's priority, e.g. high")
	cmd.Flags().StringVar(&req.Repo, "repo", "", "the git repository the item is about, on the server's machine; relative to the current folder (required)")
	cmd.Flags().StringVar(&req.BaseBranch, "base-branch", "", "the branch the tasks' branches start from (default: the branch checked out in the repository)")
	r.flags(cmd)
	cmd.Long += "\n\nThe server completes the item from the repository (its top-level folder, the branch checked out,\nthe language and framework it detects) and refuses one it cannot work on, naming the field.\nThe start is a command attributed to the API key's name, as `agentrunner audit` shows."
	return cmd
}

// printAdded prints an item just added: what the server made of it and
// where to look next.
func printAdded(out io.Writer, it *backlog.ItemView) {
	fmt.Fprintf(out, "added backlog item %s: %s\n", it.ID, oneLine(it.Title))
	fmt.Fprintf(out, "repo:         %s\n", it.Repo)
	fmt.Fprintf(out, "base branch:  %s\n", it.BaseBranch)
	fmt.Fprintf(out, "context:      %s\n", contextText(it.Context))
	fmt.Fprintf(out, "status:       %s\n", progressText(it.Progress))
	show := "agentrunner backlog show " + it.ID
	width := len(show)
	fmt.Fprintln(out, "\nnext:")
	fmt.Fprintf(out, "  %-*s   # its states and its tasks\n", width, show)
	fmt.Fprintf(out, "  %-*s   # what waits for a person\n", width, "agentrunner gates")
}

// contextText shows what was detected of a repository.
func contextText(c backlog.Context) string {
	return fmt.Sprintf("language %s, framework %s", orDetected(c.Language), orDetected(c.Framework))
}

func orDetected(s string) string {
	if s == "" {
		return "(none detected)"
	}
	return s
}

// statesText shows the states a run is in, and that it waits at a gate.
func statesText(p backlog.Progress) string {
	s := strings.Join(p.States, ", ")
	if p.Waiting {
		s += " (waiting)"
	}
	return strings.TrimSpace(s)
}

// progressText shows a run's status with its states.
func progressText(p backlog.Progress) string {
	if states := statesText(p); states != "" {
		return fmt.Sprintf("%s: %s", p.Status, states)
	}
	return string(p.Status)
}

func newBacklogListCommand() *cobra.Command {
	var r remote
	var f arhttp.BacklogFilter
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the backlog items, newest first, with their states",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validLimit(cmd, f.Limit); err != nil {
				return err
			}
			return fetchAndPrint(cmd, &r, func(ctx context.Context, c *arhttp.Client) (*arhttp.BacklogList, error) { return c.Backlog(ctx, f) },
				func(out io.Writer, list *arhttp.BacklogList) error { return printBacklog(out, list.Items) })
		},
	}
	cmd.Flags().StringVar(&f.Status, "status", "", "only items whose run has this status: queued, running, halted, completed, failed, aborted")
	limitFlag(cmd, &f.Limit)
	r.flags(cmd)
	return cmd
}

func printBacklog(out io.Writer, items []*backlog.ItemView) error {
	if len(items) == 0 {
		fmt.Fprintln(out, "no backlog items")
		return nil
	}
	w := newTable(out)
	row(w, "ID", "STATUS", "STATES", "TITLE", "STARTED")
	for _, it := range items {
		row(w, it.ID, string(it.Status), statesText(it.Progress), clipCell(it.Title), fmtTime(it.StartedAt))
	}
	return w.Flush()
}

func newBacklogShowCommand() *cobra.Command {
	var r remote
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one backlog item with its tasks in execution order",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return fetchAndPrint(cmd, &r, func(ctx context.Context, c *arhttp.Client) (*backlog.ItemView, error) {
				return c.BacklogItem(ctx, args[0])
			}, printItem)
		},
	}
	r.flags(cmd)
	return cmd
}

func printItem(out io.Writer, it *backlog.ItemView) error {
	fmt.Fprintf(out, "item:         %s\n", it.ID)
	fmt.Fprintf(out, "title:        %s\n", oneLine(it.Title))
	fmt.Fprintf(out, "priority:     %s\n", orNone(it.Priority))
	fmt.Fprintf(out, "repo:         %s\n", it.Repo)
	fmt.Fprintf(out, "base branch:  %s\n", it.BaseBranch)
	fmt.Fprintf(out, "context:      %s\n", contextText(it.Context))
	printProgress(out, it.Progress)
	printText(out, "description", it.Description)
	printText(out, "acceptance criteria", it.AcceptanceCriteria)
	fmt.Fprintln(out)
	if len(it.Tasks) == 0 {
		fmt.Fprintln(out, "no tasks yet")
		return nil
	}
	fmt.Fprintf(out, "tasks: %d\n", len(it.Tasks))
	w := newTable(out)
	row(w, "ORDER", "TASK RUN", "STATUS", "STATES", "BRANCH", "TITLE")
	for _, t := range it.Tasks {
		row(w, strconv.Itoa(t.ExecutionOrder), t.ID, string(t.Status), statesText(t.Progress), t.Branch, clipTo(t.Title, lastWidth))
	}
	if err := w.Flush(); err != nil {
		return err
	}
	fmt.Fprintln(out, "a task's step runs and prompts: agentrunner run-status TASK-RUN")
	return nil
}

// printProgress prints where a run stands, and how to answer a gate it
// waits at.
func printProgress(out io.Writer, p backlog.Progress) {
	fmt.Fprintf(out, "status:       %s\n", p.Status)
	fmt.Fprintf(out, "states:       %s\n", orNone(statesText(p)))
	if p.Waiting {
		fmt.Fprintln(out, "              `agentrunner gates` shows what it waits for")
	}
	fmt.Fprintf(out, "started:      %s\n", fmtTime(p.StartedAt))
	fmt.Fprintf(out, "ended:        %s\n", orNone(fmtTimePtr(p.EndedAt)))
	if p.Error != "" {
		fmt.Fprintf(out, "error:        %s\n", oneLine(p.Error))
	}
}

// printText prints a free text under its name, indented, as it was given
// (several lines stay several lines); nothing when it is empty.
func printText(out io.Writer, name, text string) {
	if strings.TrimSpace(text) == "" {
		return
	}
	fmt.Fprintf(out, "%s:\n", name)
	for line := range strings.Lines(strings.TrimRight(text, "\n")) {
		fmt.Fprintf(out, "  %s", line)
	}
	fmt.Fprintln(out)
}

func newTasksListCommand() *cobra.Command {
	var r remote
	var f arhttp.TaskFilter
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List the tasks of backlog items, newest first: every item's, or one item's",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validLimit(cmd, f.Limit); err != nil {
				return err
			}
			return fetchAndPrint(cmd, &r, func(ctx context.Context, c *arhttp.Client) (*arhttp.TaskList, error) { return c.Tasks(ctx, f) },
				func(out io.Writer, list *arhttp.TaskList) error { return printTasks(out, list.Tasks) })
		},
	}
	cmd.Flags().StringVar(&f.Item, "item", "", "only the tasks of this backlog item")
	cmd.Flags().StringVar(&f.Status, "status", "", "only tasks whose run has this status: queued, running, halted, completed, failed, aborted")
	limitFlag(cmd, &f.Limit)
	r.flags(cmd)
	return cmd
}

func printTasks(out io.Writer, tasks []*backlog.TaskView) error {
	if len(tasks) == 0 {
		fmt.Fprintln(out, "no tasks")
		return nil
	}
	w := newTable(out)
	row(w, "ID", "ITEM", "ORDER", "STATUS", "STATES", "BRANCH", "TITLE")
	for _, t := range tasks {
		row(w, t.ID, t.Item.ID, strconv.Itoa(t.ExecutionOrder), string(t.Status), statesText(t.Progress), t.Branch, clipTo(t.Title, lastWidth))
	}
	return w.Flush()
}

func newTasksShowCommand() *cobra.Command {
	var r remote
	cmd := &cobra.Command{
		Use:   "show ID",
		Short: "Show one task of a backlog item: its item, order, branch, worktree and state",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return fetchAndPrint(cmd, &r, func(ctx context.Context, c *arhttp.Client) (*backlog.TaskView, error) { return c.Task(ctx, args[0]) },
				func(out io.Writer, t *backlog.TaskView) error { printTask(out, t); return nil })
		},
	}
	r.flags(cmd)
	return cmd
}

func printTask(out io.Writer, t *backlog.TaskView) {
	fmt.Fprintf(out, "task:         %s\n", t.ID)
	fmt.Fprintf(out, "title:        %s\n", oneLine(t.Title))
	fmt.Fprintf(out, "item:         %s (%s)\n", t.Item.ID, oneLine(t.Item.Title))
	fmt.Fprintf(out, "order:        %d\n", t.ExecutionOrder)
	fmt.Fprintf(out, "branch:       %s (from %s)\n", t.Branch, t.BaseBranch)
	fmt.Fprintf(out, "worktree:     %s\n", t.Worktree)
	printProgress(out, t.Progress)
	printText(out, "description", t.Description)
	fmt.Fprintf(out, "\nits step runs and prompts: agentrunner run-status %s\n", t.ID)
}

// fetchAndPrint is the body of a client command that reads one thing:
// it asks the server, then prints the answer as JSON (--json) or as text.
func fetchAndPrint[T any](cmd *cobra.Command, r *remote, fetch func(context.Context, *arhttp.Client) (T, error), text func(io.Writer, T) error) error {
	c, err := r.client(cmd)
	if err != nil {
		return err
	}
	v, err := call(cmd, c, func(ctx context.Context) (T, error) { return fetch(ctx, c) })
	if err != nil {
		return err
	}
	if r.asJSON {
		return printJSON(cmd.OutOrStdout(), v)
	}
	return text(cmd.OutOrStdout(), v)
}
