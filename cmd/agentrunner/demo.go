package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"log/slog"
	"path/filepath"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	reviewloop "github.com/agentrunner/agentrunner/examples/review-loop"
	signalflow "github.com/agentrunner/agentrunner/examples/signal-flow"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/workspace"
	"github.com/spf13/cobra"
)

func newDemoCommand() *cobra.Command {
	var dir, example, listen string
	var serve bool
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run one full cycle of the example loop offline, on mock agents",
		Long: `demo writes the example workspace into --dir, runs every agent on the mock runtime
against a mock Execution Service on loopback, runs exactly one full cycle and prints
each step as it happens. Nothing leaves this machine.

--example signal-flow runs one cycle of spec 2's signal-routed flow instead, on the
example's shell scripts: it prints each hand-off (role, next, confidence, risk) and
names the file the cycle's document is archived as.

--example review-loop runs one run of spec 3's design review and implement ⇄ verify
loops, on the example's shell scripts: it prints each capsule the run stores as it
happens, then each loop's turns (the verdict and where it led) and the capsule's
name and final version.

--example research-lead runs one run of spec 4's lead agent and three sub-agents, on a
scripted model that speaks the OpenAI wire format on loopback: it prints the lead's
to-do list as it changes, each sub-agent's start and end with its tokens and tool
calls, and the answer's path.

--example dev-pipeline runs spec 5's agent pipeline on the example's scripts: it makes a
small git repository, serves the workspace on loopback, adds a backlog item with the CLI,
answers the question a planning agent asks at its gate with the CLI, and prints each state
as it changes until both tasks are implemented, each on its own branch.

--serve keeps serving the workspace, with the API and the web dashboard on --listen, until
Ctrl-C: with crypton, the loop's first cycle runs at once, to watch; with --example review,
a run's loop reaches its cap and waits at a gate, to approve from the dashboard.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			out := cmd.OutOrStdout()
			if serve {
				if !cmd.Flags().Changed("dir") && example == "review" {
					dir = "review-demo"
				}
				return demoServe(cmd, example, dir, listen)
			}
			switch example {
			case "crypton":
			case "signal-flow":
				if !cmd.Flags().Changed("dir") {
					dir = "signal-flow-demo"
				}
				return demoSignalFlow(cmd, dir)
			case "research-lead":
				if !cmd.Flags().Changed("dir") {
					dir = "research-lead-demo"
				}
				return demoResearchLead(cmd, dir)
			case "review-loop":
				if !cmd.Flags().Changed("dir") {
					dir = "review-loop-demo"
				}
				return demoReviewLoop(cmd, dir)
			case "dev-pipeline":
				if !cmd.Flags().Changed("dir") {
					dir = "dev-pipeline-demo"
				}
				return demoDevPipeline(cmd, dir)
			default:
				return usageError(fmt.Errorf("--example %q: choose crypton, dev-pipeline, research-lead, review-loop or signal-flow", example))
			}
			if _, err := writeExample(dir, true, "mock"); err != nil {
				return err
			}
			es := execsvc.NewMock(execsvc.MockOptions{ExecutingAfter: 1, CompletedAfter: 2})
			url, err := es.Start("127.0.0.1:0")
			if err != nil {
				return failureError(fmt.Errorf("start the mock Execution Service: %w", err))
			}
			defer es.Close()

			cfg, err := loadConfig(filepath.Join(dir, config.FileName))
			if err != nil {
				return err
			}
			cfg.ExecutionService.URL = url
			cfg.ExecutionService.PollInterval = config.Duration(50 * time.Millisecond)
			for _, a := range cfg.Agents {
				a.Provider = config.ProviderMock
			}
			ws, err := workspace.Load(cfg)
			if err != nil {
				return err
			}
			fmt.Fprintf(out, "demo workspace: %s (mock agents, mock Execution Service at %s)\n", dir, url)
			r, err := demoRunner(cmd, ws)
			if err != nil {
				return err
			}
			defer r.Close()
			c, err := r.engine.RunOnce(cmd.Context())
			if err != nil {
				return failureError(err)
			}
			if err := report(out, r, c); err != nil {
				return err
			}
			fmt.Fprintf(out, "mailboxes:  %s\n", r.ws.Layout.Mailboxes())
			// Mock agents work in memory: their prompts are in the store,
			// not in attempt folders.
			db := r.ws.Config.State.Path
			if !filepath.IsAbs(db) {
				db = filepath.Join(r.ws.Config.Dir, db)
			}
			fmt.Fprintf(out, "prompts:    in %s (with serve running: agentrunner attempt %s research 1)\n", db, c.ID)
			fmt.Fprintf(out, "the mock Execution Service received %d strategy(ies) in %d request(s)\n", len(es.Strategies()), len(es.Requests()))
			fmt.Fprintf(out, "next: agentrunner status -c %s\n", filepath.Join(dir, config.FileName))
			return nil
		},
	}
	cmd.Flags().StringVar(&dir, "dir", "agentrunner-demo", "directory to write the demo workspace into (signal-flow-demo, review-loop-demo, research-lead-demo for those examples)")
	cmd.Flags().BoolVar(&serve, "serve", false, "keep serving the workspace with the web dashboard until Ctrl-C (crypton or review)")
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8080", "with --serve: the loopback address of the API and the dashboard")
	cmd.Flags().StringVar(&example, "example", "crypton", "the example to run a cycle of: crypton, dev-pipeline, research-lead, review-loop or signal-flow")
	return cmd
}

// demoSignalFlow writes the signal-flow example into dir and runs one
// cycle of it, on its scripts, to its archive.
func demoSignalFlow(cmd *cobra.Command, dir string) error {
	out := cmd.OutOrStdout()
	if _, err := signalflow.Write(dir, true, ""); err != nil {
		return err
	}
	ws, err := loadWorkspace(filepath.Join(dir, config.FileName))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "demo workspace: %s (spec 2's six roles, as the shell scripts in agents/)\n", dir)
	r, err := demoRunner(cmd, ws)
	if err != nil {
		return err
	}
	defer r.Close()
	c, err := r.engine.RunPipelineOnce(cmd.Context(), "signal-flow", map[string]any{
		"goal":  "Make the nightly import job finish in under 10 minutes.",
		"state": []any{"The import takes 25 minutes.", "It runs at 02:00 UTC."},
		"docs":  []any{"docs/agent_docs/AGENTS.md", "docs/agent_docs/AGENT_ROLES.md"},
	})
	if err != nil {
		return failureError(err)
	}
	if err := report(out, r, c); err != nil {
		return err
	}
	fmt.Fprintf(out, "next: cd %s && agentrunner run --once --input goal=\"…\" (add [loop] or [fail] to the goal to see the cap or a failure)\n", dir)
	return nil
}

// demoReviewLoop writes the review-loop example into dir and runs one
// run of it, on its scripts, to its report; then it prints the loops'
// turns and the capsule the run kept.
func demoReviewLoop(cmd *cobra.Command, dir string) error {
	out := cmd.OutOrStdout()
	if _, err := reviewloop.Write(dir, true); err != nil {
		return err
	}
	ws, err := loadWorkspace(filepath.Join(dir, config.FileName))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "demo workspace: %s (spec 3's review loops with capsule checkpoints, as the shell scripts in agents/)\n", dir)
	r, err := demoRunner(cmd, ws)
	if err != nil {
		return err
	}
	defer r.Close()
	c, err := r.engine.RunPipelineOnce(cmd.Context(), "review-loop", map[string]any{"request": "Add rate limits to the public API."})
	if err != nil {
		return failureError(err)
	}
	ended := report(out, r, c)
	if err := printTurns(cmd.Context(), out, r.store, c.ID); err != nil {
		return failureError(err)
	}
	if ended != nil {
		return ended
	}
	fmt.Fprintf(out, "next: cd %s && agentrunner run --once --input request=\"…\" (add [stubborn] or [broken] to the request to see a loop's cap and its gate)\n", dir)
	return nil
}

// turnStore is what printTurns reads: the run's step runs and capsules.
type turnStore interface {
	StepRuns(ctx context.Context, f agentrunner.StepRunFilter) ([]*agentrunner.StepRun, error)
	Capsules(ctx context.Context, f agentrunner.CapsuleFilter) ([]*agentrunner.Capsule, error)
}

// printTurns prints each turn of a run's loops (a step run that chose
// its successor by a label: the verdict, and where it led), then the
// live capsules the run stored, with their versions.
func printTurns(ctx context.Context, out io.Writer, store turnStore, run string) error {
	srs, err := store.StepRuns(ctx, agentrunner.StepRunFilter{RunID: run})
	if err != nil {
		return err
	}
	next := map[string]string{}
	for _, sr := range srs {
		next[sr.From] = sr.Key()
	}
	fmt.Fprintln(out, "turns:")
	for _, sr := range srs {
		if sr.Label != "" {
			fmt.Fprintf(out, "  %-16s %-16s → %s\n", sr.Key(), sr.Label, cmp.Or(next[sr.Key()], "end"))
		}
	}
	cs, err := store.Capsules(ctx, agentrunner.CapsuleFilter{RunID: run})
	if err != nil {
		return err
	}
	for _, c := range cs {
		fmt.Fprintf(out, "capsule: %s/%s, version %d (phase %s): agentrunner capsule show %s/%s\n", c.Workspace, c.Name, c.Version, c.Phase, c.Workspace, c.Name)
	}
	return nil
}

// demoRunner opens a demo's workspace for running, printing each step to
// the command's output and warnings to its error output.
func demoRunner(cmd *cobra.Command, ws *workspace.Workspace) (*runner, error) {
	p := &progress{w: cmd.OutOrStdout()}
	log := cmdLogger(cmd, logText, slog.LevelWarn)
	return openRunner(cmd.Context(), ws, agentrunner.SystemClock{}, log, p.onEvent)
}
