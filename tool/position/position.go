// Package position is the current_position tool (FR-108, FR-127..129): it
// gives agents the trading account as the Execution Service reports it
// (equity, cash, positions, balances and open orders), cached for a few
// seconds so a busy step does not hammer the service.
package position

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/execsvc"
	"github.com/agentrunner/agentrunner/tool"
)

// Kind is the tool kind in the configuration (tools.<name>.kind).
const Kind = "current_position"

// Defaults of the tool's settings.
const (
	// DefaultCacheTTL is how long an account snapshot is reused (FR-129).
	DefaultCacheTTL = 30 * time.Second
	// DefaultTimeout bounds one call: a data query.
	DefaultTimeout = 10 * time.Second
	DefaultRetries = 2
	DefaultBackoff = time.Second
)

// Description is what a model is told the tool does, unless the
// configuration overrides it.
const Description = "Returns the trading account as the Execution Service reports it: " +
	"equity and cash (in `currency`), open positions (asset, side long/short, quantity, " +
	"avg_entry_price, mark_price, market_value, unrealized_pnl), balances per asset " +
	"(free and locked) and open orders (id, asset, side, type, quantity, price, status, " +
	"created_at). `as_of` says when the service took the snapshot; a snapshot is reused for " +
	"a short while (30 seconds unless configured otherwise). Takes no arguments."

// Parameters is the JSON Schema of the arguments: none (FR-108).
const Parameters = `{"type":"object","properties":{},"additionalProperties":false}`

// AccountReader reads the trading account; *execsvc.Client is one. Errors
// are classified with agentrunner.Fail as the client does.
type AccountReader interface {
	Account(ctx context.Context) (*execsvc.Account, error)
}

var _ AccountReader = (*execsvc.Client)(nil)

// Settings are the keys of a current_position tool's section besides
// those every tool has. The account is read from the Execution Service at
// execution_service.url.
type Settings struct {
	// CacheTTL is how long a snapshot is reused; default DefaultCacheTTL.
	CacheTTL config.Duration `yaml:"cache_ttl"`
}

// Check has nothing to report: a duration is never negative once decoded.
func (s *Settings) Check(config.Reporter) {}

// ToolKind is what configuration knows of the kind: a data query's
// timeout, and its settings.
func ToolKind() config.ToolKind {
	return config.ToolKind{Timeout: DefaultTimeout, Settings: func() config.ToolSettings { return &Settings{} }}
}

// New returns the tool's Spec and Handler. cfg and set may be nil (all
// defaults); client is required; now is the clock of the cache (nil:
// time.Now).
func New(cfg *config.Tool, set *Settings, client AccountReader, now func() time.Time) (tool.Spec, tool.Handler, error) {
	if cfg == nil {
		cfg = &config.Tool{}
	}
	if set == nil {
		set = &Settings{}
	}
	if client == nil {
		return tool.Spec{}, nil, errors.New("current_position: the Execution Service client is missing (configure execution_service.url)")
	}
	spec, err := tool.FromConfig(tool.Spec{Name: Kind, Description: Description, Parameters: json.RawMessage(Parameters),
		Timeout: DefaultTimeout, Retries: DefaultRetries, Backoff: DefaultBackoff}, cfg)
	if err != nil {
		return tool.Spec{}, nil, err
	}
	ttl := set.CacheTTL.D()
	switch {
	case ttl < 0:
		return tool.Spec{}, nil, fmt.Errorf("%s: cache_ttl must not be negative, got %s", spec.Name, ttl)
	case ttl == 0:
		ttl = DefaultCacheTTL
	}
	if now == nil {
		now = time.Now
	}
	h := &handler{name: spec.Name, client: client, ttl: ttl, now: now, sem: make(chan struct{}, 1)}
	return spec, h, nil
}

// handler serves calls from a cached snapshot while it is fresh.
type handler struct {
	name   string
	client AccountReader
	ttl    time.Duration
	now    func() time.Time

	// sem is held while the cache is read or refilled, so concurrent calls
	// share one request to the service; waiting respects each caller's ctx.
	sem       chan struct{}
	result    string
	fetchedAt time.Time
}

var _ tool.Handler = (*handler)(nil)

// Call returns the account as JSON. A service that cannot be reached or
// answers badly is a transient error, never a panic (FR-128).
func (h *handler) Call(ctx context.Context, args json.RawMessage) (string, error) {
	if err := checkNoArguments(h.name, args); err != nil {
		return "", err
	}
	select {
	case h.sem <- struct{}{}:
	case <-ctx.Done():
		return "", tool.Transient(fmt.Errorf("gave up waiting for the account data: %w", ctx.Err()))
	}
	defer func() { <-h.sem }()

	now := h.now()
	if h.result != "" && now.Sub(h.fetchedAt) < h.ttl && !now.Before(h.fetchedAt) {
		return h.result, nil
	}
	a, err := h.client.Account(ctx)
	if err != nil {
		return "", classify(err)
	}
	if a == nil {
		return "", errors.New("the Execution Service client returned no account and no error")
	}
	out, err := json.Marshal(a)
	if err != nil {
		return "", fmt.Errorf("encode the account: %w", err)
	}
	h.result, h.fetchedAt = string(out), now
	return h.result, nil
}

// classify turns a client error into a tool error the model can act on;
// only failures that may pass by themselves are transient.
func classify(err error) error {
	switch agentrunner.ClassOf(err) {
	case agentrunner.ClassUnavailable, agentrunner.ClassTimeout:
		return tool.Transient(fmt.Errorf("the Execution Service is unavailable, so the account cannot be read right now: %w", err))
	case agentrunner.ClassConfig:
		return fmt.Errorf("the Execution Service refused the account request; an operator must check execution_service.url and its token: %w", err)
	default:
		return fmt.Errorf("reading the account failed: %w", err)
	}
}

// checkNoArguments accepts what a model sends for a tool without
// parameters: nothing, null or an empty object.
func checkNoArguments(name string, args json.RawMessage) error {
	args = bytes.TrimSpace(args)
	if len(args) == 0 || bytes.Equal(args, []byte("null")) {
		return nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(args, &obj); err != nil {
		return fmt.Errorf("%s takes no arguments; send an empty object {}", name)
	}
	for k := range obj {
		return fmt.Errorf("%s takes no arguments, but %q was given; send an empty object {}", name, k)
	}
	return nil
}
