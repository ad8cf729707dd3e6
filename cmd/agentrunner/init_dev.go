package main

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	devpipeline "github.com/agentrunner/agentrunner/examples/dev-pipeline"
	"github.com/spf13/cobra"
)

// initDevPipeline writes the dev-pipeline example with its state agents
// on the provider of kind ("": the scripts) and says how to run it.
func initDevPipeline(cmd *cobra.Command, dir string, force bool, kind string) error {
	if _, ok := devpipeline.Providers[kind]; kind != "" && !ok {
		return usageError(fmt.Errorf("--provider %q: the dev-pipeline example's agents are on %s", kind, strings.Join(slices.Sorted(maps.Keys(devpipeline.Providers)), ", ")))
	}
	written, err := devpipeline.Write(dir, force, kind)
	if err != nil {
		return existsIsUsage(err)
	}
	out := cmd.OutOrStdout()
	listWritten(out, dir, written, "spec 5's agent pipeline: backlog items refined and split into tasks, each task planned and implemented in its own git worktree")
	printNeeds(out, dir)
	fmt.Fprintf(out, "next: cd %s && agentrunner validate && agentrunner serve, then in another terminal:\n", dir)
	fmt.Fprintln(out, "  agentrunner backlog add --title \"…\" --description \"…\" --repo PATH   (a git repository)")
	fmt.Fprintln(out, "  agentrunner backlog list; agentrunner tasks list; agentrunner gates; agentrunner answer RUN STEP -m \"…\"")
	return nil
}
