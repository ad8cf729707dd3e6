package indicators

import (
	"context"
	"encoding/csv"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"math"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentrunner/agentrunner/internal/clip"
	"github.com/agentrunner/agentrunner/internal/retryafter"
	"github.com/agentrunner/agentrunner/tool"
)

// Provider gives the candles of an asset in one timeframe, oldest first:
// at most limit of the most recent ones. Errors are written for the model
// ("asset FOO is not listed ...") and marked with tool.Transient or
// tool.RetryAfter when a retry may help.
type Provider interface {
	Candles(ctx context.Context, asset, timeframe string, limit int) ([]Candle, error)
}

// Timeframes are the candle lengths the tool offers (FR-132), as Binance
// names its intervals.
var Timeframes = map[string]time.Duration{
	"1h": time.Hour,
	"4h": 4 * time.Hour,
	"1d": 24 * time.Hour,
	"1w": 7 * 24 * time.Hour,
}

// MaxCandles is the most candles one request may ask for (Binance's cap).
const MaxCandles = 1000

// assetPattern is what an asset ticker looks like (BTC, ETH, 1INCH).
var assetPattern = regexp.MustCompile(`^[A-Z0-9]{2,15}$`)

// checkRequest validates what every provider is asked, so a provider used
// on its own is as safe as through the tool.
func checkRequest(asset, timeframe string, limit int) error {
	if !assetPattern.MatchString(asset) {
		return fmt.Errorf("asset %q is not a ticker: use 2 to 15 capital letters and digits, such as BTC", clip.String(asset, 40))
	}
	if _, ok := Timeframes[timeframe]; !ok {
		return fmt.Errorf("timeframe %q is not one of 1h, 4h, 1d, 1w", clip.String(timeframe, 20))
	}
	if limit < 1 || limit > MaxCandles {
		return fmt.Errorf("candle limit %d is outside 1..%d", limit, MaxCandles)
	}
	return nil
}

// checkCandles validates a series from outside: finite, positive prices
// with low <= open, close <= high, non-negative volume, and strictly
// increasing times. where names a candle in an error ("row 7").
func checkCandles(cs []Candle, where func(i int) string) error {
	for i, c := range cs {
		for _, f := range []struct {
			name string
			v    float64
		}{{"open", c.Open}, {"high", c.High}, {"low", c.Low}, {"close", c.Close}} {
			if math.IsNaN(f.v) || math.IsInf(f.v, 0) || f.v <= 0 {
				return fmt.Errorf("%s: %s %v is not a positive price", where(i), f.name, f.v)
			}
		}
		if math.IsNaN(c.Volume) || math.IsInf(c.Volume, 0) || c.Volume < 0 {
			return fmt.Errorf("%s: volume %v is not a non-negative number", where(i), c.Volume)
		}
		if c.Low > c.High || c.Open < c.Low || c.Open > c.High || c.Close < c.Low || c.Close > c.High {
			return fmt.Errorf("%s: open %v and close %v must lie between low %v and high %v", where(i), c.Open, c.Close, c.Low, c.High)
		}
		if i > 0 && !c.OpenTime.After(cs[i-1].OpenTime) {
			return fmt.Errorf("%s: open time %s is not after the previous candle's %s; candles must be oldest first without repeats",
				where(i), c.OpenTime.Format(time.RFC3339), cs[i-1].OpenTime.Format(time.RFC3339))
		}
	}
	return nil
}

// DefaultBinanceURL is the public Binance spot API.
const DefaultBinanceURL = "https://api.binance.com"

// maxKlinesBytes bounds a klines answer: 1000 candles take about 150 KB.
const maxKlinesBytes = 4 << 20

// Binance reads candles from a Binance-compatible klines API
// (GET /api/v3/klines), pricing each asset against USDT.
type Binance struct {
	base   string
	client *http.Client
	// now dates an HTTP-date Retry-After.
	now func() time.Time
}

var _ Provider = (*Binance)(nil)

// NewBinance returns a provider for the API at baseURL (http or https,
// optionally with a path prefix; empty means DefaultBinanceURL). client
// nil means a client of its own that follows no redirects; ctx bounds each
// request.
func NewBinance(baseURL string, client *http.Client) (*Binance, error) {
	if baseURL == "" {
		baseURL = DefaultBinanceURL
	}
	u, err := url.Parse(baseURL)
	switch {
	case err != nil:
		return nil, fmt.Errorf("binance base URL %q: %v", baseURL, err)
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("binance base URL %q: scheme must be http or https", baseURL)
	case u.Host == "":
		return nil, fmt.Errorf("binance base URL %q: host is missing", baseURL)
	case u.User != nil:
		return nil, errors.New("binance base URL must not contain credentials")
	case u.RawQuery != "" || u.Fragment != "":
		return nil, fmt.Errorf("binance base URL %q: must not have a query or fragment", baseURL)
	}
	if client == nil {
		transport := http.DefaultTransport
		if t, ok := transport.(*http.Transport); ok {
			transport = t.Clone()
		}
		client = &http.Client{
			Transport: transport,
			// A redirect means the base URL is wrong; say so instead.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		}
	}
	return &Binance{base: strings.TrimRight(u.String(), "/"), client: client, now: time.Now}, nil
}

// Candles asks for the limit most recent klines of <asset>USDT.
func (b *Binance) Candles(ctx context.Context, asset, timeframe string, limit int) ([]Candle, error) {
	if err := checkRequest(asset, timeframe, limit); err != nil {
		return nil, err
	}
	symbol := asset + "USDT"
	q := url.Values{"symbol": {symbol}, "interval": {timeframe}, "limit": {strconv.Itoa(limit)}}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, b.base+"/api/v3/klines?"+q.Encode(), nil)
	if err != nil {
		return nil, fmt.Errorf("build the market data request: %w", err)
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", "agentrunner")
	resp, err := b.client.Do(req)
	if err != nil {
		// Unreachable, reset, timed out: all may pass.
		return nil, tool.Transient(fmt.Errorf("market data for %s could not be fetched: %w", asset, err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxKlinesBytes+1))
	if err != nil {
		return nil, tool.Transient(fmt.Errorf("market data for %s: reading the answer failed: %w", asset, err))
	}
	if resp.StatusCode != http.StatusOK {
		return nil, binanceStatusError(resp, body, asset, symbol, b.now())
	}
	if len(body) > maxKlinesBytes {
		return nil, tool.Transient(fmt.Errorf("market data for %s: the answer is larger than %d bytes", asset, maxKlinesBytes))
	}
	cs, err := parseKlines(body)
	if err != nil {
		// A malformed answer from a working API is most likely a glitch.
		return nil, tool.Transient(fmt.Errorf("market data for %s %s is malformed: %v", asset, timeframe, err))
	}
	if len(cs) == 0 {
		return nil, fmt.Errorf("there are no %s candles for %s (%s) yet", timeframe, asset, symbol)
	}
	return cs, nil
}

// binanceStatusError classifies a non-200 answer of the klines API.
func binanceStatusError(resp *http.Response, body []byte, asset, symbol string, now time.Time) error {
	var e struct {
		Code *int   `json:"code"`
		Msg  string `json:"msg"`
	}
	detail := ""
	if json.Unmarshal(body, &e) == nil && e.Code != nil {
		detail = fmt.Sprintf(" (code %d: %s)", *e.Code, clean(e.Msg))
	} else if len(body) > 0 {
		detail = " (" + clean(string(body)) + ")"
	}
	code := resp.StatusCode
	switch {
	case code == http.StatusBadRequest && e.Code != nil && *e.Code == -1121:
		return fmt.Errorf("asset %s is not listed on the market data provider against USDT (no symbol %s); check the ticker", asset, symbol)
	case code == http.StatusTooManyRequests || code == http.StatusTeapot:
		err := fmt.Errorf("the market data provider is rate limiting requests (HTTP %d)%s", code, detail)
		if wait, ok := retryafter.Parse(resp.Header.Get("Retry-After"), now); ok {
			return tool.RetryAfter(err, min(wait, maxRetryAfter))
		}
		return tool.Transient(err)
	case code >= 500:
		return tool.Transient(fmt.Errorf("the market data provider failed (HTTP %d)%s", code, detail))
	case code == http.StatusUnavailableForLegalReasons || code == http.StatusForbidden:
		return fmt.Errorf("the market data provider refuses requests from here (HTTP %d)%s; an operator must set the tool's base_url to a Binance-compatible API that can be reached", code, detail)
	case code >= 300 && code < 400:
		return fmt.Errorf("the market data provider redirected the request (HTTP %d to %s); an operator must fix the tool's base_url", code, clean(resp.Header.Get("Location")))
	default:
		return fmt.Errorf("the market data provider refused the request for %s (HTTP %d)%s", asset, code, detail)
	}
}

// maxRetryAfter bounds a Retry-After wait taken from an answer.
const maxRetryAfter = 24 * time.Hour

// parseKlines decodes Binance's array of arrays: [open time (ms), open,
// high, low, close, volume, close time, ...], prices as decimal strings.
// Numbers are accepted too, as some compatible APIs send them.
func parseKlines(body []byte) ([]Candle, error) {
	var rows [][]json.RawMessage
	if err := json.Unmarshal(body, &rows); err != nil {
		return nil, fmt.Errorf("not an array of klines: %v", err)
	}
	cs := make([]Candle, len(rows))
	for i, row := range rows {
		if len(row) < 6 {
			return nil, fmt.Errorf("kline %d has %d fields, want at least 6", i, len(row))
		}
		var ms int64
		if err := json.Unmarshal(row[0], &ms); err != nil {
			return nil, fmt.Errorf("kline %d: open time %s is not milliseconds", i, clip.String(string(row[0]), 40))
		}
		c := Candle{OpenTime: time.UnixMilli(ms).UTC()}
		for k, dst := range []*float64{&c.Open, &c.High, &c.Low, &c.Close, &c.Volume} {
			v, err := decimal(row[k+1])
			if err != nil {
				return nil, fmt.Errorf("kline %d field %d: %v", i, k+1, err)
			}
			*dst = v
		}
		cs[i] = c
	}
	if err := checkCandles(cs, func(i int) string { return fmt.Sprintf("kline %d", i) }); err != nil {
		return nil, err
	}
	return cs, nil
}

// decimal reads a JSON string or number holding a decimal.
func decimal(raw json.RawMessage) (float64, error) {
	var s string
	if err := json.Unmarshal(raw, &s); err != nil {
		var f float64
		if err := json.Unmarshal(raw, &f); err != nil {
			return 0, fmt.Errorf("%s is not a decimal", clip.String(string(raw), 40))
		}
		return f, nil
	}
	f, err := strconv.ParseFloat(strings.TrimSpace(s), 64)
	if err != nil {
		return 0, fmt.Errorf("%q is not a decimal", clip.String(s, 40))
	}
	return f, nil
}

// maxCSVBytes bounds a candle file; a year of hourly candles is ~600 KB.
const maxCSVBytes = 256 << 20

// CSV reads candles from files <ASSET>_<timeframe>.csv in a directory, with
// the header open_time,open,high,low,close,volume and one candle per row,
// oldest first; open_time is RFC 3339 or Unix milliseconds.
type CSV struct {
	dir string
}

var _ Provider = (*CSV)(nil)

// NewCSV returns a provider of the files in dir, which must exist.
func NewCSV(dir string) (*CSV, error) {
	if dir == "" {
		return nil, errors.New("the csv provider needs data_dir: the directory of <ASSET>_<timeframe>.csv files")
	}
	info, err := os.Stat(dir)
	if err != nil {
		return nil, fmt.Errorf("data_dir: %w", err)
	}
	if !info.IsDir() {
		return nil, fmt.Errorf("data_dir %s is not a directory", dir)
	}
	return &CSV{dir: dir}, nil
}

// csvHeader is the required header row.
var csvHeader = []string{"open_time", "open", "high", "low", "close", "volume"}

// Candles reads the file of asset and timeframe and returns its last limit
// candles.
func (p *CSV) Candles(ctx context.Context, asset, timeframe string, limit int) ([]Candle, error) {
	if err := checkRequest(asset, timeframe, limit); err != nil {
		return nil, err
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	name := asset + "_" + timeframe + ".csv"
	f, err := os.Open(filepath.Join(p.dir, name))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, fmt.Errorf("there is no %s data for %s: %s is not in the candle data directory", timeframe, asset, name)
	}
	if err != nil {
		return nil, fmt.Errorf("candles of %s %s cannot be read: %w", asset, timeframe, err)
	}
	defer f.Close()
	if info, err := f.Stat(); err == nil && info.Size() > maxCSVBytes {
		return nil, fmt.Errorf("%s is larger than %d MiB; keep only the candles needed", name, maxCSVBytes>>20)
	}
	cs, err := parseCSV(f, name)
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, fmt.Errorf("%s has no candles", name)
	}
	if len(cs) > limit {
		cs = cs[len(cs)-limit:]
	}
	return cs, nil
}

func parseCSV(r io.Reader, name string) ([]Candle, error) {
	cr := csv.NewReader(r)
	cr.FieldsPerRecord = len(csvHeader)
	cr.TrimLeadingSpace = true
	cr.ReuseRecord = true
	header, err := cr.Read()
	if err != nil {
		return nil, fmt.Errorf("%s: the header is unreadable: %v", name, err)
	}
	for i, h := range header {
		h = strings.ToLower(strings.TrimSpace(strings.TrimPrefix(h, "\ufeff")))
		if h != csvHeader[i] {
			return nil, fmt.Errorf("%s: the header must be %s, column %d is %q", name, strings.Join(csvHeader, ","), i+1, clip.String(h, 40))
		}
	}
	var cs []Candle
	lines := []int{}
	for {
		rec, err := cr.Read()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, fmt.Errorf("%s: %v", name, err)
		}
		line, _ := cr.FieldPos(0)
		t, err := parseTime(rec[0])
		if err != nil {
			return nil, fmt.Errorf("%s line %d: open_time %v", name, line, err)
		}
		c := Candle{OpenTime: t}
		for k, dst := range []*float64{&c.Open, &c.High, &c.Low, &c.Close, &c.Volume} {
			v, err := strconv.ParseFloat(strings.TrimSpace(rec[k+1]), 64)
			if err != nil {
				return nil, fmt.Errorf("%s line %d: %s %q is not a number", name, line, csvHeader[k+1], clip.String(rec[k+1], 40))
			}
			*dst = v
		}
		cs = append(cs, c)
		lines = append(lines, line)
	}
	if err := checkCandles(cs, func(i int) string { return fmt.Sprintf("%s line %d", name, lines[i]) }); err != nil {
		return nil, err
	}
	return cs, nil
}

// parseTime reads RFC 3339 or Unix milliseconds.
func parseTime(s string) (time.Time, error) {
	s = strings.TrimSpace(s)
	if s != "" && strings.Trim(s, "0123456789") == "" {
		ms, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return time.Time{}, fmt.Errorf("%q is out of range", clip.String(s, 40))
		}
		return time.UnixMilli(ms).UTC(), nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("%q is neither RFC 3339 nor Unix milliseconds", clip.String(s, 40))
	}
	return t.UTC(), nil
}

// clean makes upstream text fit for an error message: control characters
// replaced, spaces collapsed, length bounded.
func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	return clip.String(strings.Join(strings.Fields(s), " "), 200)
}
