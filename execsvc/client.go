package execsvc

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/internal/clip"
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
	// now stamps heartbeats; tests replace it.
	now func() time.Time
	// tokenFrom, when set, gives the token at each request (TokenFrom).
	tokenFrom func() string
}

// TokenFrom makes the client send the token get returns at each request,
// so a rotated token is used from the next request on. A value that
// cannot be a bearer token is not taken: the last good one stays.
func (c *Client) TokenFrom(get func() string) *Client {
	c.tokenFrom = get
	return c
}

// bearer is the token of the next request.
func (c *Client) bearer() string {
	if c.tokenFrom != nil {
		if v := c.tokenFrom(); v != "" && checkBearer(v) == nil {
			return v
		}
	}
	return c.token
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
		now:      time.Now,
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
// That holds after the strategy's ValidUntil too, so a submission whose
// first answer was lost can be sent again to learn whether the service has
// it: a service without the key refuses an expired strategy (IsExpired).
func (c *Client) Submit(ctx context.Context, key string, s Submission) (*Receipt, error) {
	if err := checkToken("idempotency key", key); err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "submit strategy: %v", err)
	}
	body, err := s.Body()
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInvalidOutput, "submit strategy of cycle %q: %v", clip.String(s.CycleID, 80), err)
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

// CodeStrategyExpired is the error code of a 422 answer to a submission
// whose validity window is over and whose key the service does not know.
const CodeStrategyExpired = "strategy_expired"

// IsExpired reports whether err is the service refusing a strategy it does
// not have because its validity window is over (422 strategy_expired): the
// strategy was not handed over and never will be.
func IsExpired(err error) bool {
	var apiErr *APIError
	return errors.As(err, &apiErr) && apiErr.StatusCode == http.StatusUnprocessableEntity && apiErr.Code == CodeStrategyExpired
}

// Account asks the service for the trading account: equity, cash,
// positions, balances and open orders (GET /v1/account). The answer is
// validated before it is returned, so a caller can rely on every field the
// contract marks as required.
func (c *Client) Account(ctx context.Context) (*Account, error) {
	const what = "query account"
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, c.endpoint+"/v1/account", nil)
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "%s: build request: %v", what, err)
	}
	status, body, err := c.send(req, what, http.StatusOK)
	if err != nil {
		return nil, err
	}
	a, err := ParseAccount(body)
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassUnavailable, "%s: invalid response (status %d): %s", what, status, c.clean(err.Error()))
	}
	return a, nil
}

// do sends req and returns the status and the validated receipt of a
// successful answer, or a classified error.
func (c *Client) do(req *http.Request, what string, okStatuses ...int) (int, *Receipt, error) {
	status, body, err := c.send(req, what, okStatuses...)
	if err != nil {
		return 0, nil, err
	}
	rc, err := parseReceipt(body)
	if err != nil {
		return 0, nil, agentrunner.Fail(agentrunner.ClassUnavailable, "%s: invalid response (status %d): %s", what, status, c.clean(err.Error()))
	}
	return status, rc, nil
}

// send sends req and returns the status and the whole body of a successful
// answer, or a classified error; the caller validates the body.
func (c *Client) send(req *http.Request, what string, okStatuses ...int) (int, []byte, error) {
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "agentrunner")
	if token := c.bearer(); token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
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
	return resp.StatusCode, body, nil
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
		// The key was used for another strategy or safe-mode request: a
		// bug or a reused database; an operator must look before anything
		// is resent.
		class = agentrunner.ClassConfig
	case code == http.StatusLocked:
		// The service is in safe mode; it stays there until an operator
		// lifts it, so retrying on a timer would only spend the retries.
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
	for _, token := range []string{c.token, c.bearer()} {
		if token != "" {
			s = strings.ReplaceAll(s, token, "[redacted]")
		}
	}
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return clip.String(strings.Join(strings.Fields(s), " "), maxMessage)
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

// Account is the trading account as the Execution Service sees it: the
// answer of GET /v1/account. Agents read it through the current_position
// tool (FR-127) to size and check strategies against what is held.
type Account struct {
	// AsOf is when the service took this snapshot.
	AsOf time.Time `json:"as_of"`
	// Equity is the account's total value in Currency; Cash the part of it
	// held as cash. Either may be negative on a margin account.
	Equity   float64 `json:"equity"`
	Cash     float64 `json:"cash"`
	Currency string  `json:"currency"`
	// Positions, Balances and OpenOrders are never nil in an Account that
	// ParseAccount returned: an empty list means there are none.
	Positions  []Position `json:"positions"`
	Balances   []Balance  `json:"balances"`
	OpenOrders []Order    `json:"open_orders"`
}

// Position is an open position in one asset.
type Position struct {
	Asset string `json:"asset"`
	// Quantity is the size held, never negative; Side says the direction.
	Quantity      float64 `json:"quantity"`
	AvgEntryPrice float64 `json:"avg_entry_price"`
	MarkPrice     float64 `json:"mark_price"`
	// MarketValue and UnrealizedPnL are in the account's currency and signed.
	MarketValue   float64 `json:"market_value"`
	UnrealizedPnL float64 `json:"unrealized_pnl"`
	// Side is "long" or "short".
	Side string `json:"side"`
}

// Balance is what the account holds of one asset (a coin or a currency).
type Balance struct {
	Asset string `json:"asset"`
	// Free can be used; Locked is reserved by open orders.
	Free   float64 `json:"free"`
	Locked float64 `json:"locked"`
}

// Order is an order the service placed that has not finished.
type Order struct {
	ID    string `json:"id"`
	Asset string `json:"asset"`
	// Side is "buy" or "sell".
	Side string `json:"side"`
	// Type is "market", "limit", "stop" or "stop_limit".
	Type     string  `json:"type"`
	Quantity float64 `json:"quantity"`
	// Price is the limit or stop price; nil for a market order.
	Price *float64 `json:"price"`
	// Status is "open" or "partially_filled".
	Status    string    `json:"status"`
	CreatedAt time.Time `json:"created_at"`
}

// Enumerations of the account contract.
var (
	positionSides = []string{"long", "short"}
	orderSides    = []string{"buy", "sell"}
	orderTypes    = []string{"market", "limit", "stop", "stop_limit"}
	orderStatuses = []string{"open", "partially_filled"}
)

// ParseAccount decodes and validates the body of GET /v1/account. Unknown
// fields are allowed, as for every answer of the contract; a missing
// required field, a negative quantity or price, an unknown enumeration value
// or a bad time is an error that names the field, such as
// "positions[1].mark_price is missing".
func ParseAccount(body []byte) (*Account, error) {
	var w struct {
		AsOf       *string           `json:"as_of"`
		Equity     *float64          `json:"equity"`
		Cash       *float64          `json:"cash"`
		Currency   *string           `json:"currency"`
		Positions  []json.RawMessage `json:"positions"`
		Balances   []json.RawMessage `json:"balances"`
		OpenOrders []json.RawMessage `json:"open_orders"`
	}
	if err := json.Unmarshal(body, &w); err != nil {
		return nil, fmt.Errorf("body is not a JSON account: %v", err)
	}
	v := &fieldChecker{}
	a := &Account{
		AsOf:       v.time("as_of", w.AsOf),
		Equity:     v.number("equity", w.Equity, false),
		Cash:       v.number("cash", w.Cash, false),
		Currency:   v.currency("currency", w.Currency),
		Positions:  []Position{},
		Balances:   []Balance{},
		OpenOrders: []Order{},
	}
	v.list("positions", w.Positions)
	v.list("balances", w.Balances)
	v.list("open_orders", w.OpenOrders)
	if v.err != nil {
		return nil, v.err
	}
	for i, raw := range w.Positions {
		var p struct {
			Asset         *string  `json:"asset"`
			Quantity      *float64 `json:"quantity"`
			AvgEntryPrice *float64 `json:"avg_entry_price"`
			MarkPrice     *float64 `json:"mark_price"`
			MarketValue   *float64 `json:"market_value"`
			UnrealizedPnL *float64 `json:"unrealized_pnl"`
			Side          *string  `json:"side"`
		}
		at := fmt.Sprintf("positions[%d]", i)
		if err := json.Unmarshal(raw, &p); err != nil {
			return nil, fmt.Errorf("%s is not a position object: %v", at, err)
		}
		a.Positions = append(a.Positions, Position{
			Asset:         v.asset(at+".asset", p.Asset),
			Quantity:      v.number(at+".quantity", p.Quantity, true),
			AvgEntryPrice: v.number(at+".avg_entry_price", p.AvgEntryPrice, true),
			MarkPrice:     v.number(at+".mark_price", p.MarkPrice, true),
			MarketValue:   v.number(at+".market_value", p.MarketValue, false),
			UnrealizedPnL: v.number(at+".unrealized_pnl", p.UnrealizedPnL, false),
			Side:          v.enum(at+".side", p.Side, positionSides),
		})
	}
	for i, raw := range w.Balances {
		var b struct {
			Asset  *string  `json:"asset"`
			Free   *float64 `json:"free"`
			Locked *float64 `json:"locked"`
		}
		at := fmt.Sprintf("balances[%d]", i)
		if err := json.Unmarshal(raw, &b); err != nil {
			return nil, fmt.Errorf("%s is not a balance object: %v", at, err)
		}
		a.Balances = append(a.Balances, Balance{
			Asset:  v.asset(at+".asset", b.Asset),
			Free:   v.number(at+".free", b.Free, true),
			Locked: v.number(at+".locked", b.Locked, true),
		})
	}
	for i, raw := range w.OpenOrders {
		var o struct {
			ID        *string         `json:"id"`
			Asset     *string         `json:"asset"`
			Side      *string         `json:"side"`
			Type      *string         `json:"type"`
			Quantity  *float64        `json:"quantity"`
			Price     json.RawMessage `json:"price"`
			Status    *string         `json:"status"`
			CreatedAt *string         `json:"created_at"`
		}
		at := fmt.Sprintf("open_orders[%d]", i)
		if err := json.Unmarshal(raw, &o); err != nil {
			return nil, fmt.Errorf("%s is not an order object: %v", at, err)
		}
		order := Order{
			ID:        v.id(at+".id", o.ID),
			Asset:     v.asset(at+".asset", o.Asset),
			Side:      v.enum(at+".side", o.Side, orderSides),
			Type:      v.enum(at+".type", o.Type, orderTypes),
			Quantity:  v.number(at+".quantity", o.Quantity, true),
			Status:    v.enum(at+".status", o.Status, orderStatuses),
			CreatedAt: v.time(at+".created_at", o.CreatedAt),
		}
		order.Price = v.price(at+".price", o.Price, order.Type)
		a.OpenOrders = append(a.OpenOrders, order)
	}
	if v.err != nil {
		return nil, v.err
	}
	return a, nil
}

// Validate checks an Account against the same rules as ParseAccount, so a
// service (or the mock) can refuse to send one that breaks the contract.
func (a *Account) Validate() error {
	if a == nil {
		return errors.New("account is missing")
	}
	body, err := json.Marshal(a)
	if err != nil {
		return fmt.Errorf("account cannot be encoded: %v", err)
	}
	_, err = ParseAccount(body)
	return err
}

// fieldChecker validates fields of a decoded answer and keeps the first
// problem, so the parser reads straight through.
type fieldChecker struct{ err error }

func (v *fieldChecker) fail(format string, args ...any) {
	if v.err == nil {
		v.err = fmt.Errorf(format, args...)
	}
}

func (v *fieldChecker) number(at string, f *float64, nonNegative bool) float64 {
	switch {
	case f == nil:
		v.fail("%s is missing", at)
		return 0
	case math.IsNaN(*f) || math.IsInf(*f, 0):
		v.fail("%s is not a finite number", at)
	case nonNegative && *f < 0:
		v.fail("%s is %v; it must not be negative", at, *f)
	}
	return *f
}

func (v *fieldChecker) time(at string, s *string) time.Time {
	if s == nil {
		v.fail("%s is missing", at)
		return time.Time{}
	}
	t, err := time.Parse(time.RFC3339Nano, *s)
	if err != nil {
		v.fail("%s %q is not an RFC 3339 time", at, clip.String(*s, 80))
	}
	return t
}

func (v *fieldChecker) currency(at string, s *string) string {
	if s == nil {
		v.fail("%s is missing", at)
		return ""
	}
	ok := len(*s) == 3
	for i := 0; ok && i < len(*s); i++ {
		ok = (*s)[i] >= 'A' && (*s)[i] <= 'Z'
	}
	if !ok {
		v.fail("%s %q is not a three-letter currency code such as USD", at, clip.String(*s, 40))
	}
	return *s
}

// maxAssetLen bounds asset names; they are shown to models and in logs.
const maxAssetLen = 40

func (v *fieldChecker) asset(at string, s *string) string {
	if s == nil || *s == "" {
		v.fail("%s is missing", at)
		return ""
	}
	ok := len(*s) <= maxAssetLen
	for i := 0; ok && i < len(*s); i++ {
		c := (*s)[i]
		ok = c >= 'A' && c <= 'Z' || c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || strings.IndexByte("._:/-", c) >= 0
	}
	if !ok {
		v.fail("%s %q is not an asset name (1 to %d letters, digits and . _ : / -)", at, clip.String(*s, 60), maxAssetLen)
	}
	return *s
}

func (v *fieldChecker) id(at string, s *string) string {
	if s == nil {
		v.fail("%s is missing", at)
		return ""
	}
	if err := checkToken(at, *s); err != nil {
		v.fail("%v", err)
	}
	return *s
}

func (v *fieldChecker) enum(at string, s *string, allowed []string) string {
	if s == nil {
		v.fail("%s is missing", at)
		return ""
	}
	for _, a := range allowed {
		if *s == a {
			return *s
		}
	}
	v.fail("%s %q is not one of %s", at, clip.String(*s, 40), strings.Join(allowed, ", "))
	return *s
}

func (v *fieldChecker) list(at string, items []json.RawMessage) {
	if items == nil {
		v.fail("%s is missing (send [] when there are none)", at)
	}
}

// price checks an order's price: a non-negative number, or null (or
// absent) for a market order only.
func (v *fieldChecker) price(at string, raw json.RawMessage, orderType string) *float64 {
	if len(raw) == 0 || string(raw) == "null" {
		if orderType != "market" {
			v.fail("%s is missing; only a market order may have none", at)
		}
		return nil
	}
	var f float64
	if err := json.Unmarshal(raw, &f); err != nil {
		v.fail("%s is not a number", at)
		return nil
	}
	v.number(at, &f, true)
	return &f
}
