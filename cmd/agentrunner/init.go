package main

import (
	"cmp"
	"errors"
	"fmt"
	"io"

	"github.com/agentrunner/agentrunner/examples"
	"github.com/agentrunner/agentrunner/examples/crypton"
	researchlead "github.com/agentrunner/agentrunner/examples/research-lead"
	"github.com/agentrunner/agentrunner/examples/review"
	reviewloop "github.com/agentrunner/agentrunner/examples/review-loop"
	signalflow "github.com/agentrunner/agentrunner/examples/signal-flow"
	"github.com/spf13/cobra"
)

func newInitCommand() *cobra.Command {
	var force, parallel bool
	var provider, example string
	cmd := &cobra.Command{
		Use:   "init DIR",
		Short: "Write an example workspace (by default the Crypton learning loop) into DIR",
		Long: `init writes an example workspace into DIR. --example chooses it: crypton (the learning
loop, the default), review (a review loop whose cap opens a gate for a person, run by
agentrunner serve and started with agentrunner start review), review-loop (spec 3's design
review and implement ⇄ verify loops, with capsule steps that checkpoint the reviewed plan and
record each round) or signal-flow (spec 2's six roles routed by their SIGNAL BLOCKs, with the
cycle document the runner keeps and archives; its --provider is process, the shell scripts
and the default, openai or anthropic) or research-lead (spec 4's lead agent: it plans with a
to-do list and runs sub-agents in parallel as child runs; its --provider is openai, the
default, or anthropic) or dev-pipeline (spec 5's backlog items refined and split into tasks,
each planned and implemented in its own git worktree by the agent of its state, with human
gates; its --provider is process, the shell scripts and the default, claude-code, openai or
anthropic). For crypton, --provider sets
every agent's provider: mock (offline, the default), openai, anthropic, or process (the
Claude Code CLI, with the runner's tools over MCP). --parallel writes the loop with Research
and Analyze on parallel branches after Plan, joined by Synthesize; the analysis then reads
the last cycle's research (see docs/pipelines.md). The workspace is ready to run once the
provider's key is set: init names every variable and program the written configuration
needs (the providers' keys, the tools' keys and programs), and how to run the mock
Execution Service for an offline cycle (agentrunner execsvc mock).`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			switch example {
			case "crypton":
			case "review":
				if cmd.Flags().Changed("provider") {
					return usageError(errors.New("--provider applies to the crypton example; the review example's agents are scripts (see its agentrunner.yaml)"))
				}
				if parallel {
					return usageError(errors.New("--parallel applies to the crypton example, the learning loop"))
				}
				return initReview(cmd, args[0], force)
			case "review-loop":
				if cmd.Flags().Changed("provider") || parallel {
					return usageError(errors.New("--provider and --parallel apply to other examples; the review-loop example's agents are scripts (see its agentrunner.yaml)"))
				}
				return initReviewLoop(cmd, args[0], force)
			case "research-lead":
				if parallel {
					return usageError(errors.New("--parallel applies to the crypton example, the learning loop"))
				}
				kind := ""
				if cmd.Flags().Changed("provider") {
					kind = provider
				}
				return initResearchLead(cmd, args[0], force, kind)
			case "signal-flow":
				if parallel {
					return usageError(errors.New("--parallel applies to the crypton example, the learning loop"))
				}
				kind := ""
				if cmd.Flags().Changed("provider") {
					kind = provider
				}
				return initSignalFlow(cmd, args[0], force, kind)
			case "dev-pipeline":
				if parallel {
					return usageError(errors.New("--parallel applies to the crypton example, the learning loop"))
				}
				kind := ""
				if cmd.Flags().Changed("provider") {
					kind = provider
				}
				return initDevPipeline(cmd, args[0], force, kind)
			default:
				return usageError(fmt.Errorf("--example %q: choose crypton, dev-pipeline, research-lead, review, review-loop or signal-flow", example))
			}
			if _, ok := crypton.Providers[provider]; !ok {
				return usageError(fmt.Errorf("--provider %q: choose mock, openai, anthropic or process", provider))
			}
			var opts []crypton.Option
			shape := ""
			if parallel {
				opts, shape = append(opts, crypton.Parallel), ", research and analyze in parallel"
			}
			written, err := writeExample(args[0], force, provider, opts...)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			listWritten(out, args[0], written, fmt.Sprintf("agents on the %s provider%s", provider, shape))
			printNeeds(out, args[0])
			fmt.Fprintf(out, "next: cd %s && agentrunner validate && agentrunner run --once\n", args[0])
			return nil
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "overwrite files that already exist")
	cmd.Flags().StringVar(&provider, "provider", "mock", "provider of every agent: mock, openai, anthropic or process")
	cmd.Flags().StringVar(&example, "example", "crypton", "the example: crypton, dev-pipeline, research-lead, review, review-loop or signal-flow")
	cmd.Flags().BoolVar(&parallel, "parallel", false, "crypton: run research and analyze in parallel after plan, joined by synthesize")
	return cmd
}

// initReview writes the review example and says how to run it.
func initReview(cmd *cobra.Command, dir string, force bool) error {
	written, err := review.Write(dir, force)
	if err != nil {
		return existsIsUsage(err)
	}
	out := cmd.OutOrStdout()
	listWritten(out, dir, written, "a review loop whose agents are the scripts in agents/")
	printNeeds(out, dir)
	fmt.Fprintf(out, "next: cd %s && agentrunner serve, then in another terminal:\n", dir)
	fmt.Fprintln(out, "  agentrunner start review --input topic=\"durable agents\"; agentrunner gates; agentrunner approve RUN decide -m \"ship it\"")
	return nil
}

// initReviewLoop writes the review-loop example and says how to run it.
func initReviewLoop(cmd *cobra.Command, dir string, force bool) error {
	written, err := reviewloop.Write(dir, force)
	if err != nil {
		return existsIsUsage(err)
	}
	out := cmd.OutOrStdout()
	listWritten(out, dir, written, "spec 3's review and verify loops with capsule checkpoints; the agents are the scripts in agents/")
	printNeeds(out, dir)
	fmt.Fprintf(out, "next: cd %s && agentrunner validate && agentrunner run --once --input request=\"…\"\n", dir)
	fmt.Fprintln(out, "  then: agentrunner capsule list --workspace review-loop (add [stubborn] or [broken] to the request to see a cap and its gate)")
	return nil
}

// initSignalFlow writes the signal-flow example with its agents on the
// provider of kind ("": the scripts) and says how to run it.
func initSignalFlow(cmd *cobra.Command, dir string, force bool, kind string) error {
	if _, ok := signalflow.Providers[kind]; kind != "" && !ok {
		return usageError(fmt.Errorf("--provider %q: the signal-flow example's agents are on process (its scripts, the default), openai or anthropic", kind))
	}
	written, err := signalflow.Write(dir, force, kind)
	if err != nil {
		return existsIsUsage(err)
	}
	out := cmd.OutOrStdout()
	who := "the scripts in agents/"
	if kind == "openai" || kind == "anthropic" {
		who = "model agents on the " + kind + " provider, with the prompts in agent_prompts/"
	}
	listWritten(out, dir, written, "spec 2's signal-routed flow; the agents are "+who)
	printNeeds(out, dir)
	fmt.Fprintf(out, "next: cd %s && agentrunner validate && agentrunner run --once --input goal=\"…\"\n", dir)
	return nil
}

// initResearchLead writes the research-lead example with its agents on
// the provider of kind ("": openai) and says how to run it.
func initResearchLead(cmd *cobra.Command, dir string, force bool, kind string) error {
	if _, ok := researchlead.Providers[kind]; kind != "" && !ok {
		return usageError(fmt.Errorf("--provider %q: the research-lead example's agents are on openai (the default) or anthropic", kind))
	}
	kind = cmp.Or(kind, researchlead.DefaultProvider)
	written, err := researchlead.Write(dir, force, kind)
	if err != nil {
		return existsIsUsage(err)
	}
	out := cmd.OutOrStdout()
	listWritten(out, dir, written, "spec 4's lead agent and its sub-agents, model agents on the "+kind+" provider")
	printNeeds(out, dir)
	fmt.Fprintf(out, "next: cd %s && agentrunner validate && agentrunner run --once --pipeline research --input query=\"…\"\n", dir)
	fmt.Fprintln(out, "  then: agentrunner run-status RUN (its sub-agents) and agentrunner todos RUN --history (its plan)")
	return nil
}

// writeExample writes the embedded example workspace into dir with every
// agent on the provider of the given kind, in the shape opts give;
// existing files are a usage error unless overwrite.
func writeExample(dir string, overwrite bool, provider string, opts ...crypton.Option) ([]string, error) {
	files, err := crypton.Write(dir, overwrite, provider, opts...)
	if err != nil {
		return nil, existsIsUsage(err)
	}
	return files, err
}

// existsIsUsage makes an example that would overwrite files a usage
// error (nothing was written; --force would); other errors stay.
func existsIsUsage(err error) error {
	var exists *examples.ExistsError
	if errors.As(err, &exists) {
		return usageError(err)
	}
	return err
}

// listWritten says what init wrote into dir.
func listWritten(out io.Writer, dir string, written []string, what string) {
	fmt.Fprintf(out, "wrote %d files into %s (%s):\n", len(written), dir, what)
	for _, f := range written {
		fmt.Fprintf(out, "  %s\n", f)
	}
}
