package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
)

// defaultHealthURL is where serve answers in the container image, whose
// configuration listens on port 8080.
const defaultHealthURL = "http://127.0.0.1:8080/health/ready"

// healthBodyLimit bounds the readiness answer read: it is a few checks.
const healthBodyLimit = 64 << 10

func newHealthcheckCommand() *cobra.Command {
	var target string
	var timeout time.Duration
	cmd := &cobra.Command{
		Use:   "healthcheck",
		Short: "Exit 0 when a running server reports ready, else 1 (a container's HEALTHCHECK)",
		Long: `healthcheck asks a running server's /health/ready (or the URL --url names) and exits 0
when it answers 200, else 1, printing the failed checks. The container image has no curl
or shell: its HEALTHCHECK runs this. The API key, when the endpoint needs one (health is
not in server.public), is read from $AGENTRUNNER_API_KEY.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			u, err := healthURL(target)
			if err != nil {
				return usageError(err)
			}
			if timeout <= 0 {
				return usageError(fmt.Errorf("--timeout %s: want a positive duration", timeout))
			}
			ctx, cancel := context.WithTimeout(cmd.Context(), timeout)
			defer cancel()
			msg, err := checkHealth(ctx, u, os.Getenv(envAPIKey))
			if err != nil {
				return failureError(err)
			}
			fmt.Fprintln(cmd.OutOrStdout(), msg)
			return nil
		},
	}
	cmd.Flags().StringVar(&target, "url", defaultHealthURL, "the readiness endpoint to ask")
	cmd.Flags().DurationVar(&timeout, "timeout", 5*time.Second, "how long to wait for the answer")
	return cmd
}

// healthURL checks the --url value: an http or https URL with a host.
func healthURL(raw string) (string, error) {
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("--url %q: want an http:// or https:// URL with a host, such as %s", raw, defaultHealthURL)
	}
	return u.String(), nil
}

// checkHealth asks u and returns the line to print when it answers 200,
// else an error that names the failed checks.
func checkHealth(ctx context.Context, u, apiKey string) (string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return "", err
	}
	if apiKey != "" {
		req.Header.Set("Authorization", "Bearer "+apiKey)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return "", fmt.Errorf("not ready: %s does not answer: %w", u, unwrapURLError(err))
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, healthBodyLimit))
	if resp.StatusCode == http.StatusOK {
		return "ready: " + u, nil
	}
	return "", fmt.Errorf("not ready: %s answered %s%s", u, resp.Status, failedChecks(body))
}

// failedChecks lists the checks a readiness answer says failed, or the
// API's error message, as ": name (message), …"; "" when the body says
// neither.
func failedChecks(body []byte) string {
	var answer struct {
		Checks map[string]struct {
			OK      bool   `json:"ok"`
			Message string `json:"message"`
		} `json:"checks"`
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal(body, &answer) != nil {
		return ""
	}
	var failed []string
	for name, c := range answer.Checks {
		if !c.OK {
			failed = append(failed, fmt.Sprintf("%s (%s)", name, c.Message))
		}
	}
	slices.Sort(failed)
	if answer.Error.Message != "" {
		failed = append(failed, answer.Error.Message)
	}
	if len(failed) == 0 {
		return ""
	}
	return ": " + strings.Join(failed, ", ")
}

// unwrapURLError drops net/http's "Get URL:" prefix: the message names
// the URL already.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}
