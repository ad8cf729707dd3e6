package main

import (
	"fmt"
	"strings"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/memory"
	"github.com/agentrunner/agentrunner/workspace"
	"github.com/spf13/cobra"
)

func newMemoryCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "memory",
		Short: "Show, append to and search the agents' memories (in the workspace's state database)",
		Long: `memory reads and writes the agents' memories: the entries that agents append with the
memory_append tool, kept in the state database, which indexes them, and in each agent's
memory file (<artifacts>/<agent>/memory.md), a view that shows each entry once.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newMemoryShowCommand(), newMemoryAppendCommand(), newMemorySearchCommand())
	return cmd
}

// withMemory opens the workspace's memories for fn.
func withMemory(cmd *cobra.Command, path string, fn func(l *memory.Log, ws *workspace.Workspace) error) error {
	ws, err := loadWorkspace(path)
	if err != nil {
		return err
	}
	store, err := openStore(cmd.Context(), ws.Config)
	if err != nil {
		return failureError(err)
	}
	defer store.Close()
	l, err := memoryLog(ws, store, agentrunner.SystemClock{})
	if err != nil {
		return failureError(err)
	}
	return fn(l, ws)
}

// agentArg checks that name is an agent of the workspace.
func agentArg(ws *workspace.Workspace, name string) error {
	if ws.Agents[name] == nil {
		return usageError(fmt.Errorf("%q is not an agent of the workspace", name))
	}
	return nil
}

func newMemoryShowCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "show AGENT",
		Short: "Print an agent's memory entries, oldest first",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withMemory(cmd, path, func(l *memory.Log, ws *workspace.Workspace) error {
				if err := agentArg(ws, args[0]); err != nil {
					return err
				}
				entries, err := l.Entries(cmd.Context(), args[0])
				if err != nil {
					return failureError(err)
				}
				out := cmd.OutOrStdout()
				if len(entries) == 0 {
					fmt.Fprintf(out, "%s has no memory entries\n", args[0])
				}
				for _, e := range entries {
					fmt.Fprintf(out, "#%d %s%s\n%s\n\n", e.ID, e.CreatedAt.UTC().Format("2006-01-02 15:04:05Z"), by(e), e.Text)
				}
				return nil
			})
		},
	}
	configFlag(cmd, &path)
	return cmd
}

// by says which cycle and step appended an entry, if an agent did.
func by(e *agentrunner.MemoryEntry) string {
	if e.RunID == "" {
		return ""
	}
	return fmt.Sprintf(" (cycle %s, step %s)", e.RunID, e.Step)
}

func newMemoryAppendCommand() *cobra.Command {
	var path string
	cmd := &cobra.Command{
		Use:   "append AGENT TEXT",
		Short: "Append a note to an agent's memory (the database, then its memory file)",
		Args:  usageArgs(cobra.ExactArgs(2)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withMemory(cmd, path, func(l *memory.Log, ws *workspace.Workspace) error {
				if err := agentArg(ws, args[0]); err != nil {
					return err
				}
				e, err := l.Append(cmd.Context(), agentrunner.MemoryEntry{Agent: args[0], Text: args[1]})
				if e == nil {
					return failureError(err)
				}
				fmt.Fprintf(cmd.OutOrStdout(), "appended entry %d to the memory of %s (%s)\n", e.ID, e.Agent, ws.Layout.Memory(e.Agent))
				return failureError(err)
			})
		},
	}
	configFlag(cmd, &path)
	return cmd
}

func newMemorySearchCommand() *cobra.Command {
	var path string
	var agents []string
	var limit int
	cmd := &cobra.Command{
		Use:   "search QUERY",
		Short: "Search the memory entries of every agent, or of those --agent names, best match first",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			return withMemory(cmd, path, func(l *memory.Log, ws *workspace.Workspace) error {
				for _, a := range agents {
					if err := agentArg(ws, a); err != nil {
						return err
					}
				}
				hits, err := l.Search(cmd.Context(), args[0], agents, limit)
				if agentrunner.ErrorCode(err) == agentrunner.EINVALID {
					return usageError(err)
				}
				if err != nil {
					return failureError(err)
				}
				out := cmd.OutOrStdout()
				if len(hits) == 0 {
					fmt.Fprintln(out, "no entry matches")
				}
				for _, h := range hits {
					fmt.Fprintf(out, "#%-5d %-12s %s%s\n       %s\n", h.Entry.ID, h.Entry.Agent, h.Entry.CreatedAt.UTC().Format("2006-01-02 15:04Z"), by(h.Entry), strings.ReplaceAll(h.Snippet, "\n", " "))
				}
				return nil
			})
		},
	}
	cmd.Flags().StringArrayVar(&agents, "agent", nil, "search only this agent's memory (repeatable)")
	cmd.Flags().IntVar(&limit, "limit", 0, "at most this many entries (default 20, at most 100)")
	configFlag(cmd, &path)
	return cmd
}
