package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/backlog"
	devpipeline "github.com/agentrunner/agentrunner/examples/dev-pipeline"
	arhttp "github.com/agentrunner/agentrunner/http"
	"github.com/spf13/cobra"
)

// The demo's backlog item: two tasks, the second of which makes its
// planning agent ask a person.
const (
	demoDevTitle       = "Greeter"
	demoDevDescription = "- add a greeter function\n- choose where the greeting lives [ask]"
	demoDevAnswer      = "Add a separate module"
	demoDevTimeout     = 2 * time.Minute
)

// devDemo drives a served dev-pipeline workspace with the CLI, as a
// user does, and prints what it sees.
type devDemo struct {
	out       io.Writer
	cfg, url  string
	api       *arhttp.Client
	seen      map[string]string // what was printed last of each run
	answered  map[string]bool   // the gates answered, by run and step
	serveLogs bytes.Buffer
}

// demoDevPipeline writes the dev-pipeline example into dir and a small Go
// repository into dir/repo (kept across demos), serves the workspace on
// loopback in this process, and drives it with the CLI: it adds a backlog
// item of two tasks, answers the question the second task's planning
// agent asks at its gate, and waits until both tasks are implemented,
// each on its branch.
func demoDevPipeline(cmd *cobra.Command, dir string) error {
	if _, err := exec.LookPath("git"); err != nil {
		return failureError(errors.New("the dev-pipeline demo works on a git repository, and git is not on PATH"))
	}
	if _, err := devpipeline.Write(dir, true, ""); err != nil {
		return err
	}
	repo, err := demoRepo(cmd.Context(), filepath.Join(dir, "repo"))
	if err != nil {
		return failureError(err)
	}
	d := &devDemo{out: cmd.OutOrStdout(), cfg: filepath.Join(dir, "agentrunner.yaml"), seen: map[string]string{}, answered: map[string]bool{}}
	fmt.Fprintf(d.out, "demo workspace: %s (spec 5's agent pipeline, its agents the scripts in agents/scripts)\nrepository:     %s\n", dir, repo)
	ctx, cancel := context.WithTimeout(cmd.Context(), demoDevTimeout)
	defer cancel()
	stop, err := d.serve(ctx)
	if err != nil {
		return failureError(err)
	}
	defer stop()
	item, err := d.add(ctx, repo)
	if err != nil {
		return failureError(err)
	}
	view, err := d.follow(ctx, item)
	if err != nil {
		return failureError(fmt.Errorf("%w\nserve's log:\n%s", err, d.serveLogs.String()))
	}
	return d.summary(ctx, repo, view)
}

// demoRepo makes a small Go module with one commit on main, unless an
// earlier demo made it.
func demoRepo(ctx context.Context, dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", err
	}
	if _, err := os.Stat(filepath.Join(abs, ".git")); err == nil {
		return abs, nil
	}
	if err := os.MkdirAll(abs, 0o755); err != nil {
		return "", err
	}
	files := map[string]string{"go.mod": "module greeter\n\ngo 1.22\n", "main.go": "package main\n\nfunc main() {}\n"}
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(abs, name), []byte(body), 0o644); err != nil {
			return "", err
		}
	}
	for _, args := range [][]string{
		{"init", "-q", "-b", "main"}, {"add", "."},
		{"-c", "user.name=agentrunner demo", "-c", "user.email=demo@localhost", "-c", "commit.gpgsign=false", "commit", "-q", "-m", "a greeter to be"},
	} {
		if out, err := exec.CommandContext(ctx, "git", append([]string{"-C", abs}, args...)...).CombinedOutput(); err != nil {
			return "", fmt.Errorf("git %s: %v: %s", args[0], err, bytes.TrimSpace(out))
		}
	}
	return abs, nil
}

// serve runs `agentrunner serve` on the workspace in this process, on a
// free loopback port, and returns once it answers.
func (d *devDemo) serve(ctx context.Context) (stop func(), err error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	restore := setEnvFor("AGENTRUNNER_SERVER_LISTEN", addr)
	sctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		run(sctx, []string{"serve", "-c", d.cfg}, io.Discard, &d.serveLogs)
	}()
	stop = func() { cancel(); <-done; restore() }
	d.url = "http://" + addr
	if d.api, err = arhttp.NewClient(d.url, "", &http.Client{Timeout: 10 * time.Second}); err == nil {
		err = d.waitLive(ctx, done)
	}
	if err != nil {
		stop()
		return nil, err
	}
	fmt.Fprintf(d.out, "serving:        %s (agentrunner serve, in this process)\n\n", d.url)
	return stop, nil
}

// waitLive waits for /health/live.
func (d *devDemo) waitLive(ctx context.Context, exited <-chan struct{}) error {
	for {
		resp, err := http.Get(d.url + "/health/live")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK {
				return nil
			}
		}
		select {
		case <-exited:
			return fmt.Errorf("serve stopped at start:\n%s", d.serveLogs.String())
		case <-ctx.Done():
			return fmt.Errorf("serve did not answer in time: %w", ctx.Err())
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// cli runs an agentrunner command against the server, printing it and
// what it printed, as a terminal shows them.
func (d *devDemo) cli(ctx context.Context, args ...string) (string, error) {
	shown := make([]string, len(args))
	for i, a := range args {
		shown[i] = a
		if strings.ContainsAny(a, " \n[") {
			shown[i] = fmt.Sprintf("%q", a)
		}
	}
	fmt.Fprintf(d.out, "$ agentrunner %s\n", strings.Join(shown, " "))
	var b bytes.Buffer
	code := run(ctx, append(args, "--server", d.url, "-c", d.cfg), &b, &b)
	fmt.Fprint(d.out, indent(b.String(), "  "))
	if code != exitOK {
		return "", fmt.Errorf("agentrunner %s exited %d", args[0], code)
	}
	return b.String(), nil
}

// add adds the demo's backlog item and returns its id.
func (d *devDemo) add(ctx context.Context, repo string) (string, error) {
	out, err := d.cli(ctx, "backlog", "add", "--title", demoDevTitle, "--description", demoDevDescription, "--repo", repo)
	if err != nil {
		return "", err
	}
	for _, f := range strings.Fields(out) {
		if strings.HasPrefix(f, "backlog-") {
			return strings.TrimRight(f, ".:,"), nil
		}
	}
	return "", fmt.Errorf("backlog add printed no item id")
}

// follow prints the item's and its tasks' states as they change and
// answers the gates that open, until the item ends.
func (d *devDemo) follow(ctx context.Context, item string) (*backlog.ItemView, error) {
	for {
		v, err := d.api.BacklogItem(ctx, item)
		if err != nil {
			return nil, err
		}
		d.show(v.ID, "item "+v.ID, v.Progress)
		for _, t := range v.Tasks {
			d.show(t.ID, fmt.Sprintf("task %d %s (%q)", t.ExecutionOrder, t.ID, t.Title), t.Progress)
		}
		if v.Status.Finished() {
			return v, nil
		}
		if err := d.answerGates(ctx, v); err != nil {
			return nil, err
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("item %s did not end in time: %w", item, ctx.Err())
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// show prints where a run is when that changed.
func (d *devDemo) show(id, what string, p backlog.Progress) {
	now := string(p.Status)
	if len(p.States) > 0 {
		now = strings.Join(p.States, ", ")
	}
	if p.Waiting {
		now += " (waiting for a person)"
	}
	if d.seen[id] != now {
		d.seen[id] = now
		fmt.Fprintf(d.out, "%-44s %s\n", what, now)
	}
}

// answerGates answers, once, each gate whose agent asked a question,
// once the item's view shows its task waiting (so the waiting line is
// printed before the answer).
func (d *devDemo) answerGates(ctx context.Context, v *backlog.ItemView) error {
	list, err := d.api.Gates(ctx)
	if err != nil {
		return err
	}
	for _, g := range list.Gates {
		key := g.Run + "/" + g.Step
		if d.answered[key] || g.Question == "" || !shownWaiting(v, g.Run) {
			continue
		}
		d.answered[key] = true
		fmt.Fprintln(d.out)
		if _, err := d.cli(ctx, "gates"); err != nil {
			return err
		}
		if _, err := d.cli(ctx, "answer", g.Run, g.Step, "-m", demoDevAnswer); err != nil {
			return err
		}
		fmt.Fprintln(d.out)
	}
	return nil
}

// shownWaiting reports whether the item's view has task run waiting.
func shownWaiting(v *backlog.ItemView, run string) bool {
	for _, t := range v.Tasks {
		if t.ID == run {
			return t.Waiting
		}
	}
	return false
}

// summary prints each task's branch and commit, and what to try next.
func (d *devDemo) summary(ctx context.Context, repo string, v *backlog.ItemView) error {
	fmt.Fprintln(d.out)
	for _, t := range v.Tasks {
		out, err := exec.CommandContext(ctx, "git", "-C", repo, "log", "--oneline", "main.."+t.Branch).Output()
		if err != nil {
			return failureError(fmt.Errorf("git log of %s: %w", t.Branch, err))
		}
		fmt.Fprintf(d.out, "task %d: branch %s\n%s", t.ExecutionOrder, t.Branch, indent(string(out), "  "))
	}
	if v.Status != agentrunner.RunCompleted {
		return failureError(fmt.Errorf("item %s ended %s: %s", v.ID, v.Status, v.Error))
	}
	dir := filepath.Dir(d.cfg)
	fmt.Fprintf(d.out, "next: cd %s && agentrunner serve, then in another terminal:\n", dir)
	fmt.Fprintf(d.out, "  agentrunner backlog add --title \"…\" --description $'- one task\\n- another [ask]' --repo %s\n", repo)
	return nil
}
