package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/examples/review"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/spf13/cobra"
)

// demoServe writes an example workspace into dir and serves it, the API
// and the web dashboard on listen (a loopback address), until Ctrl-C: the
// crypton loop's first cycle runs at once on mock agents against a mock
// Execution Service; the review example starts one run whose loop reaches
// its cap and waits at its gate for a person. serve's JSON log goes to
// serve.log in dir, so the terminal shows where to look.
func demoServe(cmd *cobra.Command, example, dir, listen string) error {
	if err := requireLoopback(listen); err != nil {
		return usageError(fmt.Errorf("--listen: %w", err))
	}
	env := map[string]string{config.EnvPrefix + "_SERVER_LISTEN": listen}
	var start func(ctx context.Context, base string) error
	switch example {
	case "crypton":
		if _, err := writeExample(dir, true, config.ProviderMock); err != nil {
			return err
		}
		es := execsvc.NewMock(execsvc.MockOptions{ExecutingAfter: 1, CompletedAfter: 2})
		url, err := es.Start("127.0.0.1:0")
		if err != nil {
			return failureError(fmt.Errorf("start the mock Execution Service: %w", err))
		}
		defer es.Close()
		env[config.EnvPrefix+"_EXECUTION_SERVICE_URL"] = url
		env[config.EnvPrefix+"_EXECUTION_SERVICE_POLL_INTERVAL"] = "50ms"
	case "review":
		if _, err := review.Write(dir, true); err != nil {
			return existsIsUsage(err)
		}
		start = startReviewRun
	default:
		return usageError(fmt.Errorf("--serve works with --example crypton or review, not %q", example))
	}
	for k, v := range env {
		os.Setenv(k, v)
	}
	log, err := os.Create(filepath.Join(dir, "serve.log"))
	if err != nil {
		return failureError(err)
	}
	defer log.Close()
	serve := newServeCommand()
	serve.SetArgs([]string{"-c", filepath.Join(dir, config.FileName)})
	serve.SetOut(cmd.OutOrStdout())
	serve.SetErr(log)
	serve.SilenceUsage, serve.SilenceErrors = true, true
	ctx, cancel := context.WithCancel(cmd.Context())
	defer cancel()
	go announce(ctx, cmd, "http://"+listen, dir, example, start)
	return serve.ExecuteContext(ctx)
}

// announce waits for the server, prints where the dashboard is, and then
// runs start, if any.
func announce(ctx context.Context, cmd *cobra.Command, base, dir, example string, start func(context.Context, string) error) {
	out := cmd.OutOrStdout()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(base + "/health/live")
		if err == nil {
			resp.Body.Close()
			break
		}
		if ctx.Err() != nil {
			return // serve stopped: it said why
		}
		if time.Now().After(deadline) {
			fmt.Fprintf(cmd.ErrOrStderr(), "the server did not answer on %s; see %s\n", base, filepath.Join(dir, "serve.log"))
			return
		}
		time.Sleep(100 * time.Millisecond)
	}
	fmt.Fprintf(out, "demo workspace: %s (%s; the server's log is %s)\n", dir, example, filepath.Join(dir, "serve.log"))
	fmt.Fprintf(out, "dashboard:      %s/  (Ctrl-C to stop)\n", base)
	if start == nil {
		fmt.Fprintln(out, "the loop's first cycle runs now; open the overview, then the cycle, to watch it")
		return
	}
	if err := start(ctx, base); err != nil {
		fmt.Fprintf(cmd.ErrOrStderr(), "start the demo's run: %v\n", err)
		return
	}
	fmt.Fprintf(out, "a review run started: its loop reaches its cap and waits at the gate decide; approve it at %s/gates\n", base)
}

// startReviewRun starts a run of the review example through the API; its
// reviewer asks for more revisions than the loop allows, so it waits at
// the gate decide.
func startReviewRun(ctx context.Context, base string) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, base+"/api/pipelines/review/runs",
		strings.NewReader(`{"inputs": {"topic": "durable agents"}}`))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusCreated && resp.StatusCode != http.StatusAccepted {
		return fmt.Errorf("the API answered %s", resp.Status)
	}
	return nil
}
