// Package anthropic is the llm.Model of Anthropic's Messages API, over the
// official Go SDK.
//
// The adapter translates the provider-neutral llm types to the API and
// back, and classifies every failure with agentrunner.Fail so the runtime
// can tell a retryable one from one that needs an operator:
//
//   - 401, 403 (a rejected key) and 402 (billing) are ClassConfig; the
//     key never appears in an error.
//   - 404 is ClassConfig too: what the API does not find is the configured
//     model (or a base URL with a wrong path), which only an operator fixes.
//   - 400, 413, 422 and any other 4xx are ClassInvalidOutput: the request
//     was refused as it is, and sending it again fails again.
//   - 408, 409, 429, 5xx, 529 (overloaded), request timeouts, connection
//     errors and malformed responses are ClassUnavailable. The SDK has
//     already retried all but the malformed responses MaxRetries times,
//     honouring retry-after-ms, retry-after and x-should-retry.
//   - The caller's context ending is ClassInterrupted (cancelled) or
//     ClassTimeout (deadline), wrapping the context's error.
//
// Two mappings are worth knowing. Usage.InputTokens is the whole prompt:
// Anthropic's input_tokens leaves out cache reads and writes, so they are
// added back (CachedTokens is cache_read_input_tokens), which makes totals
// comparable with OpenAI's. And a request's JSONSchema is not sent as a
// structured-output setting but appended to the system prompt as an
// instruction ("Answer with one JSON document matching this schema …"),
// which every model and Anthropic-compatible gateway understands; the
// runtime validates the answer against the schema in any case.
//
// The SDK's reading of the environment (ANTHROPIC_API_KEY,
// ANTHROPIC_AUTH_TOKEN, profiles, custom headers) is switched off: the key
// is the one in Config, so what the configuration says is what is used.
// Only ANTHROPIC_BASE_URL is honoured, when Config.BaseURL is empty.
package anthropic

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"strings"
	"time"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/option"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/llm"
)

// Defaults of Config.
const (
	DefaultRequestTimeout = 2 * time.Minute
	DefaultMaxRetries     = 2
	// DefaultMaxTokens is sent when a request sets no MaxTokens, because
	// the API requires max_tokens.
	DefaultMaxTokens = 4096
)

// BaseURLEnv is the variable read for the base URL when Config.BaseURL is
// empty, as Anthropic's own tools do.
const BaseURLEnv = "ANTHROPIC_BASE_URL"

// Config says how to reach the API.
type Config struct {
	// BaseURL is the API's root, without /v1 (the SDK adds /v1/messages).
	// Empty: ANTHROPIC_BASE_URL from the environment, else
	// https://api.anthropic.com.
	BaseURL string
	// APIKey is the key itself, sent as x-api-key; the caller reads it from
	// the configured variable. Empty sends no key, for gateways that
	// authenticate otherwise.
	APIKey string
	// KeyFrom, when set, gives the key at each request instead, so a
	// rotated key is sent from the next request on; APIKey stays the key
	// sent while KeyFrom gives none.
	KeyFrom func() string
	// RequestTimeout bounds one HTTP request (each retry gets its own);
	// 0 means DefaultRequestTimeout.
	RequestTimeout time.Duration
	// MaxRetries is how often the SDK retries a 408, 409, 429, 5xx or 529
	// answer, a timed-out request or a connection error, waiting as the
	// retry-after headers say or backing off exponentially; 0 means
	// DefaultMaxRetries, a negative value disables retries.
	MaxRetries int
}

// Model is Anthropic's Messages API as an llm.Model. It is safe for
// concurrent use.
type Model struct {
	client  sdk.Client
	key     string
	timeout time.Duration
	// keyFrom gives the key of each request (Config.KeyFrom).
	keyFrom func() string
}

var _ llm.Model = (*Model)(nil)

// New checks cfg and returns a Model. Its errors are ClassConfig.
func New(cfg Config) (*Model, error) {
	base := cfg.BaseURL
	from := "base URL"
	if base == "" {
		base, from = os.Getenv(BaseURLEnv), BaseURLEnv
	}
	if base != "" {
		if err := checkBaseURL(base); err != nil {
			return nil, agentrunner.Fail(agentrunner.ClassConfig, "anthropic: %s: %v", from, err)
		}
	}
	timeout := cfg.RequestTimeout
	switch {
	case timeout == 0:
		timeout = DefaultRequestTimeout
	case timeout < 0:
		return nil, agentrunner.Fail(agentrunner.ClassConfig, "anthropic: request timeout %v is negative", timeout)
	}
	retries := cfg.MaxRetries
	switch {
	case retries == 0:
		retries = DefaultMaxRetries
	case retries < 0:
		retries = 0
	}

	opts := []option.RequestOption{
		option.WithoutEnvironmentDefaults(),
		// llm.Transport records the exchanges of a context with a Recording.
		option.WithHTTPClient(&http.Client{Transport: llm.Transport(nil)}),
		option.WithMaxRetries(retries),
		option.WithRequestTimeout(timeout),
	}
	if base != "" {
		opts = append(opts, option.WithBaseURL(base))
	}
	if cfg.APIKey != "" {
		opts = append(opts, option.WithAPIKey(cfg.APIKey))
	}
	m := &Model{key: cfg.APIKey, timeout: timeout, keyFrom: cfg.KeyFrom}
	if cfg.KeyFrom != nil {
		opts = append(opts, option.WithMiddleware(m.sendKey))
	}
	m.client = sdk.NewClient(opts...)
	return m, nil
}

// currentKey is the key of the next request: KeyFrom's when it gives one,
// else the key the model was made with.
func (m *Model) currentKey() string {
	if m.keyFrom != nil {
		if k := m.keyFrom(); k != "" && !strings.ContainsFunc(k, func(r rune) bool { return r <= ' ' || r == 0x7f }) {
			return k
		}
	}
	return m.key
}

// sendKey sets the key of each request as it is sent.
func (m *Model) sendKey(r *http.Request, next option.MiddlewareNext) (*http.Response, error) {
	if k := m.currentKey(); k != "" {
		r.Header.Set("X-Api-Key", k)
	}
	return next(r)
}

// checkBaseURL accepts an absolute http(s) URL. It never quotes the URL,
// which may carry credentials.
func checkBaseURL(raw string) error {
	u, err := url.Parse(raw)
	if err != nil {
		return errors.New("not a valid URL")
	}
	if u.Scheme != "http" && u.Scheme != "https" {
		return fmt.Errorf("scheme %q: want http or https", u.Scheme)
	}
	if u.Host == "" {
		return errors.New("no host")
	}
	if u.RawQuery != "" || u.Fragment != "" {
		return errors.New("a base URL has no query or fragment")
	}
	return nil
}

// Generate sends one model turn.
func (m *Model) Generate(ctx context.Context, req *llm.Request) (*llm.Response, error) {
	if req == nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "anthropic: nil request")
	}
	params, err := buildParams(req)
	if err != nil {
		return nil, err
	}
	var httpResp *http.Response
	msg, err := m.client.Messages.New(ctx, params, option.WithResponseInto(&httpResp))
	if err != nil {
		return nil, m.classify(ctx, httpResp, err)
	}
	resp, err := convertResponse(msg)
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassUnavailable, "anthropic: malformed response: %s", m.redact(err.Error()))
	}
	return resp, nil
}

// redact removes the key from text that may echo it.
func (m *Model) redact(s string) string {
	for _, k := range []string{m.key, m.currentKey()} {
		if k != "" {
			s = strings.ReplaceAll(s, k, "[redacted]")
		}
	}
	return s
}
