package main

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/capsule"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/spf13/cobra"
)

// The bounds of capsule list's and capsule search's --limit, as the API's,
// and the store's default page of a list.
const (
	capsuleListMax     = 1000
	capsuleSearchMax   = 100
	capsuleListDefault = 100
)

func newCapsuleCommand() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "capsule",
		Short: "List, show, search, export and import the capsules of the workspace's state database",
		Long: `capsule reads the capsules (hand-off notes agents and sessions leave for the next) of the
workspace's state database directly, also while serve runs, and imports capsules into it.
A workspace without a state database yet has no capsules; only import creates one.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error { return cmd.Help() },
	}
	cmd.AddCommand(newCapsuleListCommand(), newCapsuleShowCommand(), newCapsuleSearchCommand(),
		newCapsuleExportCommand(), newCapsuleImportCommand())
	return cmd
}

// capsuleFilterFlags are the flags that select capsules.
type capsuleFilterFlags struct {
	workspace, runID, phase, role, tag string
	includeDeleted                     bool
}

func (f *capsuleFilterFlags) add(cmd *cobra.Command) {
	cmd.Flags().StringVar(&f.workspace, "workspace", "", "only the capsules of this workspace")
	cmd.Flags().StringVar(&f.runID, "run-id", "", "only the capsules of this run")
	cmd.Flags().StringVar(&f.phase, "phase", "", "only the capsules of this phase")
	cmd.Flags().StringVar(&f.role, "role", "", "only the capsules of this role")
	cmd.Flags().StringVar(&f.tag, "tag", "", "only the capsules that have this tag")
	cmd.Flags().BoolVar(&f.includeDeleted, "include-deleted", false, "deleted capsules too")
}

func (f *capsuleFilterFlags) filter() agentrunner.CapsuleFilter {
	return agentrunner.CapsuleFilter{Workspace: f.workspace, RunID: f.runID, Phase: f.phase, Role: f.role, Tag: f.tag, IncludeDeleted: f.includeDeleted}
}

// capsuleLimit checks --limit: 0 when not given, else from 1 to most.
func capsuleLimit(cmd *cobra.Command, n, most int) error {
	if cmd.Flags().Changed("limit") && (n < 1 || n > most) {
		return usageError(fmt.Errorf("--limit must be from 1 to %d, got %d", most, n))
	}
	return nil
}

// openCapsules opens the capsule operations on the workspace's state
// database, and returns how to close it. A read of a workspace that has no
// database yet gets a nil service and creates nothing; create opens (and
// so creates) it whatever.
func openCapsules(cmd *cobra.Command, path string, create bool) (*capsule.Service, func(), error) {
	cfg, err := loadConfig(path)
	if err != nil {
		return nil, nil, err
	}
	if !create && !fileExists(cfg.Abs(cfg.State.Path)) {
		return nil, func() {}, nil
	}
	store, err := openStore(cmd.Context(), cfg)
	if err != nil {
		return nil, nil, err
	}
	return capsule.NewService(store, capsule.Options{MaxChars: cfg.Capsules.MaxChars}), func() { store.Close() }, nil
}

func newCapsuleListCommand() *cobra.Command {
	var path string
	var f capsuleFilterFlags
	var limit int
	var before int64
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "list",
		Short: "List capsules, newest first, without their texts",
		Args:  usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := capsuleLimit(cmd, limit, capsuleListMax); err != nil {
				return err
			}
			if before < 0 {
				return usageError(fmt.Errorf("--before must be a capsule id, got %d", before))
			}
			svc, done, err := openCapsules(cmd, path, false)
			if err != nil {
				return err
			}
			defer done()
			filter := f.filter()
			filter.Limit, filter.Before = limit, before
			var cs []*agentrunner.Capsule
			if svc != nil {
				if cs, err = svc.List(cmd.Context(), filter); err != nil {
					return failureError(err)
				}
			}
			list := arhttp.CapsuleList{Capsules: make([]capsule.View, len(cs))}
			for i, c := range cs {
				list.Capsules[i] = capsule.ViewOf(c, false)
			}
			if len(cs) > 0 && len(cs) == cmp.Or(limit, capsuleListDefault) {
				list.NextBefore = cs[len(cs)-1].ID
			}
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, list)
			}
			if len(cs) == 0 {
				fmt.Fprintln(out, "no capsules")
				return nil
			}
			w := newTable(out)
			head := []string{"ID", "WORKSPACE", "NAME", "VERSION", "RUN", "PHASE", "ROLE", "TAGS", "UPDATED"}
			if f.includeDeleted {
				head = append(head, "DELETED")
			}
			row(w, head...)
			for _, v := range list.Capsules {
				cells := []string{strconv.FormatInt(v.ID, 10), clipCell(v.Workspace), clipCell(v.Name), strconv.Itoa(v.Version),
					v.RunID, v.Phase, v.Role, clipCell(strings.Join(v.Tags, ",")), fmtTime(v.UpdatedAt)}
				if f.includeDeleted {
					cells = append(cells, fmtTimePtr(v.DeletedAt))
				}
				row(w, cells...)
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if list.NextBefore != 0 {
				fmt.Fprintf(out, "more: the same command with --before %d\n", list.NextBefore)
			}
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().IntVar(&limit, "limit", 0, fmt.Sprintf("how many to list, from 1 to %d (default 100)", capsuleListMax))
	cmd.Flags().Int64Var(&before, "before", 0, "list the capsules with ids below this one (the next page)")
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON, as GET /api/capsules answers")
	configFlag(cmd, &path)
	return cmd
}

// capsuleRef reads a capsule's reference: an id, or WORKSPACE/NAME (split
// at the first slash).
func capsuleRef(arg string) (capsule.Ref, error) {
	if id, err := strconv.ParseInt(arg, 10, 64); err == nil {
		if id < 1 {
			return capsule.Ref{}, usageError(fmt.Errorf("capsule id must be positive, got %d", id))
		}
		return capsule.Ref{ID: id}, nil
	}
	workspace, name, ok := strings.Cut(arg, "/")
	if !ok || workspace == "" || name == "" {
		return capsule.Ref{}, usageError(fmt.Errorf("want a capsule id or WORKSPACE/NAME, got %q", clipCell(arg)))
	}
	return capsule.Ref{Workspace: workspace, Name: name}, nil
}

func newCapsuleShowCommand() *cobra.Command {
	var path string
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "show ID | WORKSPACE/NAME",
		Short: "Print a capsule's fields, then its text: by id (live or deleted), or the live capsule of a workspace by name",
		Args:  usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			ref, err := capsuleRef(args[0])
			if err != nil {
				return err
			}
			svc, done, err := openCapsules(cmd, path, false)
			if err != nil {
				return err
			}
			defer done()
			if svc == nil {
				return failureError(fmt.Errorf("capsule %s not found: the workspace has no state database yet", ref))
			}
			var c *agentrunner.Capsule
			if ref.ID > 0 {
				c, err = svc.FetchID(cmd.Context(), ref.ID)
			} else {
				c, err = svc.Fetch(cmd.Context(), ref.Workspace, ref.Name)
			}
			if err != nil {
				return failureError(err)
			}
			v := capsule.ViewOf(c, true)
			out := cmd.OutOrStdout()
			if asJSON {
				return printJSON(out, v)
			}
			printCapsule(out, v)
			return nil
		},
	}
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON, as GET /api/capsules/{id} answers")
	configFlag(cmd, &path)
	return cmd
}

// printCapsule prints a capsule's fields, aligned, a blank line and its
// text.
func printCapsule(out io.Writer, v capsule.View) {
	fmt.Fprintf(out, "id:         %d\n", v.ID)
	fmt.Fprintf(out, "workspace:  %s\n", v.Workspace)
	fmt.Fprintf(out, "name:       %s\n", v.Name)
	fmt.Fprintf(out, "version:    %d\n", v.Version)
	fmt.Fprintf(out, "run:        %s\n", orNone(v.RunID))
	fmt.Fprintf(out, "phase:      %s\n", orNone(v.Phase))
	fmt.Fprintf(out, "role:       %s\n", orNone(v.Role))
	fmt.Fprintf(out, "tags:       %s\n", orNone(strings.Join(v.Tags, ", ")))
	fmt.Fprintf(out, "created:    %s\n", fmtTime(v.CreatedAt))
	fmt.Fprintf(out, "updated:    %s\n", fmtTime(v.UpdatedAt))
	if v.DeletedAt != nil {
		fmt.Fprintf(out, "deleted:    %s\n", fmtTime(*v.DeletedAt))
	}
	fmt.Fprintln(out)
	fmt.Fprint(out, v.Text)
	if !strings.HasSuffix(v.Text, "\n") {
		fmt.Fprintln(out)
	}
}

func newCapsuleSearchCommand() *cobra.Command {
	var path string
	var f capsuleFilterFlags
	var limit int
	var asJSON bool
	cmd := &cobra.Command{
		Use:   "search QUERY",
		Short: "Search the capsules' names, tags and texts, best match first",
		Long: `search finds the capsules whose names, tags or texts match QUERY, best match first (rank:
bm25, lower is better), with a snippet of each text around the terms. Words match their
stems; quote a phrase ('"rate limit"'); OR, NOT and prefix* work as in SQLite FTS5.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := capsuleLimit(cmd, limit, capsuleSearchMax); err != nil {
				return err
			}
			if strings.TrimSpace(args[0]) == "" {
				return usageError(errors.New("QUERY is empty: give the words to search for"))
			}
			svc, done, err := openCapsules(cmd, path, false)
			if err != nil {
				return err
			}
			defer done()
			filter := f.filter()
			filter.Limit = limit
			var hits []*agentrunner.CapsuleHit
			if svc != nil {
				if hits, err = svc.Search(cmd.Context(), args[0], filter); err != nil {
					return failureError(err)
				}
			}
			out := cmd.OutOrStdout()
			if asJSON {
				list := arhttp.CapsuleHits{Hits: make([]capsule.Hit, len(hits))}
				for i, h := range hits {
					list.Hits[i] = capsule.Hit{View: capsule.ViewOf(h.Capsule, false), Rank: h.Rank, Snippet: h.Snippet}
				}
				return printJSON(out, list)
			}
			if len(hits) == 0 {
				fmt.Fprintln(out, "no capsules match")
				return nil
			}
			w := newTable(out)
			row(w, "RANK", "ID", "CAPSULE", "SNIPPET")
			for _, h := range hits {
				row(w, strconv.FormatFloat(h.Rank, 'g', 4, 64), strconv.FormatInt(h.Capsule.ID, 10),
					clipCell(h.Capsule.Workspace+"/"+h.Capsule.Name), clipTo(h.Snippet, lastWidth))
			}
			return w.Flush()
		},
	}
	f.add(cmd)
	cmd.Flags().IntVar(&limit, "limit", 0, fmt.Sprintf("how many hits, from 1 to %d (default 20)", capsuleSearchMax))
	cmd.Flags().BoolVar(&asJSON, "json", false, "print JSON, as GET /api/capsules/search answers")
	configFlag(cmd, &path)
	return cmd
}

func newCapsuleExportCommand() *cobra.Command {
	var path, output string
	var f capsuleFilterFlags
	cmd := &cobra.Command{
		Use:   "export",
		Short: "Write the capsules the filters select as JSON lines, oldest first, for capsule import",
		Long: `export writes the capsules the filters select (all live ones by default) as JSON lines,
oldest first, to standard output or with -o to FILE, which it replaces. The lines carry no
store id: capsule import (or POST /api/capsules/import) reads them into this workspace or
another.`,
		Args: usageArgs(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			svc, done, err := openCapsules(cmd, path, false)
			if err != nil {
				return err
			}
			defer done()
			var b bytes.Buffer
			n := 0
			if svc != nil {
				if n, err = svc.Export(cmd.Context(), &b, f.filter()); err != nil {
					return failureError(err)
				}
			}
			if output == "" || output == "-" {
				_, err := cmd.OutOrStdout().Write(b.Bytes())
				return err
			}
			if err := writeFileAtomic(output, b.Bytes()); err != nil {
				return failureError(err)
			}
			fmt.Fprintf(cmd.ErrOrStderr(), "exported %d capsule(s) to %s\n", n, output)
			return nil
		},
	}
	f.add(cmd)
	cmd.Flags().StringVarP(&output, "output", "o", "", "write to this file instead of standard output")
	configFlag(cmd, &path)
	return cmd
}

// writeFileAtomic writes data to path through a temporary file in its
// directory, so that path is never left half written.
func writeFileAtomic(path string, data []byte) error {
	tmp, err := os.CreateTemp(filepath.Dir(path), ".export-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(data); err != nil {
		tmp.Close()
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Chmod(tmp.Name(), 0o644); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp.Name(), path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	return nil
}

func newCapsuleImportCommand() *cobra.Command {
	var path, onConflict string
	cmd := &cobra.Command{
		Use:   "import FILE|-",
		Short: "Store the capsules of JSON lines capsule export wrote (- reads standard input)",
		Long: `import stores each capsule of FILE, JSON lines that capsule export (or GET
/api/capsules/export) wrote, with its times, a deleted one deleted. --on-conflict says what
to do with a capsule whose workspace and name a live capsule has: skip it (the default) or
replace that capsule with it. A line that fails the checks stops the import and is named;
the lines before it stay stored.`,
		Args: usageArgs(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, args []string) error {
			policy := capsule.OnConflict(onConflict)
			if policy != capsule.Skip && policy != capsule.Replace {
				return usageError(fmt.Errorf("--on-conflict must be skip or replace, got %q", clipCell(onConflict)))
			}
			in, from := cmd.InOrStdin(), "standard input"
			if args[0] != "-" {
				from = args[0]
				f, err := os.Open(args[0])
				if err != nil {
					return failureError(err)
				}
				defer f.Close()
				in = f
			}
			svc, done, err := openCapsules(cmd, path, true)
			if err != nil {
				return err
			}
			defer done()
			n, err := svc.Import(cmd.Context(), in, policy)
			if err != nil {
				return failureError(fmt.Errorf("%s: %w (imported before it: %d stored, %d replaced, %d skipped)", from, err, n.Stored, n.Replaced, n.Skipped))
			}
			fmt.Fprintf(cmd.OutOrStdout(), "stored %d, replaced %d, skipped %d\n", n.Stored, n.Replaced, n.Skipped)
			return nil
		},
	}
	cmd.Flags().StringVar(&onConflict, "on-conflict", string(capsule.Skip), "what to do with a name a live capsule has: skip or replace")
	configFlag(cmd, &path)
	return cmd
}
