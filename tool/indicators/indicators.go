// Package indicators is the technical_indicators tool (FR-109, FR-130..133):
// RSI, MACD, Bollinger Bands, EMAs and a volume profile of an asset's recent
// candles, from a Binance-compatible API or CSV files, with the candles
// cached per asset and timeframe.
//
// The arithmetic (ta.go) is pure and exported, and follows TA-Lib so the
// numbers match what traders' tools show.
package indicators

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/agentrunner/agentrunner/config"
	"github.com/agentrunner/agentrunner/internal/clip"
	"github.com/agentrunner/agentrunner/tool"
)

// Kind is the tool kind in the configuration (tools.<name>.kind).
const Kind = "technical_indicators"

// Provider names of the configuration (tools.<name>.provider).
const (
	ProviderBinance = "binance"
	ProviderCSV     = "csv"
)

// Defaults of the tool's settings.
const (
	// DefaultCacheTTL is how long candles are reused (FR-133).
	DefaultCacheTTL = 60 * time.Second
	// DefaultTimeout bounds one call: a data query.
	DefaultTimeout = 10 * time.Second
	DefaultRetries = 2
	DefaultBackoff = time.Second
	// DefaultCandles is how many candles are fetched, unless a long EMA
	// needs more: enough for every default indicator with room to settle.
	DefaultCandles = 500
	// ProfileCandles is the window of the volume profile: the most recent
	// candles (about 4 days of 1h candles, 3 months of 1d).
	ProfileCandles = 100
	// RSI zones of the summary.
	Overbought = 70.0
	Oversold   = 30.0
)

// DefaultEMAPeriods are the EMAs computed when the configuration names none.
var DefaultEMAPeriods = []int{20, 50, 200}

// Indicator names of the arguments.
const (
	IndicatorRSI           = "rsi"
	IndicatorMACD          = "macd"
	IndicatorBollinger     = "bollinger"
	IndicatorEMA           = "ema"
	IndicatorVolumeProfile = "volume_profile"
)

// Indicators lists every indicator, in the order results are given.
var Indicators = []string{IndicatorRSI, IndicatorMACD, IndicatorBollinger, IndicatorEMA, IndicatorVolumeProfile}

// Parameters is the JSON Schema of the arguments (FR-109).
const Parameters = `{
  "type": "object",
  "properties": {
    "asset": {"type": "string", "pattern": "^[A-Z0-9]{2,15}$", "description": "Ticker of the asset, priced against USDT: BTC, ETH, SOL (not a pair)."},
    "timeframe": {"type": "string", "enum": ["1h", "4h", "1d", "1w"], "description": "Length of one candle."},
    "indicators": {"type": "array", "items": {"type": "string", "enum": ["rsi", "macd", "bollinger", "ema", "volume_profile"]}, "uniqueItems": true, "description": "Indicators to compute; all of them when omitted."}
  },
  "required": ["asset", "timeframe"],
  "additionalProperties": false
}`

// description is what a model is told, for the configured EMA periods.
func description(emas []int) string {
	ps := make([]string, len(emas))
	for i, p := range emas {
		ps[i] = strconv.Itoa(p)
	}
	return "Computes technical indicators from the recent candles of a crypto asset priced in USDT: " +
		"RSI(14, Wilder), MACD(12, 26, 9), Bollinger Bands(20, 2), EMA(" + strings.Join(ps, ", ") + ") " +
		"and a volume profile of the last " + strconv.Itoa(ProfileCandles) + " candles (24 price buckets, point of control, 70% value area). " +
		"Values are computed as TA-Lib computes them. Returns the latest and the previous value of each indicator, " +
		"the last candle (it may still be open: see `complete`) and a summary: rsi_zone (overbought >= 70, oversold <= 30), " +
		"macd_cross, price_vs_bands, price_vs_ema and price_vs_value_area. Candles are reused for a short while " +
		"(a minute unless configured otherwise)."
}

// Settings are the keys of a technical_indicators tool's section besides
// those every tool has.
type Settings struct {
	// Provider of candles: binance (default) or csv.
	Provider string `yaml:"provider"`
	// BaseURL of a Binance-compatible klines API; default Binance's.
	BaseURL string `yaml:"base_url"`
	// DataDir holds the csv provider's files <ASSET>_<timeframe>.csv.
	DataDir string `yaml:"data_dir"`
	// EMAPeriods are the EMA lengths computed; default DefaultEMAPeriods.
	EMAPeriods []int `yaml:"ema_periods"`
	// CacheTTL is how long candles are reused; default DefaultCacheTTL.
	CacheTTL config.Duration `yaml:"cache_ttl"`
}

// Check reports a base URL that is not http(s) and EMA lengths below 1;
// the provider and the lengths' upper bound are checked when the tool is
// built.
func (s *Settings) Check(report config.Reporter) {
	if s.BaseURL != "" {
		config.CheckURL(report, "base_url", s.BaseURL)
	}
	for i, p := range s.EMAPeriods {
		if p < 1 {
			report(fmt.Sprintf("ema_periods[%d]", i), "must be at least 1")
		}
	}
}

// ToolKind is what configuration knows of the kind: a data query's
// timeout, and its settings.
func ToolKind() config.ToolKind {
	return config.ToolKind{Timeout: DefaultTimeout, Settings: func() config.ToolSettings { return &Settings{} }}
}

// New returns the tool's Spec and Handler with the candle provider the
// settings name: binance (default; set.BaseURL overrides the API) or csv
// (files in set.DataDir, which the caller resolves against the
// configuration's directory). cfg and set may be nil; now is the cache's
// clock (nil: time.Now).
func New(cfg *config.Tool, set *Settings, now func() time.Time) (tool.Spec, tool.Handler, error) {
	if cfg == nil {
		cfg = &config.Tool{}
	}
	if set == nil {
		set = &Settings{}
	}
	var p Provider
	var err error
	switch set.Provider {
	case "", ProviderBinance:
		p, err = NewBinance(set.BaseURL, nil)
	case ProviderCSV:
		p, err = NewCSV(set.DataDir)
	default:
		err = fmt.Errorf("provider %q is not binance or csv", set.Provider)
	}
	if err != nil {
		return tool.Spec{}, nil, fmt.Errorf("%s: %w", toolName(cfg), err)
	}
	return NewWithProvider(cfg, set, p, now)
}

// NewWithProvider is New with a provider of the caller's.
func NewWithProvider(cfg *config.Tool, set *Settings, p Provider, now func() time.Time) (tool.Spec, tool.Handler, error) {
	if cfg == nil {
		cfg = &config.Tool{}
	}
	if set == nil {
		set = &Settings{}
	}
	name := toolName(cfg)
	if p == nil {
		return tool.Spec{}, nil, fmt.Errorf("%s: the candle provider is missing", name)
	}
	emas := DefaultEMAPeriods
	if len(set.EMAPeriods) > 0 {
		emas = slices.Clone(set.EMAPeriods)
	}
	for _, n := range emas {
		if n < 2 || n > MaxCandles {
			return tool.Spec{}, nil, fmt.Errorf("%s: ema_periods: %d is outside 2..%d (at most %d candles are fetched)", name, n, MaxCandles, MaxCandles)
		}
	}
	slices.Sort(emas)
	emas = slices.Compact(emas)
	spec, err := tool.FromConfig(tool.Spec{Name: Kind, Description: description(emas), Parameters: json.RawMessage(Parameters),
		Timeout: DefaultTimeout, Retries: DefaultRetries, Backoff: DefaultBackoff}, cfg)
	if err != nil {
		return tool.Spec{}, nil, err
	}
	ttl := set.CacheTTL.D()
	switch {
	case ttl < 0:
		return tool.Spec{}, nil, fmt.Errorf("%s: cache_ttl must not be negative, got %s", name, ttl)
	case ttl == 0:
		ttl = DefaultCacheTTL
	}
	if now == nil {
		now = time.Now
	}
	source := set.Provider
	if source == "" {
		source = ProviderBinance
	}
	h := &handler{
		provider: p,
		source:   source,
		ttl:      ttl,
		now:      now,
		emas:     emas,
		limit:    min(MaxCandles, max(DefaultCandles, emas[len(emas)-1]+300)),
		cache:    map[cacheKey]*entry{},
	}
	return spec, h, nil
}

func toolName(cfg *config.Tool) string {
	if cfg.Name != "" {
		return cfg.Name
	}
	return Kind
}

type cacheKey struct{ asset, timeframe string }

// entry is the cached candles of one asset and timeframe. sem is held while
// they are read or refilled, so concurrent calls share one fetch.
type entry struct {
	sem       chan struct{}
	candles   []Candle
	fetchedAt time.Time
}

// sweepAt is the cache size from which stale entries are dropped when a
// new one is added, so a model asking for many assets cannot grow it
// without bound.
const sweepAt = 64

type handler struct {
	provider Provider
	source   string
	ttl      time.Duration
	now      func() time.Time
	emas     []int
	limit    int

	mu    sync.Mutex
	cache map[cacheKey]*entry
}

var _ tool.Handler = (*handler)(nil)

// request is a validated call.
type request struct {
	asset, timeframe string
	want             map[string]bool
}

// Call computes the requested indicators of an asset.
func (h *handler) Call(ctx context.Context, args json.RawMessage) (string, error) {
	req, err := parseArgs(args)
	if err != nil {
		return "", err
	}
	candles, err := h.candles(ctx, req.asset, req.timeframe)
	if err != nil {
		return "", err
	}
	out, err := json.Marshal(h.report(req, candles))
	if err != nil {
		return "", fmt.Errorf("encode the indicators: %w", err)
	}
	return string(out), nil
}

// candles returns the cached candles of asset and timeframe while fresh,
// else fetches them.
func (h *handler) candles(ctx context.Context, asset, timeframe string) ([]Candle, error) {
	key := cacheKey{asset, timeframe}
	h.mu.Lock()
	e := h.cache[key]
	if e == nil {
		if len(h.cache) >= sweepAt {
			h.sweep()
		}
		e = &entry{sem: make(chan struct{}, 1)}
		h.cache[key] = e
	}
	h.mu.Unlock()

	select {
	case e.sem <- struct{}{}:
	case <-ctx.Done():
		return nil, tool.Transient(fmt.Errorf("gave up waiting for the %s %s candles: %w", asset, timeframe, ctx.Err()))
	}
	defer func() { <-e.sem }()
	now := h.now()
	if e.candles != nil && now.Sub(e.fetchedAt) < h.ttl && !now.Before(e.fetchedAt) {
		return e.candles, nil
	}
	cs, err := h.provider.Candles(ctx, asset, timeframe, h.limit)
	if err != nil {
		return nil, err
	}
	if len(cs) == 0 {
		return nil, fmt.Errorf("there are no %s candles for %s", timeframe, asset)
	}
	// Providers validate what they read; this guards one of the caller's.
	if err := checkCandles(cs, func(i int) string { return fmt.Sprintf("candle %d of %s %s", i, asset, timeframe) }); err != nil {
		return nil, fmt.Errorf("the market data is invalid: %w", err)
	}
	e.candles, e.fetchedAt = cs, now
	return cs, nil
}

// sweep drops entries whose candles are stale and that nobody is using.
// h.mu is held.
func (h *handler) sweep() {
	now := h.now()
	for k, e := range h.cache {
		select {
		case e.sem <- struct{}{}:
			if now.Sub(e.fetchedAt) >= h.ttl || now.Before(e.fetchedAt) {
				delete(h.cache, k)
			}
			<-e.sem
		default:
		}
	}
}

// parseArgs validates the arguments; every error names the problem.
func parseArgs(raw json.RawMessage) (request, error) {
	var fields map[string]json.RawMessage
	if err := json.Unmarshal(raw, &fields); err != nil || fields == nil {
		return request{}, errors.New(`arguments must be an object like {"asset": "BTC", "timeframe": "4h"}`)
	}
	for k := range fields {
		if k != "asset" && k != "timeframe" && k != "indicators" {
			return request{}, fmt.Errorf("unknown argument %q: the arguments are asset, timeframe and indicators", clip.String(k, 40))
		}
	}
	var req request
	if err := stringArg(fields, "asset", &req.asset); err != nil {
		return request{}, err
	}
	req.asset = strings.ToUpper(strings.TrimSpace(req.asset))
	switch {
	case req.asset == "":
		return request{}, errors.New("asset is required: the ticker of a coin such as BTC")
	case !assetPattern.MatchString(req.asset):
		return request{}, fmt.Errorf("asset %q is not a ticker: use 2 to 15 letters and digits such as BTC or ETH, not a pair", clip.String(req.asset, 40))
	}
	if err := stringArg(fields, "timeframe", &req.timeframe); err != nil {
		return request{}, err
	}
	req.timeframe = strings.ToLower(strings.TrimSpace(req.timeframe))
	if _, ok := Timeframes[req.timeframe]; !ok {
		if req.timeframe == "" {
			return request{}, errors.New("timeframe is required: one of 1h, 4h, 1d, 1w")
		}
		return request{}, fmt.Errorf("timeframe %q is not one of 1h, 4h, 1d, 1w", clip.String(req.timeframe, 20))
	}
	req.want = map[string]bool{}
	if raw, ok := fields["indicators"]; ok && string(raw) != "null" {
		var names []string
		if err := json.Unmarshal(raw, &names); err != nil {
			return request{}, fmt.Errorf("indicators must be a list of names from %s", strings.Join(Indicators, ", "))
		}
		for _, n := range names {
			n = strings.ToLower(strings.TrimSpace(n))
			if !slices.Contains(Indicators, n) {
				return request{}, fmt.Errorf("indicator %q is unknown: choose from %s", clip.String(n, 40), strings.Join(Indicators, ", "))
			}
			req.want[n] = true
		}
	}
	if len(req.want) == 0 {
		// Absent, null or empty: all of them.
		for _, n := range Indicators {
			req.want[n] = true
		}
	}
	return req, nil
}

func stringArg(fields map[string]json.RawMessage, name string, dst *string) error {
	raw, ok := fields[name]
	if !ok || string(raw) == "null" {
		return nil
	}
	if err := json.Unmarshal(raw, dst); err != nil {
		return fmt.Errorf("%s must be a string", name)
	}
	return nil
}

// report is the result a model gets.
type report struct {
	Asset         string      `json:"asset"`
	Timeframe     string      `json:"timeframe"`
	Source        string      `json:"source"`
	Candles       int         `json:"candles"`
	LastCandle    candleOut   `json:"last_candle"`
	LastClose     float64     `json:"last_close"`
	RSI           *rsiOut     `json:"rsi,omitempty"`
	MACD          *macdOut    `json:"macd,omitempty"`
	Bollinger     *bandsOut   `json:"bollinger,omitempty"`
	EMA           []emaOut    `json:"ema,omitempty"`
	VolumeProfile *profileOut `json:"volume_profile,omitempty"`
	Summary       summary     `json:"summary"`
	// Notes say why a requested indicator is missing.
	Notes []string `json:"notes,omitempty"`
}

type candleOut struct {
	OpenTime  time.Time `json:"open_time"`
	CloseTime time.Time `json:"close_time"`
	// Complete is false while the candle's period is still running: its
	// close is then the latest price.
	Complete bool    `json:"complete"`
	Open     float64 `json:"open"`
	High     float64 `json:"high"`
	Low      float64 `json:"low"`
	Close    float64 `json:"close"`
	Volume   float64 `json:"volume"`
}

type rsiOut struct {
	Period   int      `json:"period"`
	Value    float64  `json:"value"`
	Previous *float64 `json:"previous"`
}

type macdValues struct {
	MACD      float64 `json:"macd"`
	Signal    float64 `json:"signal"`
	Histogram float64 `json:"histogram"`
}

type macdOut struct {
	Fast         int `json:"fast"`
	Slow         int `json:"slow"`
	SignalPeriod int `json:"signal_period"`
	macdValues
	Previous *macdValues `json:"previous"`
}

type bandValues struct {
	Upper  float64 `json:"upper"`
	Middle float64 `json:"middle"`
	Lower  float64 `json:"lower"`
}

type bandsOut struct {
	Period  int     `json:"period"`
	StdDevs float64 `json:"std_devs"`
	bandValues
	// PercentB is where the close sits: 0 at the lower band, 1 at the upper.
	PercentB *float64 `json:"percent_b"`
	// Bandwidth is (upper - lower) / middle.
	Bandwidth *float64    `json:"bandwidth"`
	Previous  *bandValues `json:"previous"`
}

type emaOut struct {
	Period   int      `json:"period"`
	Value    float64  `json:"value"`
	Previous *float64 `json:"previous"`
}

type bucketOut struct {
	Low    float64 `json:"low"`
	High   float64 `json:"high"`
	Volume float64 `json:"volume"`
}

type profileOut struct {
	Candles int     `json:"candles"`
	Low     float64 `json:"low"`
	High    float64 `json:"high"`
	// POC is the bucket with the most volume.
	POC       bucketOut   `json:"poc"`
	ValueArea valueArea   `json:"value_area"`
	Buckets   []bucketOut `json:"buckets"`
}

type valueArea struct {
	Low         float64 `json:"low"`
	High        float64 `json:"high"`
	VolumeShare float64 `json:"volume_share"`
}

type summary struct {
	// RSIZone: overbought, oversold, neutral, or flat (no movement at all).
	RSIZone string `json:"rsi_zone,omitempty"`
	// RSITrend: rising, falling or unchanged since the previous candle.
	RSITrend string `json:"rsi_trend,omitempty"`
	// MACDCross: bullish_cross or bearish_cross on the last candle, else none.
	MACDCross string `json:"macd_cross,omitempty"`
	// MACDVsSignal: above, below or equal.
	MACDVsSignal string `json:"macd_vs_signal,omitempty"`
	// PriceVsBands: above_upper, upper_half, lower_half or below_lower.
	PriceVsBands string `json:"price_vs_bands,omitempty"`
	// PriceVsEMA maps "ema_<period>" to above, below or equal.
	PriceVsEMA map[string]string `json:"price_vs_ema,omitempty"`
	// PriceVsValueArea: above, inside or below.
	PriceVsValueArea string `json:"price_vs_value_area,omitempty"`
}

// report computes the requested indicators on the candles.
func (h *handler) report(req request, cs []Candle) report {
	n := len(cs)
	last := cs[n-1]
	closeTime := last.OpenTime.Add(Timeframes[req.timeframe])
	r := report{
		Asset:     req.asset,
		Timeframe: req.timeframe,
		Source:    h.source,
		Candles:   n,
		LastCandle: candleOut{
			OpenTime: last.OpenTime, CloseTime: closeTime, Complete: !h.now().Before(closeTime),
			Open: sig(last.Open), High: sig(last.High), Low: sig(last.Low), Close: sig(last.Close), Volume: sig(last.Volume),
		},
		LastClose: sig(last.Close),
	}
	closes := make([]float64, n)
	for i, c := range cs {
		closes[i] = c.Close
	}
	price := last.Close
	missing := func(what string, need int) {
		r.Notes = append(r.Notes, fmt.Sprintf("%s needs %d candles; only %d are available", what, need, n))
	}

	if req.want[IndicatorRSI] {
		rsi := RSI(closes, RSIPeriod)
		if v := rsi[n-1]; !math.IsNaN(v) {
			r.RSI = &rsiOut{Period: RSIPeriod, Value: sig(v), Previous: prev(rsi)}
			switch {
			case v == 0 && slices.Min(closes) == slices.Max(closes):
				r.Summary.RSIZone = "flat"
			case v >= Overbought:
				r.Summary.RSIZone = "overbought"
			case v <= Oversold:
				r.Summary.RSIZone = "oversold"
			default:
				r.Summary.RSIZone = "neutral"
			}
			if p := r.RSI.Previous; p != nil {
				r.Summary.RSITrend = direction(v, rsi[n-2], "rising", "falling", "unchanged")
			}
		} else {
			missing("rsi", RSIPeriod+1)
		}
	}
	if req.want[IndicatorMACD] {
		m, s, hist := MACD(closes, MACDFast, MACDSlow, MACDSignal)
		if !math.IsNaN(s[n-1]) {
			r.MACD = &macdOut{Fast: MACDFast, Slow: MACDSlow, SignalPeriod: MACDSignal,
				macdValues: macdValues{MACD: sig(m[n-1]), Signal: sig(s[n-1]), Histogram: sig(hist[n-1])}}
			r.Summary.MACDVsSignal = direction(m[n-1], s[n-1], "above", "below", "equal")
			r.Summary.MACDCross = "none"
			if n >= 2 && !math.IsNaN(s[n-2]) {
				r.MACD.Previous = &macdValues{MACD: sig(m[n-2]), Signal: sig(s[n-2]), Histogram: sig(hist[n-2])}
				switch {
				case m[n-2] <= s[n-2] && m[n-1] > s[n-1]:
					r.Summary.MACDCross = "bullish_cross"
				case m[n-2] >= s[n-2] && m[n-1] < s[n-1]:
					r.Summary.MACDCross = "bearish_cross"
				}
			}
		} else {
			missing("macd", MACDSlow+MACDSignal-1)
		}
	}
	if req.want[IndicatorBollinger] {
		up, mid, low := Bollinger(closes, BollingerPeriod, BollingerStdDevs)
		if !math.IsNaN(mid[n-1]) {
			b := &bandsOut{Period: BollingerPeriod, StdDevs: BollingerStdDevs,
				bandValues: bandValues{Upper: sig(up[n-1]), Middle: sig(mid[n-1]), Lower: sig(low[n-1])}}
			if w := up[n-1] - low[n-1]; w > 0 {
				b.PercentB = ptr(sig((price - low[n-1]) / w))
			}
			if mid[n-1] != 0 {
				b.Bandwidth = ptr(sig((up[n-1] - low[n-1]) / mid[n-1]))
			}
			if n >= 2 && !math.IsNaN(mid[n-2]) {
				b.Previous = &bandValues{Upper: sig(up[n-2]), Middle: sig(mid[n-2]), Lower: sig(low[n-2])}
			}
			r.Bollinger = b
			switch {
			case price > up[n-1]:
				r.Summary.PriceVsBands = "above_upper"
			case price < low[n-1]:
				r.Summary.PriceVsBands = "below_lower"
			case price >= mid[n-1]:
				r.Summary.PriceVsBands = "upper_half"
			default:
				r.Summary.PriceVsBands = "lower_half"
			}
		} else {
			missing("bollinger", BollingerPeriod)
		}
	}
	if req.want[IndicatorEMA] {
		for _, p := range h.emas {
			ema := EMA(closes, p)
			if math.IsNaN(ema[n-1]) {
				missing(fmt.Sprintf("ema %d", p), p)
				continue
			}
			r.EMA = append(r.EMA, emaOut{Period: p, Value: sig(ema[n-1]), Previous: prev(ema)})
			if r.Summary.PriceVsEMA == nil {
				r.Summary.PriceVsEMA = map[string]string{}
			}
			r.Summary.PriceVsEMA["ema_"+strconv.Itoa(p)] = direction(price, ema[n-1], "above", "below", "equal")
		}
	}
	if req.want[IndicatorVolumeProfile] {
		window := cs[max(0, n-ProfileCandles):]
		pr := VolumeProfile(window, ProfileBuckets, ValueAreaShare)
		if pr.POC >= 0 {
			out := &profileOut{Candles: len(window), Low: sig(pr.Low), High: sig(pr.High)}
			for _, b := range pr.Buckets {
				out.Buckets = append(out.Buckets, bucketOut{Low: sig(b.Low), High: sig(b.High), Volume: sig(b.Volume)})
			}
			out.POC = out.Buckets[pr.POC]
			out.ValueArea = valueArea{
				Low:         out.Buckets[pr.ValueAreaLow].Low,
				High:        out.Buckets[pr.ValueAreaHigh].High,
				VolumeShare: sig(pr.ValueAreaVolume / pr.TotalVolume),
			}
			r.VolumeProfile = out
			switch {
			case price > pr.Buckets[pr.ValueAreaHigh].High:
				r.Summary.PriceVsValueArea = "above"
			case price < pr.Buckets[pr.ValueAreaLow].Low:
				r.Summary.PriceVsValueArea = "below"
			default:
				r.Summary.PriceVsValueArea = "inside"
			}
		} else {
			r.Notes = append(r.Notes, "volume_profile: the candles have no volume")
		}
	}
	return r
}

// direction compares a with b.
func direction(a, b float64, more, less, same string) string {
	switch {
	case a > b:
		return more
	case a < b:
		return less
	}
	return same
}

// prev returns the value before the last, nil if there is none.
func prev(s []float64) *float64 {
	if len(s) < 2 || math.IsNaN(s[len(s)-2]) {
		return nil
	}
	return ptr(sig(s[len(s)-2]))
}

func ptr(v float64) *float64 { return &v }

// sig rounds to 8 significant digits: more than any price needs, and far
// fewer tokens than a float's 17.
func sig(v float64) float64 {
	if v == 0 || math.IsNaN(v) || math.IsInf(v, 0) {
		return v
	}
	r, err := strconv.ParseFloat(strconv.FormatFloat(v, 'g', 8, 64), 64)
	if err != nil {
		return v
	}
	return r
}
