package indicators

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/tool"
)

// clock is a settable clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = t
}

type fetch struct {
	asset, timeframe string
	limit            int
}

// fakeProvider serves fixed candles and records what it was asked.
type fakeProvider struct {
	mu      sync.Mutex
	candles []Candle
	err     error
	fetches []fetch
}

func (f *fakeProvider) Candles(ctx context.Context, asset, timeframe string, limit int) ([]Candle, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.fetches = append(f.fetches, fetch{asset, timeframe, limit})
	if f.err != nil {
		return nil, f.err
	}
	return f.candles[max(0, len(f.candles)-limit):], nil
}

func (f *fakeProvider) count() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.fetches)
}

func newHandler(t *testing.T, cfg *Settings, p Provider, now func() time.Time) *handler {
	t.Helper()
	_, h, err := NewWithProvider(nil, cfg, p, now)
	if err != nil {
		t.Fatal(err)
	}
	return h.(*handler)
}

func call(t *testing.T, h tool.Handler, args string) report {
	t.Helper()
	out, err := h.Call(context.Background(), json.RawMessage(args))
	if err != nil {
		t.Fatalf("call %s: %v", args, err)
	}
	var r report
	if err := json.Unmarshal([]byte(out), &r); err != nil {
		t.Fatalf("result is not the report JSON: %v\n%s", err, out)
	}
	return r
}

func TestToolOverBinance(t *testing.T) {
	candles := makeCandles(taLibClose, time.Hour)
	k, url := newKlinesServer(t, "", map[string][]Candle{"BTCUSDT": candles})
	// The clock sits inside the last candle's hour: it is still open.
	clk := &clock{t: candles[len(candles)-1].OpenTime.Add(30 * time.Minute)}
	_, h, err := New(nil, &Settings{BaseURL: url}, clk.Now)
	if err != nil {
		t.Fatal(err)
	}
	r := call(t, h, `{"asset": "BTC", "timeframe": "1h"}`)

	if q := k.requests(); len(q) != 1 || q[0] != "interval=1h&limit=500&symbol=BTCUSDT" {
		t.Errorf("klines queries = %q", q)
	}
	n := len(taLibClose)
	last := candles[n-1]
	rsi := RSI(taLibClose, 14)
	m, s, hist := MACD(taLibClose, 12, 26, 9)
	up, mid, low := Bollinger(taLibClose, 20, 2)
	want := report{
		Asset: "BTC", Timeframe: "1h", Source: "binance", Candles: n,
		LastCandle: candleOut{OpenTime: last.OpenTime, CloseTime: last.OpenTime.Add(time.Hour), Complete: false,
			Open: last.Open, High: last.High, Low: last.Low, Close: last.Close, Volume: last.Volume},
		LastClose: 107.87,
		RSI:       &rsiOut{Period: 14, Value: sig(rsi[n-1]), Previous: ptr(sig(rsi[n-2]))},
		MACD: &macdOut{Fast: 12, Slow: 26, SignalPeriod: 9,
			macdValues: macdValues{sig(m[n-1]), sig(s[n-1]), sig(hist[n-1])},
			Previous:   &macdValues{sig(m[n-2]), sig(s[n-2]), sig(hist[n-2])}},
		Bollinger: &bandsOut{Period: 20, StdDevs: 2,
			bandValues: bandValues{sig(up[n-1]), sig(mid[n-1]), sig(low[n-1])},
			PercentB:   ptr(sig((107.87 - low[n-1]) / (up[n-1] - low[n-1]))),
			Bandwidth:  ptr(sig((up[n-1] - low[n-1]) / mid[n-1])),
			Previous:   &bandValues{sig(up[n-2]), sig(mid[n-2]), sig(low[n-2])}},
	}
	for _, p := range []int{20, 50, 200} {
		e := EMA(taLibClose, p)
		want.EMA = append(want.EMA, emaOut{Period: p, Value: sig(e[n-1]), Previous: ptr(sig(e[n-2]))})
	}
	got := r
	got.VolumeProfile, got.Summary = nil, summary{}
	if diff := cmp.Diff(want, got, cmp.AllowUnexported(macdOut{}, bandsOut{})); diff != "" {
		t.Errorf("report (-want +got):\n%s", diff)
	}
	// TA-Lib's own value for the last RSI of this series (test_rsi.c).
	if r.RSI.Value < 49.63 || r.RSI.Value >= 49.64 {
		t.Errorf("last RSI = %v, want TA-Lib's 49.63", r.RSI.Value)
	}

	pr := VolumeProfile(candles[n-100:], 24, 0.7)
	vp := r.VolumeProfile
	if vp == nil || vp.Candles != 100 || len(vp.Buckets) != 24 || vp.POC != vp.Buckets[pr.POC] ||
		vp.ValueArea.Low != vp.Buckets[pr.ValueAreaLow].Low || vp.ValueArea.High != vp.Buckets[pr.ValueAreaHigh].High ||
		vp.ValueArea.VolumeShare < 0.7 {
		t.Errorf("volume profile = %+v, want the profile of the last 100 candles %+v", vp, pr)
	}

	sum := r.Summary
	wantSummary := summary{
		RSIZone:      "neutral",
		RSITrend:     direction(rsi[n-1], rsi[n-2], "rising", "falling", "unchanged"),
		MACDCross:    "none",
		MACDVsSignal: direction(m[n-1], s[n-1], "above", "below", "equal"),
		PriceVsEMA:   map[string]string{},
	}
	switch c := 107.87; {
	case c > up[n-1]:
		wantSummary.PriceVsBands = "above_upper"
	case c < low[n-1]:
		wantSummary.PriceVsBands = "below_lower"
	case c >= mid[n-1]:
		wantSummary.PriceVsBands = "upper_half"
	default:
		wantSummary.PriceVsBands = "lower_half"
	}
	for _, e := range want.EMA {
		wantSummary.PriceVsEMA[fmt.Sprintf("ema_%d", e.Period)] = direction(107.87, e.Value, "above", "below", "equal")
	}
	wantSummary.PriceVsValueArea = sum.PriceVsValueArea // checked below
	if diff := cmp.Diff(wantSummary, sum); diff != "" {
		t.Errorf("summary (-want +got):\n%s", diff)
	}
	if va := sum.PriceVsValueArea; va != "above" && va != "inside" && va != "below" {
		t.Errorf("price_vs_value_area = %q", va)
	}
	if len(r.Notes) != 0 {
		t.Errorf("notes = %q, want none", r.Notes)
	}
}

func TestOnlyRequestedIndicators(t *testing.T) {
	p := &fakeProvider{candles: makeCandles(taLibClose, 24*time.Hour)}
	h := newHandler(t, nil, p, (&clock{t: t0}).Now)
	r := call(t, h, `{"asset":"ETH","timeframe":"1d","indicators":["rsi","ema","rsi"]}`)
	if r.RSI == nil || len(r.EMA) != 3 || r.MACD != nil || r.Bollinger != nil || r.VolumeProfile != nil {
		t.Errorf("report = %+v, want RSI and EMAs only", r)
	}
	if r.Summary.MACDCross != "" || r.Summary.PriceVsBands != "" || r.Summary.PriceVsValueArea != "" || r.Summary.RSIZone == "" {
		t.Errorf("summary = %+v, want RSI and EMA entries only", r.Summary)
	}
	// An empty list means all, as an absent one does.
	all := call(t, h, `{"asset":"ETH","timeframe":"1d","indicators":[]}`)
	if all.MACD == nil || all.VolumeProfile == nil {
		t.Errorf("empty indicators list did not give all: %+v", all)
	}
}

func TestCacheTTL(t *testing.T) {
	tests := []struct {
		name string
		ttl  time.Duration
		want time.Duration // the effective TTL
	}{
		{"default", 0, 60 * time.Second},
		{"configured", 10 * time.Second, 10 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &fakeProvider{candles: makeCandles(taLibClose, time.Hour)}
			clk := &clock{t: t0}
			h := newHandler(t, &Settings{CacheTTL: config.Duration(tt.ttl)}, p, clk.Now)
			steps := []struct {
				at        time.Duration
				timeframe string
				fetches   int
			}{
				{0, "1h", 1},
				{tt.want - time.Millisecond, "1h", 1}, // still fresh
				{tt.want - time.Millisecond, "4h", 2}, // another timeframe is another entry
				{tt.want, "1h", 3},                    // expired
				{tt.want + time.Second, "1h", 3},
				{tt.want + time.Second, "4h", 3},
			}
			for _, s := range steps {
				clk.Set(t0.Add(s.at))
				call(t, h, `{"asset":"BTC","timeframe":"`+s.timeframe+`"}`)
				if n := p.count(); n != s.fetches {
					t.Fatalf("at %s (%s): %d fetches, want %d", s.at, s.timeframe, n, s.fetches)
				}
			}
		})
	}
}

func TestConcurrentCallsShareOneFetch(t *testing.T) {
	p := &fakeProvider{candles: makeCandles(taLibClose, time.Hour)}
	h := newHandler(t, nil, p, (&clock{t: t0}).Now)
	var wg sync.WaitGroup
	for range 12 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := h.Call(context.Background(), json.RawMessage(`{"asset":"BTC","timeframe":"1h"}`)); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if n := p.count(); n != 1 {
		t.Errorf("%d fetches, want 1", n)
	}
}

func TestFailedFetchIsNotCachedAndKeepsItsClass(t *testing.T) {
	p := &fakeProvider{err: tool.RetryAfter(errors.New("rate limited"), 3*time.Second)}
	h := newHandler(t, nil, p, (&clock{t: t0}).Now)
	_, err := h.Call(context.Background(), json.RawMessage(`{"asset":"BTC","timeframe":"1h"}`))
	if tool.RetryAfterOf(err) != 3*time.Second {
		t.Fatalf("err = %v, want the provider's RetryAfter", err)
	}
	p.mu.Lock()
	p.err, p.candles = nil, makeCandles(taLibClose, time.Hour)
	p.mu.Unlock()
	call(t, h, `{"asset":"BTC","timeframe":"1h"}`)
	if n := p.count(); n != 2 {
		t.Errorf("%d fetches, want 2", n)
	}
}

func TestUnknownAssetThroughBinance(t *testing.T) {
	_, url := newKlinesServer(t, "", map[string][]Candle{})
	_, h, err := New(nil, &Settings{BaseURL: url}, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, err = h.Call(context.Background(), json.RawMessage(`{"asset":"NOPE","timeframe":"4h"}`))
	if err == nil || tool.IsTransient(err) || !strings.Contains(err.Error(), "asset NOPE is not listed") {
		t.Errorf("err = %v, want a permanent error naming the asset", err)
	}
}

func TestToolOverCSV(t *testing.T) {
	dir := t.TempDir()
	var b strings.Builder
	b.WriteString("open_time,open,high,low,close,volume\n")
	for _, c := range makeCandles(taLibClose[:60], 4*time.Hour) {
		fmt.Fprintf(&b, "%s,%v,%v,%v,%v,%v\n", c.OpenTime.Format(time.RFC3339), c.Open, c.High, c.Low, c.Close, c.Volume)
	}
	writeFile(t, dir, "BTC_4h.csv", b.String())
	_, h, err := New(nil, &Settings{Provider: "csv", DataDir: dir}, (&clock{t: t0.AddDate(1, 0, 0)}).Now)
	if err != nil {
		t.Fatal(err)
	}
	r := call(t, h, `{"asset":"btc","timeframe":"4h"}`)
	if r.Source != "csv" || r.Candles != 60 || r.LastClose != taLibClose[59] || !r.LastCandle.Complete {
		t.Errorf("report = %+v", r)
	}
	want := []string{"ema 200 needs 200 candles; only 60 are available"}
	if diff := cmp.Diff(want, r.Notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
	if len(r.EMA) != 2 || r.EMA[0].Period != 20 || r.EMA[1].Period != 50 {
		t.Errorf("EMAs = %+v, want 20 and 50", r.EMA)
	}
	_, err = h.Call(context.Background(), json.RawMessage(`{"asset":"ETH","timeframe":"4h"}`))
	if err == nil || !strings.Contains(err.Error(), "there is no 4h data for ETH") {
		t.Errorf("err = %v, want the missing file named", err)
	}
}

func TestFewCandlesGiveNotes(t *testing.T) {
	p := &fakeProvider{candles: makeCandles(taLibClose[:14], time.Hour)}
	h := newHandler(t, nil, p, (&clock{t: t0}).Now)
	r := call(t, h, `{"asset":"BTC","timeframe":"1h"}`)
	want := []string{
		"rsi needs 15 candles; only 14 are available",
		"macd needs 34 candles; only 14 are available",
		"bollinger needs 20 candles; only 14 are available",
		"ema 20 needs 20 candles; only 14 are available",
		"ema 50 needs 50 candles; only 14 are available",
		"ema 200 needs 200 candles; only 14 are available",
	}
	if diff := cmp.Diff(want, r.Notes); diff != "" {
		t.Errorf("notes (-want +got):\n%s", diff)
	}
	if r.RSI != nil || r.MACD != nil || r.Bollinger != nil || r.EMA != nil || r.VolumeProfile == nil {
		t.Errorf("report = %+v", r)
	}
}

func TestSummaryZonesAndCrosses(t *testing.T) {
	rising := make([]float64, 60)
	for i := range rising {
		rising[i] = 100 + float64(i)
	}
	flat := make([]float64, 60)
	for i := range flat {
		flat[i] = 1
	}
	// Falling for a long time, then a sharp rise on the last candle: the
	// MACD line crosses its signal upwards exactly there.
	cross := make([]float64, 60)
	for i := range cross {
		cross[i] = 200 - float64(i)
	}
	cross[59] = 190
	tests := []struct {
		name   string
		closes []float64
		check  func(s summary) bool
	}{
		{"rising", rising, func(s summary) bool {
			return s.RSIZone == "overbought" && s.PriceVsBands == "upper_half" && s.PriceVsEMA["ema_20"] == "above"
		}},
		{"falling", cross[:59], func(s summary) bool { return s.RSIZone == "oversold" && s.PriceVsEMA["ema_50"] == "below" }},
		{"flat", flat, func(s summary) bool { return s.RSIZone == "flat" && s.MACDVsSignal == "equal" }},
		{"bullish cross", cross, func(s summary) bool { return s.MACDCross == "bullish_cross" && s.MACDVsSignal == "above" }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p := &fakeProvider{candles: makeCandles(tt.closes, time.Hour)}
			r := call(t, newHandler(t, nil, p, (&clock{t: t0}).Now), `{"asset":"BTC","timeframe":"1h"}`)
			if !tt.check(r.Summary) {
				t.Errorf("summary = %+v", r.Summary)
			}
		})
	}
}

func TestArguments(t *testing.T) {
	p := &fakeProvider{candles: makeCandles(taLibClose, time.Hour)}
	h := newHandler(t, nil, p, (&clock{t: t0}).Now)
	tests := []struct{ args, want string }{
		{`[]`, "arguments must be an object"},
		{`null`, "arguments must be an object"},
		{`{"timeframe":"1h"}`, "asset is required"},
		{`{"asset":"BTC/USDT","timeframe":"1h"}`, `asset "BTC/USDT" is not a ticker`},
		{`{"asset":"B","timeframe":"1h"}`, `asset "B" is not a ticker`},
		{`{"asset":7,"timeframe":"1h"}`, "asset must be a string"},
		{`{"asset":"BTC"}`, "timeframe is required: one of 1h, 4h, 1d, 1w"},
		{`{"asset":"BTC","timeframe":"15m"}`, `timeframe "15m" is not one of 1h, 4h, 1d, 1w`},
		{`{"asset":"BTC","timeframe":"1h","indicators":["rsi","stoch"]}`, `indicator "stoch" is unknown: choose from rsi, macd, bollinger, ema, volume_profile`},
		{`{"asset":"BTC","timeframe":"1h","indicators":"rsi"}`, "indicators must be a list"},
		{`{"asset":"BTC","timeframe":"1h","symbol":"X"}`, `unknown argument "symbol"`},
	}
	for _, tt := range tests {
		_, err := h.Call(context.Background(), json.RawMessage(tt.args))
		if err == nil || !strings.Contains(err.Error(), tt.want) || tool.IsTransient(err) {
			t.Errorf("args %s: err = %v, want a permanent error containing %q", tt.args, err, tt.want)
		}
	}
	if n := p.count(); n != 0 {
		t.Errorf("bad arguments caused %d fetches", n)
	}
}

func TestInvalidCandlesFromProvider(t *testing.T) {
	cs := makeCandles(taLibClose[:30], time.Hour)
	cs[10].Close = math.NaN()
	h := newHandler(t, nil, &fakeProvider{candles: cs}, nil)
	_, err := h.Call(context.Background(), json.RawMessage(`{"asset":"BTC","timeframe":"1h"}`))
	if err == nil || !strings.Contains(err.Error(), "candle 10 of BTC 1h: close NaN") {
		t.Errorf("err = %v", err)
	}
}

func TestCacheIsSwept(t *testing.T) {
	p := &fakeProvider{candles: makeCandles(taLibClose[:40], time.Hour)}
	clk := &clock{t: t0}
	h := newHandler(t, nil, p, clk.Now)
	for i := range sweepAt {
		call(t, h, fmt.Sprintf(`{"asset":"A%03d","timeframe":"1h","indicators":["rsi"]}`, i))
	}
	clk.Set(t0.Add(time.Hour))
	call(t, h, `{"asset":"NEW","timeframe":"1h","indicators":["rsi"]}`)
	h.mu.Lock()
	n := len(h.cache)
	h.mu.Unlock()
	if n != 1 {
		t.Errorf("cache holds %d entries after the stale ones were swept, want 1", n)
	}
}

func TestSpecAndConfiguration(t *testing.T) {
	zero := 0
	spec, _, err := NewWithProvider(nil, nil, &fakeProvider{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := tool.Spec{Name: Kind, Description: description([]int{20, 50, 200}), Parameters: json.RawMessage(Parameters),
		Timeout: 10 * time.Second, Retries: 2, Backoff: time.Second}
	if diff := cmp.Diff(want, spec); diff != "" {
		t.Errorf("default spec (-want +got):\n%s", diff)
	}
	if !strings.Contains(spec.Description, "EMA(20, 50, 200)") {
		t.Errorf("description %q does not name the EMAs", spec.Description)
	}
	var schema map[string]any
	if err := json.Unmarshal([]byte(Parameters), &schema); err != nil {
		t.Fatalf("Parameters is not JSON: %v", err)
	}

	spec, _, err = NewWithProvider(&config.Tool{Name: "ta", Description: "Indicators.", Timeout: config.Duration(4 * time.Second),
		Retries: &config.Retries{Max: &zero}}, &Settings{EMAPeriods: []int{21, 9, 21}}, &fakeProvider{}, nil)
	if err != nil {
		t.Fatal(err)
	}
	if spec.Name != "ta" || spec.Description != "Indicators." || spec.Timeout != 4*time.Second || spec.Retries != 0 {
		t.Errorf("configured spec = %+v", spec)
	}

	// The candle limit follows the longest EMA.
	for _, tt := range []struct {
		emas  []int
		limit int
	}{{nil, 500}, {[]int{9, 21}, 500}, {[]int{400}, 700}, {[]int{900}, 1000}, {[]int{1000}, 1000}} {
		p := &fakeProvider{candles: makeCandles(taLibClose, time.Hour)}
		h := newHandler(t, &Settings{EMAPeriods: tt.emas}, p, nil)
		call(t, h, `{"asset":"BTC","timeframe":"1h","indicators":["ema"]}`)
		if got := p.fetches[0].limit; got != tt.limit {
			t.Errorf("ema_periods %v: limit %d, want %d", tt.emas, got, tt.limit)
		}
	}

	bad := []struct {
		cfg  *config.Tool
		set  *Settings
		want string
	}{
		{nil, &Settings{EMAPeriods: []int{1}}, "ema_periods: 1 is outside 2..1000"},
		{nil, &Settings{EMAPeriods: []int{20, 1001}}, "ema_periods: 1001 is outside"},
		{nil, &Settings{Provider: "kraken"}, `provider "kraken" is not binance or csv`},
		{nil, &Settings{Provider: "csv"}, "the csv provider needs data_dir"},
		{nil, &Settings{Provider: "csv", DataDir: t.TempDir() + "/missing"}, "data_dir"},
		{nil, &Settings{BaseURL: "ftp://x"}, "scheme must be http or https"},
		{nil, &Settings{CacheTTL: config.Duration(-time.Second)}, "cache_ttl must not be negative"},
		{&config.Tool{Timeout: config.Duration(-time.Second)}, nil, "timeout must be positive"},
		{&config.Tool{Parameters: config.JSON(`"x"`)}, nil, "parameters must be a JSON Schema object"},
	}
	for _, b := range bad {
		if _, _, err := New(b.cfg, b.set, nil); err == nil || !strings.Contains(err.Error(), b.want) {
			t.Errorf("New(%+v, %+v): err = %v, want %q", b.cfg, b.set, err, b.want)
		}
	}
	if _, _, err := NewWithProvider(nil, nil, nil, nil); err == nil {
		t.Error("NewWithProvider without a provider accepted")
	}
}
