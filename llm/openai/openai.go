// Package openai is the llm.Model of OpenAI's Chat Completions API and of
// the servers that speak it (Ollama, vLLM, llama.cpp, LiteLLM, …), over the
// official openai-go SDK. The SDK sends the request, authenticates, and
// retries rate limits, 5xx and connection errors honouring Retry-After;
// this package maps the provider-neutral llm types onto the wire format,
// decodes the answer strictly and classifies every failure for the engine.
package openai

import (
	"context"
	"errors"
	"fmt"
	"math"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/option"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/safeurl"
	"github.com/agentrunner/agentrunner/llm"
)

// Defaults of Config.
const (
	// DefaultRequestTimeout bounds one HTTP request: long answers of large
	// models take a minute or more, a hung connection must not take the
	// whole attempt.
	DefaultRequestTimeout = 2 * time.Minute
	// DefaultMaxRetries is the SDK's retries of 429, 5xx and connection
	// errors within one Generate call; the engine's own retries are slower
	// and cost a whole attempt.
	DefaultMaxRetries = 2
)

// BaseURLEnv is the variable that gives the base URL when Config.BaseURL is
// empty, as the OpenAI SDKs and tools read it.
const BaseURLEnv = "OPENAI_BASE_URL"

// Config says where and how to reach the API.
type Config struct {
	// BaseURL of the API, e.g. http://127.0.0.1:11434/v1 for Ollama;
	// "" → OPENAI_BASE_URL from the environment, else https://api.openai.com/v1.
	BaseURL string
	// APIKey is the key itself (the caller reads it from the variable the
	// configuration names). "" sends no Authorization header, for local
	// servers that need none; OPENAI_API_KEY is deliberately not read, so a
	// key is never sent to a server it was not configured for.
	APIKey string
	// KeyFrom, when set, gives the key at each request instead, so a
	// rotated key is sent from the next request on; APIKey stays the key
	// sent while KeyFrom gives none that can be sent.
	KeyFrom func() string
	// RequestTimeout bounds one HTTP request; 0 → DefaultRequestTimeout. A
	// request that times out is not retried by the SDK: the error is
	// ClassUnavailable and the engine's retry policy decides.
	RequestTimeout time.Duration
	// MaxRetries of 429/5xx/connection errors by the SDK, which honours
	// Retry-After; 0 → DefaultMaxRetries, negative → none.
	MaxRetries int
}

// Model is an llm.Model speaking Chat Completions. It is safe for
// concurrent use.
type Model struct {
	chat oai.ChatCompletionService
	// key is kept only to scrub it from provider messages.
	key string
	// keyFrom gives the key of each request (Config.KeyFrom).
	keyFrom func() string
	// endpoint names the server in errors (without credentials or query).
	endpoint string
}

var _ llm.Model = (*Model)(nil)

// New returns a Model for cfg. It fails with a ClassConfig error when the
// configuration cannot work (a base URL that is not http(s), a negative
// timeout, a key with a line break).
func New(cfg Config) (*Model, error) {
	if cfg.RequestTimeout < 0 {
		return nil, agentrunner.Fail(agentrunner.ClassConfig, "openai: request timeout %v is negative", cfg.RequestTimeout)
	}
	timeout := cfg.RequestTimeout
	if timeout == 0 {
		timeout = DefaultRequestTimeout
	}
	retries := cfg.MaxRetries
	switch {
	case retries == 0:
		retries = DefaultMaxRetries
	case retries < 0:
		retries = 0
	}
	if i := badKeyByte(cfg.APIKey); i >= 0 {
		// Never echo the key: say where the bad character is, not what the key is.
		return nil, agentrunner.Fail(agentrunner.ClassConfig,
			"openai: the API key contains a space, line break or control character at byte %d (a trailing newline from a file?)", i)
	}

	base, source := cfg.BaseURL, "base_url"
	if base == "" {
		base, source = os.Getenv(BaseURLEnv), BaseURLEnv
	}
	endpoint := "https://api.openai.com/v1"
	opts := []option.RequestOption{
		option.WithEnvironmentProduction(),
		// Through llm.Transport so a Recording on the context sees the exchange.
		option.WithHTTPClient(&http.Client{Transport: llm.Transport(nil)}),
		option.WithAPIKey(cfg.APIKey),
		option.WithMaxRetries(retries),
		option.WithRequestTimeout(timeout),
	}
	m := &Model{key: cfg.APIKey, keyFrom: cfg.KeyFrom}
	if cfg.KeyFrom != nil {
		opts = append(opts, option.WithMiddleware(m.sendKey))
	}
	if base != "" {
		u, err := parseBaseURL(base)
		if err != nil {
			return nil, agentrunner.Fail(agentrunner.ClassConfig, "openai: base URL from %s: %v", source, err)
		}
		endpoint = safeurl.String(u)
		opts = append(opts, option.WithBaseURL(u.String()))
	}
	// The chat service alone, not oai.NewClient: the client would read
	// OPENAI_API_KEY, OPENAI_ORG_ID and friends from the environment and
	// send them to whatever server base_url names.
	m.chat, m.endpoint = oai.NewChatCompletionService(opts...), endpoint
	return m, nil
}

// badKeyByte is the index of a byte that cannot be in a key sent in a
// header (a space, a line break, a control character), or -1.
func badKeyByte(key string) int {
	return strings.IndexFunc(key, func(r rune) bool { return r <= ' ' || r == 0x7f })
}

// currentKey is the key of the next request: KeyFrom's when it gives one
// that can be sent, else the key the model was made with.
func (m *Model) currentKey() string {
	if m.keyFrom != nil {
		if k := m.keyFrom(); k != "" && badKeyByte(k) < 0 {
			return k
		}
	}
	return m.key
}

// sendKey sets the key of each request as it is sent.
func (m *Model) sendKey(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	if k := m.currentKey(); k != "" {
		r.Header.Set("Authorization", "Bearer "+k)
	}
	return next(r)
}

// parseBaseURL accepts an absolute http(s) URL without credentials, query
// or fragment. Its errors quote the URL without credentials, fragment or
// secret query values (safeurl.String).
func parseBaseURL(raw string) (*url.URL, error) {
	u, err := url.Parse(strings.TrimSpace(raw))
	if err != nil {
		return nil, errors.New("not a valid URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return nil, fmt.Errorf("%s: the scheme must be http or https", safeurl.String(u))
	}
	if u.Host == "" {
		return nil, fmt.Errorf("%s: no host", safeurl.String(u))
	}
	if u.User != nil {
		// They would be sent as basic auth and written to recordings.
		return nil, fmt.Errorf("%s: credentials do not belong in the base URL; give the key through the API key variable", safeurl.String(u))
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("%s: a base URL takes no query or fragment", safeurl.String(u))
	}
	return u, nil
}

// Generate runs one model turn. Its errors are built with agentrunner.Fail;
// see classify for the mapping.
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	params, err := buildParams(req)
	if err != nil {
		return nil, err
	}
	if ctx.Err() != nil {
		return nil, ctxFailure(ctx)
	}
	var body []byte
	var httpResp *http.Response
	// The body is decoded here rather than by the SDK, whose lenient
	// decoder turns a wrong type into a zero value: a malformed answer must
	// be an error that says what is wrong.
	_, err = m.chat.New(ctx, params, option.WithResponseBodyInto(&body), option.WithResponseInto(&httpResp))
	if err != nil {
		return nil, m.classify(ctx, err, httpResp, req.Model)
	}
	resp, err := decodeCompletion(body)
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassUnavailable, "openai %s: malformed response: %s", m.endpoint, m.scrub(err.Error()))
	}
	return resp, nil
}

// ctxFailure is the error of a call whose context ended: the attempt's
// deadline is a timeout, anything else (shutdown) an interruption. Both
// wrap ctx's error for errors.Is.
func ctxFailure(ctx context.Context) error {
	err := ctx.Err()
	if cause := context.Cause(ctx); cause != nil && cause != err {
		err = fmt.Errorf("%w: %w", err, cause)
	}
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		return agentrunner.Fail(agentrunner.ClassTimeout, "openai: the attempt's deadline passed during the request: %w", err)
	}
	return agentrunner.Fail(agentrunner.ClassInterrupted, "openai: request cancelled: %w", err)
}

// classify maps a failed call to an error class:
//   - the caller's context ended: ClassInterrupted (ClassTimeout for its deadline);
//   - 401, 403 (key rejected), 402 (billing) and 404 (no such model or
//     endpoint, which an operator must fix): ClassConfig;
//   - 408, 409, 425, 429 and 5xx, after the SDK's retries: ClassUnavailable;
//   - any other 4xx (a request the provider refuses, e.g. a context too
//     long): ClassInvalidOutput, since resending it fails the same way;
//   - a request timeout or a connection error: ClassUnavailable.
func (m *Model) classify(ctx context.Context, err error, httpResp *http.Response, model string) error {
	if ctx.Err() != nil {
		return ctxFailure(ctx)
	}
	var apiErr *oai.Error
	switch {
	case errors.As(err, &apiErr):
		return m.statusError(apiErr.StatusCode, providerMessage(apiErr, apiErr.Response), model)
	case httpResp != nil && httpResp.StatusCode >= 400:
		// The SDK could not parse the error body (not JSON, or "error" is
		// a string): the status still decides.
		return m.statusError(httpResp.StatusCode, providerMessage(nil, httpResp), model)
	case errors.Is(err, context.DeadlineExceeded):
		return agentrunner.Fail(agentrunner.ClassUnavailable, "openai %s: no response within the request timeout: %s", m.endpoint, m.scrub(err.Error()))
	default:
		return agentrunner.Fail(agentrunner.ClassUnavailable, "openai %s: request failed: %s", m.endpoint, m.scrub(err.Error()))
	}
}

func (m *Model) statusError(status int, msg, model string) error {
	detail := fmt.Sprintf("HTTP %d", status)
	if msg = m.scrub(msg); msg != "" {
		detail += ": " + msg
	}
	switch {
	case status == http.StatusUnauthorized || status == http.StatusForbidden:
		if m.currentKey() == "" {
			return agentrunner.Fail(agentrunner.ClassConfig, "openai %s: the server wants an API key and none is configured (%s)", m.endpoint, detail)
		}
		return agentrunner.Fail(agentrunner.ClassConfig, "openai %s: the API key was rejected (%s)", m.endpoint, detail)
	case status == http.StatusPaymentRequired:
		return agentrunner.Fail(agentrunner.ClassConfig, "openai %s: the account cannot pay for the request (%s)", m.endpoint, detail)
	case status == http.StatusNotFound:
		return agentrunner.Fail(agentrunner.ClassConfig, "openai %s: model %q or the endpoint does not exist; check the model name and base_url (%s)", m.endpoint, model, detail)
	case status == http.StatusRequestTimeout, status == http.StatusConflict, status == http.StatusTooEarly,
		status == http.StatusTooManyRequests, status >= 500:
		return agentrunner.Fail(agentrunner.ClassUnavailable, "openai %s: the server is unavailable (%s)", m.endpoint, detail)
	default:
		return agentrunner.Fail(agentrunner.ClassInvalidOutput, "openai %s: the request was refused (%s)", m.endpoint, detail)
	}
}

// finite reports whether f is a usable number.
func finite(f float64) bool { return !math.IsNaN(f) && !math.IsInf(f, 0) }
