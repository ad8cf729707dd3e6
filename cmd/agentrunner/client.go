package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"maps"
	"net"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/agentrunner/agentrunner"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/spf13/cobra"
)

// Environment of the remote commands. The API key is read from the
// environment only: a flag would leak into shell history and ps.
const (
	envServer = "AGENTRUNNER_SERVER"
	envAPIKey = "AGENTRUNNER_API_KEY"
	// requestTimeout bounds one call of a command that does not follow.
	requestTimeout = 30 * time.Second
	// cellWidth bounds the free-text columns of a table; lastWidth the
	// last column, which pushes no other column aside.
	cellWidth = 60
	lastWidth = 120
)

// remoteCommands are the commands that call a running server's API.
func remoteCommands() []*cobra.Command {
	return []*cobra.Command{
		newCyclesCommand(),
		newCycleCommand(),
		newErrorsCommand(),
		newEventsCommand(),
		newOverrideCommand(agentrunner.CommandPause, "Pause the loop: no new step starts; the running one finishes"),
		newOverrideCommand(agentrunner.CommandAbort, "Abort the running cycle: its agent is stopped and the cycle ends aborted"),
		newOverrideCommand(agentrunner.CommandForceCycle, "Start a new cycle now, or as soon as the running one ends"),
		newInjectCommand(),
		newReloadCommand(),
		newAuditCommand(),
	}
}

// remote holds the flags every remote command has.
type remote struct {
	server string
	config string
	asJSON bool
}

const remoteLong = `
The server is --server, else $AGENTRUNNER_SERVER, else http://<server.listen> of the
configuration file (-c, default ./agentrunner.yaml) when the file sets server.listen;
without any of them the command stops and says so, rather than guess. --verbose (-v)
names the server on stderr first. The API key, when the server needs one, is read from
$AGENTRUNNER_API_KEY.`

func (r *remote) flags(cmd *cobra.Command) {
	serverFlag(cmd, &r.server)
	cmd.Flags().BoolVar(&r.asJSON, "json", false, "print the API's JSON")
	configFlag(cmd, &r.config)
	cmd.Long = cmd.Short + "." + remoteLong
}

// serverFlag adds --server to a command.
func serverFlag(cmd *cobra.Command, server *string) {
	cmd.Flags().StringVar(server, "server", "", "URL of the agentrunner server (default $"+envServer+", else server.listen of the configuration)")
}

// explicitServer is the server named by --server or $AGENTRUNNER_SERVER,
// or "": status and resume then work on the local workspace. from says
// which named it, for messages.
func explicitServer(flag string) (server, from string) {
	if flag != "" {
		return flag, "--server"
	}
	return strings.TrimSpace(os.Getenv(envServer)), "$" + envServer
}

// client returns the client of the server the flags, the environment or
// the configuration name.
func (r *remote) client(cmd *cobra.Command) (*arhttp.Client, error) {
	server, from := explicitServer(r.server)
	if server == "" {
		var err error
		if server, err = serverOfConfig(r.config); err != nil {
			return nil, err
		}
		from = "server.listen of " + r.config
	}
	return newAPIClient(cmd, server, from)
}

// newAPIClient returns a client of server, named by from, with the key of
// the environment. It names the server in the log (--verbose), since a
// workspace's commands may reach another workspace's server.
func newAPIClient(cmd *cobra.Command, server, from string) (*arhttp.Client, error) {
	key := os.Getenv(envAPIKey)
	c, err := arhttp.NewClient(server, key, nil)
	if err != nil {
		// The URL or the key is wrong (nothing was sent); the key alone,
		// with a good URL, tells which, so the message names its source.
		if _, keyErr := arhttp.NewClient("http://127.0.0.1", key, nil); keyErr != nil {
			return nil, usageError(fmt.Errorf("$%s: %v", envAPIKey, err))
		}
		return nil, usageError(fmt.Errorf("%s: %v", from, err))
	}
	cmdLogger(cmd, logText, slog.LevelWarn).Info("talking to the server", "url", c.BaseURL(), "from", from)
	return c, nil
}

// howToNameServer ends the errors of a command that found no server.
const howToNameServer = "give the server's URL with --server or $" + envServer + " (e.g. http://127.0.0.1:8080), or run in the workspace whose agentrunner.yaml sets server.listen (or pass it with -c)"

// serverOfConfig is http://<server.listen> of the configuration at path.
// A missing file, or one that does not set server.listen, is an error:
// falling back to the default address would talk to whichever runner
// listens there, maybe another workspace's.
func serverOfConfig(path string) (string, error) {
	if _, err := os.Stat(path); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return "", usageError(fmt.Errorf("no server to talk to: %s does not exist; %s", path, howToNameServer))
		}
		return "", usageError(fmt.Errorf("configuration %s: %w", path, err))
	}
	// Only server.listen is needed, so problems elsewhere in a file that
	// decodes (a missing template, say) do not stop the client.
	cfg, err := loadConfig(path)
	if cfg == nil {
		return "", err
	}
	if !cfg.Given("server.listen") {
		return "", usageError(fmt.Errorf("no server to talk to: %s does not set server.listen; %s", path, howToNameServer))
	}
	listen := cfg.Server.Listen
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return "", usageError(fmt.Errorf("server.listen %q of %s: want host:port; or give --server", listen, path))
	}
	// A server listening on every interface is reached on loopback.
	switch host {
	case "", "0.0.0.0":
		host = "127.0.0.1"
	case "::":
		host = "::1"
	}
	return "http://" + net.JoinHostPort(host, port), nil
}

// apiError turns a client error into the command's error: one sentence
// with the error code, exit status 1.
func apiError(c *arhttp.Client, err error) error {
	code := agentrunner.ErrorCode(err)
	var e *agentrunner.Error
	var msg string
	if errors.As(err, &e) && e.Err == nil {
		msg = fmt.Sprintf("the server at %s answered: %s (%s)", c.BaseURL(), e.Message, code)
	} else {
		msg = fmt.Sprintf("%v (%s)", err, code)
	}
	if code == agentrunner.EUNAUTHORIZED && os.Getenv(envAPIKey) == "" {
		msg += "; set " + envAPIKey + " to one of the server's API keys"
	}
	return failureError(errors.New(msg))
}

// call runs one request of a command, bounded by requestTimeout.
func call[T any](cmd *cobra.Command, c *arhttp.Client, f func(ctx context.Context) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(cmd.Context(), requestTimeout)
	defer cancel()
	v, err := f(ctx)
	if err != nil {
		return v, apiError(c, err)
	}
	return v, nil
}

// limitFlag adds --limit; 0 (not given) is the server's default.
func limitFlag(cmd *cobra.Command, n *int) {
	cmd.Flags().IntVar(n, "limit", 0, "how many to list, from 1 to 500 (default: the server's, 20)")
}

// validLimit refuses a --limit given as less than 1.
func validLimit(cmd *cobra.Command, n int) error {
	if cmd.Flags().Changed("limit") && n < 1 {
		return usageError(fmt.Errorf("--limit must be at least 1, got %d", n))
	}
	return nil
}

func printJSON(out io.Writer, v any) error {
	enc := json.NewEncoder(out)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func newTable(out io.Writer) *tabwriter.Writer {
	return tabwriter.NewWriter(out, 0, 0, 2, ' ', 0)
}

// row writes one line of a table: cells separated by tabs, each on one
// line without tabs.
func row(w io.Writer, cells ...string) {
	for i, c := range cells {
		cells[i] = oneLine(c)
	}
	fmt.Fprintln(w, strings.Join(cells, "\t"))
}

// oneLine makes a cell printable on one line, or "-" when empty.
func oneLine(s string) string {
	if s == "" {
		return "-"
	}
	return strings.Map(func(r rune) rune {
		if unicode.IsSpace(r) || unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
}

// clipCell shortens free text to cellWidth runes.
func clipCell(s string) string { return clipTo(s, cellWidth) }

func clipTo(s string, n int) string {
	if r := []rune(s); len(r) > n {
		return string(r[:n-1]) + "…"
	}
	return s
}

func fmtTime(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return t.UTC().Format(time.RFC3339)
}

func fmtTimePtr(t *time.Time) string {
	if t == nil {
		return ""
	}
	return fmtTime(*t)
}

func fmtMS(ms int64) string {
	d := time.Duration(ms) * time.Millisecond
	if d < time.Second {
		return d.String()
	}
	return d.Round(time.Second).String()
}

func newCyclesCommand() *cobra.Command {
	var r remote
	var limit int
	var before string
	cmd := &cobra.Command{
		Use:   "cycles",
		Short: "List the cycles, newest first, from a running server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validLimit(cmd, limit); err != nil {
				return err
			}
			c, err := r.client(cmd)
			if err != nil {
				return err
			}
			list, err := call(cmd, c, func(ctx context.Context) (*arhttp.CycleList, error) { return c.Cycles(ctx, limit, before) })
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if r.asJSON {
				return printJSON(out, list)
			}
			if len(list.Cycles) == 0 {
				fmt.Fprintln(out, "no cycles")
				return nil
			}
			w := newTable(out)
			row(w, "ID", "STATUS", "STEP", "LAST COMPLETED", "STARTED", "DURATION", "ERROR")
			for _, cy := range list.Cycles {
				row(w, cy.ID, string(cy.Status), cy.Step, cy.LastCompletedStep, fmtTime(cy.StartedAt), fmtMS(cy.DurationMS), clipTo(cy.Error, lastWidth))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if list.NextBefore != "" {
				fmt.Fprintf(out, "more: agentrunner cycles --before %s\n", list.NextBefore)
			}
			return nil
		},
	}
	limitFlag(cmd, &limit)
	cmd.Flags().StringVar(&before, "before", "", "list the cycles started before this cycle id")
	r.flags(cmd)
	return cmd
}

func newCycleCommand() *cobra.Command {
	var r remote
	cmd := &cobra.Command{
		Use:   "cycle ID",
		Short: "Show one cycle with its attempts, artifacts and events, from a running server",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			c, err := r.client(cmd)
			if err != nil {
				return err
			}
			d, err := call(cmd, c, func(ctx context.Context) (*arhttp.CycleDetail, error) { return c.Cycle(ctx, args[0]) })
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if r.asJSON {
				return printJSON(out, d)
			}
			return printCycle(out, d)
		},
	}
	r.flags(cmd)
	return cmd
}

func printCycle(out io.Writer, d *arhttp.CycleDetail) error {
	cy := d.Cycle
	fmt.Fprintf(out, "cycle:           %s\n", cy.ID)
	fmt.Fprintf(out, "pipeline:        %s\n", cy.Pipeline)
	fmt.Fprintf(out, "status:          %s\n", cy.Status)
	fmt.Fprintf(out, "step:            %s\n", orNone(cy.Step))
	fmt.Fprintf(out, "last completed:  %s\n", orNone(cy.LastCompletedStep))
	fmt.Fprintf(out, "started:         %s\n", fmtTime(cy.StartedAt))
	fmt.Fprintf(out, "ended:           %s\n", orNone(fmtTimePtr(cy.EndedAt)))
	fmt.Fprintf(out, "duration:        %s\n", fmtMS(cy.DurationMS))
	if cy.Error != "" {
		fmt.Fprintf(out, "error:           %s\n", oneLine(cy.Error))
	}
	fmt.Fprintln(out)
	w := newTable(out)
	if len(d.Steps) == 0 {
		fmt.Fprintln(out, "no attempts")
	} else {
		row(w, "STEP", "ATTEMPT", "AGENT", "STATUS", "STARTED", "DURATION", "TOKENS IN/OUT", "ERROR")
		for _, st := range d.Steps {
			for _, a := range st.Attempts {
				errText := a.Error
				if a.ErrorClass != "" {
					errText = string(a.ErrorClass) + ": " + a.Error
				}
				status := string(a.Status)
				if a.NotBefore != nil && a.Status == agentrunner.AttemptPending {
					status += " until " + fmtTime(*a.NotBefore)
				}
				row(w, st.Step, strconv.Itoa(a.Number), st.Agent, status, fmtTimePtr(a.StartedAt), fmtMS(a.DurationMS),
					fmt.Sprintf("%d/%d", a.InputTokens, a.OutputTokens), clipTo(errText, lastWidth))
			}
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(out)
	if len(d.Artifacts) == 0 {
		fmt.Fprintln(out, "no artifacts")
	} else {
		row(w, "ARTIFACT", "SIZE", "SHA256", "MODIFIED")
		for _, a := range d.Artifacts {
			row(w, a.Name, strconv.FormatInt(a.Size, 10), a.SHA256, fmtTime(a.Modified))
		}
		if err := w.Flush(); err != nil {
			return err
		}
	}
	fmt.Fprintln(out)
	return printEvents(out, d.Events, "no events")
}

// eventColumns are the columns of event tables.
var eventColumns = []string{"ID", "TIME", "LEVEL", "TYPE", "CYCLE", "STEP", "AGENT", "DETAILS"}

func eventCells(e arhttp.Event) []string {
	return []string{strconv.FormatInt(e.ID, 10), fmtTime(e.Timestamp), string(e.Level), e.Type, e.CycleID, e.Step, e.Agent, clipTo(details(e.Details), lastWidth)}
}

// details shows an event's details as key=value pairs, keys sorted.
func details(d map[string]any) string {
	var parts []string
	for _, k := range slices.Sorted(maps.Keys(d)) {
		v := d[k]
		s, ok := v.(string)
		if !ok {
			data, err := json.Marshal(v)
			if err != nil {
				continue
			}
			s = string(data)
		}
		parts = append(parts, k+"="+s)
	}
	return strings.Join(parts, " ")
}

func printEvents(out io.Writer, evs []arhttp.Event, none string) error {
	if len(evs) == 0 {
		fmt.Fprintln(out, none)
		return nil
	}
	w := newTable(out)
	row(w, eventColumns...)
	for _, e := range evs {
		row(w, eventCells(e)...)
	}
	return w.Flush()
}

func newErrorsCommand() *cobra.Command {
	var r remote
	var limit int
	var before int64
	cmd := &cobra.Command{
		Use:   "errors",
		Short: "List recent warnings and errors, newest first, from a running server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validLimit(cmd, limit); err != nil {
				return err
			}
			c, err := r.client(cmd)
			if err != nil {
				return err
			}
			list, err := call(cmd, c, func(ctx context.Context) (*arhttp.ErrorList, error) { return c.Errors(ctx, limit, before) })
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if r.asJSON {
				return printJSON(out, list)
			}
			if err := printEvents(out, list.Errors, "no warnings or errors"); err != nil {
				return err
			}
			if list.NextBefore != 0 {
				fmt.Fprintf(out, "more: agentrunner errors --before %d\n", list.NextBefore)
			}
			return nil
		},
	}
	limitFlag(cmd, &limit)
	cmd.Flags().Int64Var(&before, "before", 0, "list those with event ids below this one")
	r.flags(cmd)
	return cmd
}

func newEventsCommand() *cobra.Command {
	var r remote
	var limit int
	var since, cycle, typ, level string
	var follow bool
	cmd := &cobra.Command{
		Use:   "events",
		Short: "List events, oldest first, or follow them as they happen, from a running server",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validLimit(cmd, limit); err != nil {
				return err
			}
			if follow && cmd.Flags().Changed("limit") {
				return usageError(errors.New("--limit and --follow do not go together: a followed stream has no end"))
			}
			c, err := r.client(cmd)
			if err != nil {
				return err
			}
			f := arhttp.EventFilter{CycleID: cycle, Type: typ, Level: agentrunner.Level(level)}
			out := cmd.OutOrStdout()
			if follow {
				return followEvents(cmd, c, since, f, r.asJSON)
			}
			list, err := call(cmd, c, func(ctx context.Context) (*arhttp.EventList, error) { return c.Events(ctx, since, limit, f) })
			if err != nil {
				return err
			}
			if r.asJSON {
				return printJSON(out, list)
			}
			if err := printEvents(out, list.Events, "no events"); err != nil {
				return err
			}
			if len(list.Events) > 0 {
				fmt.Fprintf(out, "next: agentrunner events --since %d\n", list.NextSince)
			}
			return nil
		},
	}
	cmd.Flags().StringVar(&since, "since", "", "list events after this event id, or at or after this RFC 3339 time")
	limitFlag(cmd, &limit)
	cmd.Flags().BoolVarP(&follow, "follow", "f", false, "print events as they are committed, until interrupted; reconnects across restarts of the server")
	cmd.Flags().StringVar(&cycle, "cycle", "", "only the events of this cycle id")
	cmd.Flags().StringVar(&typ, "type", "", "only events of this type, e.g. attempt.failed")
	cmd.Flags().StringVar(&level, "level", "", "only events of this level or above: debug, info, warn, error")
	r.flags(cmd)
	return cmd
}

// followWidths are the widths of the event columns when following: rows
// are printed one by one, so a tabwriter cannot align them.
var followWidths = []int{6, 20, 5, 22, 15, 10, 10, 0}

// followEvents prints events as the server streams them until the
// command's context ends (an interrupt), which is success. A restart of
// the server does not end it: it reconnects with Last-Event-ID.
func followEvents(cmd *cobra.Command, c *arhttp.Client, since string, f arhttp.EventFilter, asJSON bool) error {
	out := cmd.OutOrStdout()
	line := func(cells []string) {
		var b strings.Builder
		for i, cell := range cells {
			cell = oneLine(cell)
			if i < len(cells)-1 {
				fmt.Fprintf(&b, "%-*s  ", followWidths[i], cell)
			} else {
				b.WriteString(cell)
			}
		}
		fmt.Fprintln(out, strings.TrimRight(b.String(), " "))
	}
	if !asJSON {
		line(eventColumns)
	}
	log := cmdLogger(cmd, logText, slog.LevelWarn)
	onBreak := func(err error, wait time.Duration) {
		log.Warn("the event stream broke; reconnecting from the last event printed", "server", c.BaseURL(), "error", err.Error(), "wait", wait.String())
	}
	err := c.Follow(cmd.Context(), since, f, func(e arhttp.Event) error {
		if asJSON {
			data, err := json.Marshal(e)
			if err != nil {
				return err
			}
			_, err = fmt.Fprintf(out, "%s\n", data)
			return err
		}
		line(eventCells(e))
		return nil
	}, onBreak)
	if err == nil {
		return nil // interrupted: the way to stop following
	}
	return apiError(c, err)
}

// newOverrideCommand returns the command of an override without
// arguments (pause, abort, force-cycle).
func newOverrideCommand(kind, short string) *cobra.Command {
	var r remote
	var reason string
	cmd := &cobra.Command{
		Use:   kind,
		Short: short,
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return override(cmd, &r, kind, func(ctx context.Context, c *arhttp.Client) (*arhttp.Command, error) {
				return c.Override(ctx, kind, arhttp.OverrideRequest{Reason: reason})
			})
		},
	}
	reasonFlag(cmd, &reason, "")
	r.flags(cmd)
	cmd.Long += "\n\nThe command is durable and attributed to the API key's name; the engine applies it\nonce, and `agentrunner audit` shows what it did."
	return cmd
}

func newInjectCommand() *cobra.Command {
	var r remote
	var reason string
	cmd := &cobra.Command{
		Use:   "inject AGENT MESSAGE",
		Short: "Put an operator's message into an agent's mailbox",
		Args:  cobra.ExactArgs(2),
		RunE: func(cmd *cobra.Command, args []string) error {
			if strings.TrimSpace(args[1]) == "" {
				return usageError(errors.New("the message is empty"))
			}
			return override(cmd, &r, agentrunner.CommandInject, func(ctx context.Context, c *arhttp.Client) (*arhttp.Command, error) {
				return c.Override(ctx, agentrunner.CommandInject, arhttp.OverrideRequest{Agent: args[0], Message: args[1], Reason: reason})
			})
		},
	}
	reasonFlag(cmd, &reason, "")
	r.flags(cmd)
	return cmd
}

func newReloadCommand() *cobra.Command {
	var r remote
	var reason string
	cmd := &cobra.Command{
		Use:   agentrunner.CommandReload,
		Short: "Reload the configuration and its files at the next step boundary (admin)",
		Long: `reload asks the running engine to read agentrunner.yaml and every file it names again.
Identity prompts, tools.md, the memory template, the schedule, timeouts, retries, escalation
policies, the mailbox size and budgets can change this way; anything else needs a restart,
and such a reload changes nothing. ` + "`agentrunner audit`" + ` shows what the engine did.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return override(cmd, &r, agentrunner.CommandReload, func(ctx context.Context, c *arhttp.Client) (*arhttp.Command, error) {
				return c.Reload(ctx, reason)
			})
		},
	}
	reasonFlag(cmd, &reason, "")
	r.flags(cmd)
	return cmd
}

// override sends an operator's command and reports the command it became.
func override(cmd *cobra.Command, r *remote, kind string, send func(context.Context, *arhttp.Client) (*arhttp.Command, error)) error {
	c, err := r.client(cmd)
	if err != nil {
		return err
	}
	order, err := call(cmd, c, func(ctx context.Context) (*arhttp.Command, error) { return send(ctx, c) })
	if err != nil {
		return err
	}
	out := cmd.OutOrStdout()
	if r.asJSON {
		return printJSON(out, order)
	}
	fmt.Fprintf(out, "%s requested: command %d by %s; `agentrunner audit` shows when the engine applies it\n", kind, order.ID, order.Operator)
	return nil
}

func newAuditCommand() *cobra.Command {
	var r remote
	var limit int
	var before int64
	cmd := &cobra.Command{
		Use:   "audit",
		Short: "List the operators' commands, newest first, with what the engine did",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if err := validLimit(cmd, limit); err != nil {
				return err
			}
			c, err := r.client(cmd)
			if err != nil {
				return err
			}
			list, err := call(cmd, c, func(ctx context.Context) (*arhttp.CommandList, error) { return c.Audit(ctx, limit, before) })
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			if r.asJSON {
				return printJSON(out, list)
			}
			if len(list.Commands) == 0 {
				fmt.Fprintln(out, "no commands")
				return nil
			}
			w := newTable(out)
			row(w, "ID", "CREATED", "KIND", "OPERATOR", "ARGS", "CONSUMED", "RESULT")
			for _, o := range list.Commands {
				consumed := fmtTimePtr(o.ConsumedAt)
				if consumed == "" {
					consumed = "pending"
				}
				row(w, strconv.FormatInt(o.ID, 10), fmtTime(o.CreatedAt), o.Kind, o.Operator, clipCell(details(o.Args)), consumed, clipTo(o.Result, lastWidth))
			}
			if err := w.Flush(); err != nil {
				return err
			}
			if list.NextBefore != 0 {
				fmt.Fprintf(out, "more: agentrunner audit --before %d\n", list.NextBefore)
			}
			return nil
		},
	}
	limitFlag(cmd, &limit)
	cmd.Flags().Int64Var(&before, "before", 0, "list the commands with ids below this one")
	r.flags(cmd)
	return cmd
}
