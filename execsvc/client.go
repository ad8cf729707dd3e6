package execsvc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentrunner/agentrunner"
)

// Client calls the Execution Service. Every error it returns is built with
// agentrunner.Fail, so the engine's retry policy can tell a failure worth
// retrying (unreachable, 5xx, 429) from one an operator must look at.
// A Client is safe for concurrent use.
type Client struct {
	// endpoint is the base URL without a trailing slash.
	endpoint string
	token    string
	http     *http.Client
}

// NewClient returns a client of the service at baseURL. baseURL is http or
// https with a host, and may carry a path prefix; it must not carry
// credentials, a query or a fragment. token, when not empty, is sent as a
// bearer token. timeout bounds each request, from connecting to reading the
// whole answer, and must be positive.
func NewClient(baseURL, token string, timeout time.Duration) (*Client, error) {
	u, err := url.Parse(baseURL)
	if err != nil {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "execution service base URL %q: %v", baseURL, err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "execution service base URL %q: scheme must be http or https", baseURL)
	case u.Host == "":
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "execution service base URL %q: host is missing", baseURL)
	case u.User != nil:
		// Credentials in the URL would show up in every transport error.
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "execution service base URL must not contain credentials; configure the token instead")
	case u.RawQuery != "" || u.ForceQuery || u.Fragment != "":
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "execution service base URL %q: must not have a query or fragment", baseURL)
	}
	if err := checkBearer(token); err != nil {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "execution service token: %v", err)
	}
	if timeout <= 0 {
		return nil, agentrunner.Errorf(agentrunner.EINVALID, "execution service timeout must be positive, got %s", timeout)
	}
	return &Client{
		endpoint: strings.TrimRight(u.String(), "/"),
		token:    token,
		http: &http.Client{
			Timeout:   timeout,
			Transport: newTransport(),
			// A redirect means the base URL is wrong; following one could
			// replay the submission somewhere unintended.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// newTransport gives each client its own connection pool with the standard
// settings (proxy from the environment, dial and TLS timeouts).
func newTransport() http.RoundTripper {
	if t, ok := http.DefaultTransport.(*http.Transport); ok {
		return t.Clone()
	}
	// Someone replaced the default; respect that choice.
	return http.DefaultTransport
}

// Submit hands a strategy to the service under an idempotency key (1..200
// printable ASCII characters). Submitting the same key and strategy again
// returns the first receipt with Replayed set; the service acts only once.
func (c *Client) Submit(ctx context.Context, key string, s Submission) (*Receipt, error) {
	if err := checkToken("idempotency key", key); err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "submit strategy: %v", err)
	}
	body, err := s.Body()
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInvalidOutput, "submit strategy of cycle %q: %v", clip(s.CycleID, 80), err)
	}
	if len(body) > MaxBodyBytes {
		return nil, agentrunner.Fail(agentrunner.ClassInvalidOutput,
			"submit strategy of cycle %s: request body is %d bytes, more than the contract's limit of %d", s.CycleID, len(body), MaxBodyBytes)
	}
	what := fmt.Sprintf("submit strategy of cycle %s with key %q", s.CycleID, key)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, c.endpoint+"/v1/strategies", bytes.NewReader(body))
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "%s: build request: %v", what, err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Idempotency-Key", key)
	status, rc, err := c.do(req, what, http.StatusAccepted, http.StatusOK)
	if err != nil {
		return nil, err
	}
	rc.Replayed = status == http.StatusOK
	return rc, nil
}

// Status asks where the service is with a strategy it acknowledged.
func (c *Client) Status(ctx context.Context, strategyID string) (*Receipt, error) {
	if err := checkToken("strategy id", strategyID); err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "query strategy status: %v", err)
	}
	what := fmt.Sprintf("query status of strategy %q", strategyID)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.endpoint+"/v1/strategies/"+url.PathEscape(strategyID), nil)
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "%s: build request: %v", what, err)
	}
	_, rc, err := c.do(req, what, http.StatusOK)
	if err != nil {
		return nil, err
	}
	if rc.StrategyID != strategyID {
		return nil, agentrunner.Fail(agentrunner.ClassUnavailable, "%s: invalid response: it is about strategy %s", what, c.clean(strconv.Quote(rc.StrategyID)))
	}
	return rc, nil
}

// do sends req and returns the status and the validated receipt of a
// successful answer, or a classified error.
func (c *Client) do(req *http.Request, what string, okStatuses ...int) (int, *Receipt, error) {
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "agentrunner")
	if c.token != "" {
		req.Header.Set("Authorization", "Bearer "+c.token)
	}
	resp, err := c.http.Do(req)
	if err != nil {
		// Unreachable, refused, reset, timed out or cancelled: all may pass.
		// The cause stays wrapped so callers can see context.Canceled.
		return 0, nil, agentrunner.Fail(agentrunner.ClassUnavailable, "%s: %w", what, err)
	}
	defer resp.Body.Close()
	body, readErr := io.ReadAll(io.LimitReader(resp.Body, MaxBodyBytes+1))
	tooLarge := len(body) > MaxBodyBytes

	success := false
	for _, s := range okStatuses {
		success = success || resp.StatusCode == s
	}
	if !success {
		return 0, nil, c.statusError(what, resp, body, readErr == nil && !tooLarge)
	}
	switch {
	case readErr != nil:
		return 0, nil, agentrunner.Fail(agentrunner.ClassUnavailable, "%s: read response: %w", what, readErr)
	case tooLarge:
		return 0, nil, agentrunner.Fail(agentrunner.ClassUnavailable, "%s: invalid response: body is larger than %d bytes", what, MaxBodyBytes)
	}
	rc, err := parseReceipt(body)
	if err != nil {
		return 0, nil, agentrunner.Fail(agentrunner.ClassUnavailable, "%s: invalid response (status %d): %s", what, resp.StatusCode, c.clean(err.Error()))
	}
	return resp.StatusCode, rc, nil
}

// parseReceipt decodes a success body and checks what the engine relies on.
// Unknown fields are allowed so the service can add some without breaking us.
// Its messages quote the service in full; the caller redacts and shortens
// them, in that order, so a cut cannot leave part of the token behind.
func parseReceipt(body []byte) (*Receipt, error) {
	var rc Receipt
	if err := json.Unmarshal(body, &rc); err != nil {
		return nil, fmt.Errorf("body is not a JSON receipt: %v", err)
	}
	if rc.StrategyID == "" {
		return nil, errors.New("strategy_id is missing")
	}
	// The id goes into later URLs and events; hold it to the same rule as keys.
	if err := checkToken("strategy_id", rc.StrategyID); err != nil {
		return nil, err
	}
	if !rc.Status.Valid() {
		return nil, fmt.Errorf("status %q is not one of acknowledged, executing, completed, error", rc.Status)
	}
	return &rc, nil
}

// statusError classifies a non-success answer. Only failures that may pass
// by themselves are retryable; the rest need a person.
func (c *Client) statusError(what string, resp *http.Response, body []byte, complete bool) error {
	apiErr := &APIError{StatusCode: resp.StatusCode}
	var eb errorBody
	if complete && json.Unmarshal(body, &eb) == nil && eb.Error.Code != "" {
		apiErr.Code = c.clean(eb.Error.Code)
		apiErr.Message = c.clean(eb.Error.Message)
	} else if complete {
		apiErr.Message = c.clean(string(body))
	}
	code := resp.StatusCode
	var class agentrunner.ErrorClass
	switch {
	case code >= 500, code == http.StatusTooManyRequests, code == http.StatusRequestTimeout:
		class = agentrunner.ClassUnavailable
	case code == http.StatusUnauthorized, code == http.StatusForbidden:
		class = agentrunner.ClassConfig
	case code == http.StatusConflict:
		// The key was used for another strategy: a bug or a reused
		// database; an operator must look before anything is resent.
		class = agentrunner.ClassConfig
	case code == http.StatusNotFound, code == http.StatusMethodNotAllowed:
		// The endpoint or the strategy is unknown to the service: the base
		// URL or the service's state is wrong, not the strategy.
		class = agentrunner.ClassConfig
	case code >= 300 && code < 400:
		if loc := resp.Header.Get("Location"); loc != "" && apiErr.Message == "" {
			apiErr.Message = "redirect to " + c.clean(loc) + "; check the base URL"
		}
		class = agentrunner.ClassConfig
	case code >= 400:
		// 400, 413, 415, 422 …: the service refuses the strategy as sent.
		class = agentrunner.ClassInvalidOutput
	default:
		// A 2xx or 1xx other than the contract's: the service is not
		// speaking the contract right now.
		class = agentrunner.ClassUnavailable
	}
	return agentrunner.Fail(class, "%s: %w", what, apiErr)
}

// maxMessage bounds the service text quoted in an error message.
const maxMessage = 300

// clean makes text from the service fit for an error message: the token is
// redacted should the service echo it, control characters are replaced and
// the length is bounded.
func (c *Client) clean(s string) string {
	if c.token != "" {
		s = strings.ReplaceAll(s, c.token, "[redacted]")
	}
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return clip(strings.Join(strings.Fields(s), " "), maxMessage)
}

// checkBearer checks a token for an Authorization header: visible ASCII
// only. The message never quotes the token.
func checkBearer(token string) error {
	for i := 0; i < len(token); i++ {
		if c := token[i]; c <= 0x20 || c > 0x7e {
			return fmt.Errorf("character %d is not visible ASCII", i+1)
		}
	}
	return nil
}
