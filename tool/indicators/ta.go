package indicators

import (
	"math"
	"time"
)

// This file holds the indicator arithmetic: pure functions of a price
// series, computed the way TA-Lib computes them (its "classic"/default
// compatibility), warm-up included, so values agree with the charts and
// libraries traders compare against. Each function returns one value per
// input, NaN where the indicator is not defined yet (the warm-up), so
// indices line up with the candles. Bad parameters never panic: they give
// an all-NaN result.
//
// Two deliberate differences from TA-Lib, both where TA-Lib compares with
// an absolute epsilon of 1e-8 (TA_IS_ZERO): that constant is in price
// units, so it zeroes RSI and the Bollinger width for assets priced below
// about a cent. Here a flat RSI window (no gain and no loss at all) is 0 as
// in TA-Lib, but only when it is exactly flat; and the band's standard
// deviation is computed from the deviations themselves, which is never
// negative and needs no epsilon. Everywhere else the operations and their
// order are TA-Lib's.

// Candle is one OHLCV bar; OpenTime is when its period began (UTC).
type Candle struct {
	OpenTime time.Time
	Open     float64
	High     float64
	Low      float64
	Close    float64
	Volume   float64
}

// Default parameters of the indicators.
const (
	RSIPeriod        = 14
	MACDFast         = 12
	MACDSlow         = 26
	MACDSignal       = 9
	BollingerPeriod  = 20
	BollingerStdDevs = 2.0
	ProfileBuckets   = 24
	// ValueAreaShare is the share of the volume the value area holds.
	ValueAreaShare = 0.70
)

func nans(n int) []float64 {
	s := make([]float64, n)
	for i := range s {
		s[i] = math.NaN()
	}
	return s
}

// RSI is Wilder's Relative Strength Index (TA_RSI). The first value is at
// index period, from the simple averages of the first period gains and
// losses; later averages are smoothed as avg = (avg*(period-1) + x)/period.
// A series with no change at all reads 0, as in TA-Lib.
func RSI(closes []float64, period int) []float64 {
	out := nans(len(closes))
	if period < 1 || len(closes) <= period {
		return out
	}
	p := float64(period)
	var gain, loss float64
	for i := 1; i <= period; i++ {
		d := closes[i] - closes[i-1]
		if d < 0 {
			loss -= d
		} else {
			gain += d
		}
	}
	gain /= p
	loss /= p
	out[period] = rsiValue(gain, loss)
	for i := period + 1; i < len(closes); i++ {
		d := closes[i] - closes[i-1]
		gain *= p - 1
		loss *= p - 1
		if d < 0 {
			loss -= d
		} else {
			gain += d
		}
		gain /= p
		loss /= p
		out[i] = rsiValue(gain, loss)
	}
	return out
}

// rsiValue is 100*gain/(gain+loss), TA-Lib's form of 100-100/(1+RS).
func rsiValue(gain, loss float64) float64 {
	if s := gain + loss; s != 0 {
		return 100 * (gain / s)
	}
	return 0
}

// EMA is the exponential moving average with k = 2/(period+1), seeded with
// the simple average of the first period values (TA_EMA): the first value
// is at index period-1.
func EMA(values []float64, period int) []float64 {
	out := nans(len(values))
	if period < 1 || len(values) < period {
		return out
	}
	emaFrom(out, values, period, period-1)
	return out
}

// emaFrom writes into out, from index start on, the EMA seeded at start with
// the simple average of the period values ending there (TA_INT_EMA).
// The caller guarantees period-1 <= start < len(values).
func emaFrom(out, values []float64, period, start int) {
	k := 2 / float64(period+1)
	sum := 0.0
	for i := start - period + 1; i <= start; i++ {
		sum += values[i]
	}
	prev := sum / float64(period)
	out[start] = prev
	for i := start + 1; i < len(values); i++ {
		// The explicit conversion keeps the compiler from fusing the
		// multiply-add, which would round differently from TA-Lib.
		prev = float64((values[i]-prev)*k) + prev
		out[i] = prev
	}
}

// MACD is the Moving Average Convergence/Divergence (TA_MACD): the fast EMA
// minus the slow EMA, the signal line (an EMA of that difference) and the
// histogram (the difference minus the signal). As in TA-Lib, both EMAs
// start where the slow one does: the fast EMA is seeded at index slow-1
// with the average of the fast-period closes ending there, so the MACD line
// begins at index slow-1 (25 for 12/26) and the signal and histogram at
// slow+signal-2 (33 for 12/26/9). TA-Lib reports all three from the
// latter index only; the MACD line's earlier values are the ones it
// computes internally. A fast period longer than the slow one is swapped,
// as TA-Lib does.
func MACD(closes []float64, fast, slow, signal int) (macd, sig, hist []float64) {
	n := len(closes)
	macd, sig, hist = nans(n), nans(n), nans(n)
	if slow < fast {
		fast, slow = slow, fast
	}
	if fast < 1 || signal < 1 || n < slow {
		return macd, sig, hist
	}
	start := slow - 1
	fastEMA, slowEMA := make([]float64, n), make([]float64, n)
	emaFrom(slowEMA, closes, slow, start)
	emaFrom(fastEMA, closes, fast, start)
	for i := start; i < n; i++ {
		macd[i] = fastEMA[i] - slowEMA[i]
	}
	first := start + signal - 1
	if n <= first {
		return macd, sig, hist
	}
	emaFrom(sig, macd, signal, first)
	for i := first; i < n; i++ {
		hist[i] = macd[i] - sig[i]
	}
	return macd, sig, hist
}

// Bollinger returns Bollinger Bands (TA_BBANDS with a simple moving
// average): the middle band is the SMA of period closes and the outer bands
// are stdDevs population standard deviations away. The first value is at
// index period-1.
func Bollinger(closes []float64, period int, stdDevs float64) (upper, middle, lower []float64) {
	n := len(closes)
	upper, middle, lower = nans(n), nans(n), nans(n)
	if period < 1 || n < period {
		return upper, middle, lower
	}
	p := float64(period)
	sum := 0.0
	for i := 0; i < period-1; i++ {
		sum += closes[i]
	}
	for i := period - 1; i < n; i++ {
		// The running sum, added to and taken from in TA_INT_SMA's order.
		sum += closes[i]
		mean := sum / p
		first := i - period + 1
		sum -= closes[first]
		ss := 0.0
		for _, x := range closes[first : i+1] {
			d := x - mean
			ss += d * d
		}
		width := stdDevs * math.Sqrt(ss/p)
		middle[i] = mean
		upper[i] = mean + width
		lower[i] = mean - width
	}
	return upper, middle, lower
}

// VolumeBucket is one price band of a volume profile.
type VolumeBucket struct {
	Low, High float64
	Volume    float64
}

// Profile is a volume profile: how much volume traded at each price.
type Profile struct {
	// Low and High are the range of the candles (lowest low, highest high),
	// split into equal Buckets.
	Low, High float64
	Buckets   []VolumeBucket
	// TotalVolume is the volume of all the candles.
	TotalVolume float64
	// POC, the point of control, is the index of the bucket with the most
	// volume (the lowest such bucket on a tie); -1 when there is no volume.
	POC int
	// ValueAreaLow and ValueAreaHigh are the first and last bucket (indices)
	// of the value area, and ValueAreaVolume its volume.
	ValueAreaLow, ValueAreaHigh int
	ValueAreaVolume             float64
}

// VolumeProfile splits the candles' price range into buckets of equal
// height and spreads each candle's volume evenly over the part of that
// range its low-high span covers (a candle with no span puts it all at its
// close). Spreading, rather than putting it all at the typical price, keeps
// a wide candle from piling its volume into one bucket it barely touched.
//
// The value area starts at the point of control and grows one bucket at a
// time towards the neighbour, above or below, with more volume (above on a
// tie) until it holds at least share of the total volume (the usual 70%
// rule, ValueAreaShare).
func VolumeProfile(candles []Candle, buckets int, share float64) Profile {
	pr := Profile{POC: -1, ValueAreaLow: -1, ValueAreaHigh: -1}
	if buckets < 1 || len(candles) == 0 {
		return pr
	}
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, c := range candles {
		lo = math.Min(lo, c.Low)
		hi = math.Max(hi, c.High)
	}
	if math.IsNaN(lo) || math.IsNaN(hi) || math.IsInf(lo, 0) || math.IsInf(hi, 0) || hi < lo {
		return pr
	}
	pr.Low, pr.High = lo, hi
	width := (hi - lo) / float64(buckets)
	vol := make([]float64, buckets)
	index := func(price float64) int {
		if width == 0 {
			return 0
		}
		i := int((price - lo) / width)
		return min(max(i, 0), buckets-1)
	}
	edge := func(b int) float64 {
		if b == buckets {
			return hi
		}
		return lo + float64(b)*width
	}
	for _, c := range candles {
		if !(c.Volume > 0) {
			continue
		}
		pr.TotalVolume += c.Volume
		first, last := index(c.Low), index(c.High)
		span := c.High - c.Low
		if first == last || !(span > 0) {
			b := first
			if !(span > 0) {
				b = index(c.Close)
			}
			vol[b] += c.Volume
			continue
		}
		for b := first; b <= last; b++ {
			overlap := math.Min(c.High, edge(b+1)) - math.Max(c.Low, edge(b))
			if overlap > 0 {
				vol[b] += c.Volume * overlap / span
			}
		}
	}
	pr.Buckets = make([]VolumeBucket, buckets)
	for b := range pr.Buckets {
		pr.Buckets[b] = VolumeBucket{Low: edge(b), High: edge(b + 1), Volume: vol[b]}
	}
	if !(pr.TotalVolume > 0) {
		return pr
	}
	poc := 0
	for b, v := range vol {
		if v > vol[poc] {
			poc = b
		}
	}
	pr.POC = poc
	down, up := poc, poc
	in := vol[poc]
	target := share * pr.TotalVolume
	for in < target && (down > 0 || up < buckets-1) {
		above, below := -1.0, -1.0
		if up < buckets-1 {
			above = vol[up+1]
		}
		if down > 0 {
			below = vol[down-1]
		}
		if above >= below {
			up++
			in += above
		} else {
			down--
			in += below
		}
	}
	pr.ValueAreaLow, pr.ValueAreaHigh, pr.ValueAreaVolume = down, up, in
	return pr
}
