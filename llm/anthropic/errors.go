package anthropic

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clip"
)

// maxDetail bounds how much of a provider's message goes into an error.
const maxDetail = 300

// classify turns an error of the SDK into a classified error (see the
// package documentation). resp is the last HTTP response, if any.
func (m *Model) classify(ctx context.Context, resp *http.Response, err error) error {
	if ctxErr := ctx.Err(); ctxErr != nil {
		class := agentrunner.ClassInterrupted
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			class = agentrunner.ClassTimeout
		}
		return agentrunner.Fail(class, "anthropic: request abandoned: %w", ctxErr)
	}

	var apiErr *sdk.Error
	if errors.As(err, &apiErr) {
		return m.statusError(apiErr)
	}

	if errors.Is(err, context.DeadlineExceeded) {
		// Only the SDK's per-request timer can have fired: ctx is alive.
		return agentrunner.Fail(agentrunner.ClassUnavailable, "anthropic: no answer within the request timeout of %v", m.timeout)
	}
	var netErr net.Error
	if resp != nil && resp.StatusCode < 300 && !errors.As(err, &netErr) {
		// The answer came but could not be decoded (or was cut short).
		return agentrunner.Fail(agentrunner.ClassUnavailable, "anthropic: malformed response (HTTP %d): %s", resp.StatusCode, clip.String(m.redact(err.Error()), maxDetail))
	}
	return agentrunner.Fail(agentrunner.ClassUnavailable, "anthropic: request failed: %s", clip.String(m.redact(err.Error()), maxDetail))
}

// statusError classifies an HTTP error status, quoting the provider's
// error type and message (not the whole error of the SDK, which carries
// the URL and the full body).
func (m *Model) statusError(e *sdk.Error) error {
	var class agentrunner.ErrorClass
	hint := ""
	switch s := e.StatusCode; {
	case s == http.StatusUnauthorized || s == http.StatusForbidden:
		class, hint = agentrunner.ClassConfig, " (check the API key)"
	case s == http.StatusPaymentRequired:
		class = agentrunner.ClassConfig
	case s == http.StatusNotFound:
		// What the API does not find is the model, or the path under a
		// wrong base URL: either way the configuration must change.
		class, hint = agentrunner.ClassConfig, " (check the model name and the base URL)"
	case s == http.StatusRequestTimeout || s == http.StatusConflict || s == http.StatusTooManyRequests || s >= 500:
		class = agentrunner.ClassUnavailable
	case s >= 400:
		class = agentrunner.ClassInvalidOutput
	default:
		class = agentrunner.ClassUnavailable
	}

	detail := providerDetail(m.redact(e.RawJSON()))
	msg := fmt.Sprintf("anthropic: HTTP %d", e.StatusCode)
	if t := string(e.Type()); t != "" {
		msg += " " + t
	}
	if detail != "" {
		msg += ": " + detail
	}
	if e.RequestID != "" {
		msg += " (request " + e.RequestID + ")"
	}
	return agentrunner.Fail(class, "%s%s", clip.String(m.redact(msg), 2*maxDetail), hint)
}

// providerDetail returns error.message of an Anthropic error body, or the
// start of any other body (a proxy's HTML page, say).
func providerDetail(raw string) string {
	var body struct {
		Error struct {
			Message string `json:"message"`
		} `json:"error"`
	}
	if json.Unmarshal([]byte(raw), &body) == nil && body.Error.Message != "" {
		return clip.String(oneLine(body.Error.Message), maxDetail)
	}
	return clip.String(oneLine(raw), maxDetail)
}

func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }
