package main

import (
	"errors"
	"fmt"
	"maps"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/secrets"
	"github.com/agentrunner/agentrunner/toolbox"
	"github.com/agentrunner/agentrunner/workspace"
	"github.com/spf13/cobra"
)

func newValidateCommand() *cobra.Command {
	var path string
	var online bool
	cmd := &cobra.Command{
		Use:   "validate",
		Short: "Check the configuration and every file it names; report every problem",
		Long: `validate loads the configuration, every agent identity file, tools.md, every output
template and JSON Schema, and reports every problem it finds. Exit status 1 if any.

It also reports what would fail at run time: a process agent's program that is not
found, a server.listen other machines reach without server.auth, and an AGENTRUNNER_*
variable that sets no key (with the closest one). It makes no network request unless
--online is given: then it checks each provider's and tool's key in use with one cheap
authenticated request (listing the models, a one-result search); a key refused with
401 or 403 is reported as a bad key.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(path)
			var problems config.Problems
			if err != nil && !errors.As(err, &problems) {
				return failureError(err)
			}
			if cfg == nil { // the file does not decode: nothing more can be checked
				return failureError(problems)
			}
			ws, err := workspace.Load(cfg)
			var files config.Problems
			if errors.As(err, &files) {
				problems = append(problems, files...)
			} else if err != nil {
				return failureError(err)
			}
			res, err := secrets.ForConfig(cfg, os.LookupEnv)
			if err != nil {
				problems = append(problems, problem(cfg, "secrets", err))
				res = secrets.Env()
			}
			keys, kp := providerKeys(cfg, res.Lookup)
			problems = append(problems, kp...)
			_, rp := buildRuntimes(cfg, nil, agentrunner.SystemClock{}, keys, res.Lookup, nil)
			problems = append(problems, rp...)
			es, err := buildExec(cfg, res.Lookup)
			if err != nil {
				var ep config.Problems
				if !errors.As(err, &ep) {
					ep = config.Problems{problem(cfg, "execution_service", err)}
				}
				problems = append(problems, ep...)
			}
			deps := toolbox.Deps{LookupEnv: res.Lookup, Now: time.Now}
			if ws != nil {
				deps.Servers = stateAgentServers(ws)
			}
			if es != nil {
				deps.Account = es
			}
			box, err := toolbox.Build(cmd.Context(), cfg, toolbox.InUse(cfg), deps)
			if err != nil {
				var tp config.Problems
				if !errors.As(err, &tp) {
					tp = config.Problems{problem(cfg, "tools", err)}
				}
				problems = append(problems, tp...)
			} else {
				box.Close()
			}
			problems = append(problems, runTimeProblems(cfg, os.Environ(), exec.LookPath)...)
			if online {
				problems = append(problems, onlineProblems(cmd.Context(), cfg, res.Lookup, &http.Client{})...)
			}
			if len(problems) > 0 {
				// The loader checks a broken graph again; say each thing once.
				var once config.Problems
				for _, p := range problems {
					if !slices.Contains(once, p) {
						once = append(once, p)
					}
				}
				return failureError(once)
			}
			fmt.Fprintf(cmd.OutOrStdout(), "%s is valid: %d agents", path, len(ws.Agents))
			if ws.StateAgents != nil {
				fmt.Fprintf(cmd.OutOrStdout(), ", %d backlog agents", len(ws.StateAgents.Agents()))
			}
			if cfg.HasLoop() {
				var stages []string
				for _, st := range cfg.LoopStages() {
					stages = append(stages, strings.Join(st, " ‖ ")) // ‖: in parallel
				}
				fmt.Fprintf(cmd.OutOrStdout(), ", pipeline %s → end", strings.Join(stages, " → "))
			}
			for _, name := range slices.Sorted(maps.Keys(cfg.Pipelines)) {
				fmt.Fprintf(cmd.OutOrStdout(), ", pipeline %s (%d steps, from %s)", name, len(cfg.Pipelines[name].Steps), cfg.Pipelines[name].Start)
			}
			fmt.Fprintln(cmd.OutOrStdout())
			return nil
		},
	}
	configFlag(cmd, &path)
	cmd.Flags().BoolVar(&online, "online", false, "also check each provider and tool key with one authenticated request")
	return cmd
}
