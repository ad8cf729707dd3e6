package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/agentrunner/agentrunner"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/agentrunner/agentrunner/todo"
	"github.com/spf13/cobra"
)

func newTodosCommand() *cobra.Command {
	var path string
	var history, asJSON bool
	cmd := &cobra.Command{
		Use:   "todos RUN",
		Short: "Print the to-do list a run's lead agent keeps: the newest version, or every version",
		Long: `todos reads the to-do list of a run from the workspace's state database (also while serve
runs): the plan the run's lead agent writes with todo_list_write, one line per to-do,
"[status] id  title", with its note below it. Every write of the agent is a new version;
--history prints them all, oldest first.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			runID := args[0]
			cfg, err := loadConfig(path)
			if err != nil {
				return err
			}
			// A read creates no database.
			if !fileExists(cfg.Abs(cfg.State.Path)) {
				return failureError(fmt.Errorf("no run %s: the workspace has no state database yet", runID))
			}
			store, err := openStore(cmd.Context(), cfg)
			if err != nil {
				return err
			}
			defer store.Close()
			ctx := cmd.Context()
			if _, err := store.Run(ctx, runID); err != nil {
				if agentrunner.ErrorCode(err) == agentrunner.ENOTFOUND {
					err = fmt.Errorf("no run %s in the state database", runID)
				}
				return failureError(err)
			}
			svc := todo.NewService(store, todo.Options{})
			out := cmd.OutOrStdout()
			if history {
				ls, err := svc.History(ctx, runID)
				if err != nil {
					return failureError(err)
				}
				if asJSON {
					return printJSON(out, arhttp.TodoHistoryOf(runID, ls))
				}
				if len(ls) == 0 {
					fmt.Fprintf(out, "run %s has no to-do list yet\n", runID)
				}
				for i, l := range ls {
					if i > 0 {
						fmt.Fprintln(out)
					}
					printTodos(out, l)
				}
				return nil
			}
			l, err := svc.Current(ctx, runID)
			if err != nil {
				return failureError(err)
			}
			if asJSON {
				return printJSON(out, arhttp.TodoListOf(l))
			}
			if l.Version == 0 {
				fmt.Fprintf(out, "run %s has no to-do list yet\n", runID)
				return nil
			}
			printTodos(out, l)
			return nil
		},
	}
	cmd.Flags().BoolVar(&history, "history", false, "every version of the list, oldest first")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON, as GET /api/runs/{run}/todos answers")
	configFlag(cmd, &path)
	return cmd
}

// printTodos prints a version of a list: a line saying which and who
// wrote it, then each to-do as "[status] id  title", its note indented
// below it.
func printTodos(out io.Writer, l *agentrunner.TodoList) {
	by := ""
	if l.Agent != "" {
		by = " by " + l.Agent
		if l.Step != "" {
			by += " (step " + l.Step + ")"
		}
	}
	fmt.Fprintf(out, "run %s, to-do list version %d, written %s%s\n", l.RunID, l.Version, fmtTime(l.WrittenAt), by)
	if len(l.Todos) == 0 {
		fmt.Fprintln(out, "  (no to-dos)")
	}
	for _, t := range l.Todos {
		fmt.Fprintf(out, "[%s] %s  %s\n", t.Status, t.ID, t.Title)
		if t.Note != "" {
			fmt.Fprintf(out, "    %s\n", strings.ReplaceAll(t.Note, "\n", "\n    "))
		}
	}
}
