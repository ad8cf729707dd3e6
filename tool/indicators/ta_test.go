package indicators

import (
	"math"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
)

// taLibClose is TA-Lib's regression-test series: the 252 daily closes of
// TA_SREF_close_daily_ref_0_PRIV in src/tools/ta_regtest/test_data.c of
// TA-Lib (https://github.com/TA-Lib/ta-lib). The expected values in the
// tests below are the ones TA-Lib's own regression tests assert on it
// (ta_regtest/ta_test_func/test_rsi.c, test_ma.c, test_macd.c,
// test_bbands.c), printed there to 2 or 4 decimals.
var taLibClose = []float64{
	91.500000, 94.815000, 94.375000, 95.095000, 93.780000, 94.625000, 92.530000, 92.750000, 90.315000, 92.470000, 96.125000,
	97.250000, 98.500000, 89.875000, 91.000000, 92.815000, 89.155000, 89.345000, 91.625000, 89.875000, 88.375000,
	87.625000, 84.780000, 83.000000, 83.500000, 81.375000, 84.440000, 89.250000, 86.375000, 86.250000, 85.250000,
	87.125000, 85.815000, 88.970000, 88.470000, 86.875000, 86.815000, 84.875000, 84.190000, 83.875000, 83.375000,
	85.500000, 89.190000, 89.440000, 91.095000, 90.750000, 91.440000, 89.000000, 91.000000, 90.500000, 89.030000,
	88.815000, 84.280000, 83.500000, 82.690000, 84.750000, 85.655000, 86.190000, 88.940000, 89.280000, 88.625000,
	88.500000, 91.970000, 91.500000, 93.250000, 93.500000, 93.155000, 91.720000, 90.000000, 89.690000, 88.875000,
	85.190000, 83.375000, 84.875000, 85.940000, 97.250000, 99.875000, 104.940000, 106.000000, 102.500000, 102.405000,
	104.595000, 106.125000, 106.000000, 106.065000, 104.625000, 108.625000, 109.315000, 110.500000, 112.750000, 123.000000,
	119.625000, 118.750000, 119.250000, 117.940000, 116.440000, 115.190000, 111.875000, 110.595000, 118.125000, 116.000000,
	116.000000, 112.000000, 113.750000, 112.940000, 116.000000, 120.500000, 116.620000, 117.000000, 115.250000, 114.310000,
	115.500000, 115.870000, 120.690000, 120.190000, 120.750000, 124.750000, 123.370000, 122.940000, 122.560000, 123.120000,
	122.560000, 124.620000, 129.250000, 131.000000, 132.250000, 131.000000, 132.810000, 134.000000, 137.380000, 137.810000,
	137.880000, 137.250000, 136.310000, 136.250000, 134.630000, 128.250000, 129.000000, 123.870000, 124.810000, 123.000000,
	126.250000, 128.380000, 125.370000, 125.690000, 122.250000, 119.370000, 118.500000, 123.190000, 123.500000, 122.190000,
	119.310000, 123.310000, 121.120000, 123.370000, 127.370000, 128.500000, 123.870000, 122.940000, 121.750000, 124.440000,
	122.000000, 122.370000, 122.940000, 124.000000, 123.190000, 124.560000, 127.250000, 125.870000, 128.860000, 132.000000,
	130.750000, 134.750000, 135.000000, 132.380000, 133.310000, 131.940000, 130.000000, 125.370000, 130.130000, 127.120000,
	125.190000, 122.000000, 125.000000, 123.000000, 123.500000, 120.060000, 121.000000, 117.750000, 119.870000, 122.000000,
	119.190000, 116.370000, 113.500000, 114.250000, 110.000000, 105.060000, 107.000000, 107.870000, 107.000000, 107.120000,
	107.000000, 91.000000, 93.940000, 93.870000, 95.500000, 93.000000, 94.940000, 98.250000, 96.750000, 94.810000,
	94.370000, 91.560000, 90.250000, 93.940000, 93.620000, 97.000000, 95.000000, 95.870000, 94.060000, 94.620000,
	93.750000, 98.000000, 103.940000, 107.870000, 106.060000, 104.500000, 105.000000, 104.190000, 103.060000, 103.420000,
	105.270000, 111.870000, 116.000000, 116.620000, 118.280000, 113.370000, 109.000000, 109.700000, 109.250000, 107.000000,
	109.190000, 110.000000, 109.200000, 110.120000, 108.000000, 108.620000, 109.750000, 109.810000, 109.000000, 108.750000,
	107.870000,
}

// at is one published value: the input index it belongs to and the value.
type at struct {
	i    int
	want float64
}

func checkValues(t *testing.T, name string, got []float64, want []at, tol float64) {
	t.Helper()
	for _, w := range want {
		if math.IsNaN(got[w.i]) || math.Abs(got[w.i]-w.want) > tol {
			t.Errorf("%s[%d] = %.6f, want %.4f ± %g", name, w.i, got[w.i], w.want, tol)
		}
	}
}

// checkTruncated checks values that TA-Lib's tests print truncated to two
// decimals (93.1575 appears as 93.15): want <= got < want + 0.01.
func checkTruncated(t *testing.T, name string, got []float64, want []at) {
	t.Helper()
	for _, w := range want {
		if !(got[w.i] >= w.want-1e-9 && got[w.i] < w.want+0.01) {
			t.Errorf("%s[%d] = %.6f, want %.2f truncated", name, w.i, got[w.i], w.want)
		}
	}
}

// checkWarmUp checks that exactly the first n values are NaN.
func checkWarmUp(t *testing.T, name string, got []float64, n int) {
	t.Helper()
	for i, v := range got {
		if (i < n) != math.IsNaN(v) {
			t.Errorf("%s[%d] = %v; want NaN exactly for indices below %d", name, i, v, n)
			return
		}
	}
}

// series returns published values for consecutive indices from first.
func series(first int, values ...float64) []at {
	out := make([]at, len(values))
	for k, v := range values {
		out[k] = at{first + k, v}
	}
	return out
}

func TestRSIAgainstTALib(t *testing.T) {
	got := RSI(taLibClose, 14)
	checkWarmUp(t, "RSI", got, 14)
	// test_rsi.c: output 0, 1, 2 and 252-15 (the last) of RSI(14).
	checkTruncated(t, "RSI", got, []at{{14, 49.14}, {15, 52.32}, {16, 46.07}, {251, 49.63}})
}

// The RSI worked example of StockCharts ChartSchool ("Relative Strength
// Index (RSI)", the cs-rsi spreadsheet: Wilder's method on 33 closes with
// four decimals), whose table lists RSI(14) to two decimals from the 15th
// close on.
func TestRSIAgainstStockCharts(t *testing.T) {
	closes := []float64{
		44.3389, 44.0902, 44.1497, 43.6124, 44.3278, 44.8264, 45.0955, 45.4245, 45.8433, 46.0826,
		45.8931, 46.0328, 45.6140, 46.2820, 46.2820, 46.0028, 46.0328, 46.4116, 46.2222, 45.6439,
		46.2122, 46.2521, 45.7137, 46.4515, 45.7835, 45.3548, 44.0288, 44.1783, 44.2181, 44.5672,
		43.4205, 42.6628, 43.1314,
	}
	got := RSI(closes, 14)
	checkWarmUp(t, "RSI", got, 14)
	checkValues(t, "RSI", got, series(14,
		70.53, 66.32, 66.55, 69.41, 66.36, 57.97, 62.93, 63.26, 56.06, 62.38,
		54.71, 50.42, 39.99, 41.46, 41.87, 45.46, 37.30, 33.08, 37.77), 0.005)
}

func TestRSIFirstValueIsSimpleAverages(t *testing.T) {
	closes := []float64{10, 11, 10.5, 12, 12, 11}
	got := RSI(closes, 3)
	// Changes 1, -0.5, 1.5: average gain 2.5/3, average loss 0.5/3.
	if want := 100 * 2.5 / 3.0; math.Abs(got[3]-want) > 1e-12 {
		t.Errorf("RSI[3] = %v, want %v", got[3], want)
	}
	// Next change 0: gain 2.5/3*2/3, loss 0.5/3*2/3; the ratio is unchanged.
	if math.Abs(got[4]-got[3]) > 1e-12 {
		t.Errorf("RSI[4] = %v, want %v", got[4], got[3])
	}
	flat := RSI([]float64{5, 5, 5, 5, 5}, 3)
	if flat[3] != 0 || flat[4] != 0 {
		t.Errorf("RSI of a flat series = %v, want 0 as TA-Lib gives", flat)
	}
	tiny := RSI([]float64{1e-9, 2e-9, 1.5e-9, 3e-9, 2.5e-9}, 3)
	if !(tiny[3] > 0 && tiny[3] < 100) {
		t.Errorf("RSI of a sub-cent series = %v; TA-Lib's 1e-8 epsilon must not zero it", tiny[3])
	}
}

func TestEMAAgainstTALib(t *testing.T) {
	ema2 := EMA(taLibClose, 2)
	checkWarmUp(t, "EMA2", ema2, 1)
	checkTruncated(t, "EMA2", ema2, []at{{1, 93.15}, {2, 93.96}, {251, 108.21}})
	ema10 := EMA(taLibClose, 10)
	checkWarmUp(t, "EMA10", ema10, 9)
	checkTruncated(t, "EMA10", ema10, []at{{9, 93.22}, {10, 93.75}, {29, 86.46}, {251, 108.97}})
}

// The EMA worked example of StockCharts ChartSchool ("Moving Averages -
// Simple and Exponential", the cs-movavg spreadsheet): a 10-day EMA seeded
// with the 10-day SMA, listed to two decimals from the 10th close on.
func TestEMAAgainstStockCharts(t *testing.T) {
	closes := []float64{
		22.2734, 22.1940, 22.0847, 22.1741, 22.1840, 22.1344, 22.2337, 22.4323, 22.2436, 22.2933,
		22.1542, 22.3926, 22.3816, 22.6109, 23.3558, 24.0519, 23.7530, 23.8324, 23.9516, 23.6338,
		23.8225, 23.8722, 23.6537, 23.1870, 23.0976, 23.3260, 22.6805, 23.0976, 22.4025, 22.1725,
	}
	got := EMA(closes, 10)
	checkWarmUp(t, "EMA", got, 9)
	checkValues(t, "EMA", got, series(9,
		22.22, 22.21, 22.24, 22.27, 22.33, 22.52, 22.80, 22.97, 23.13, 23.28,
		23.34, 23.43, 23.51, 23.54, 23.47, 23.40, 23.39, 23.26, 23.23, 23.08, 22.92), 0.005)
	if sma := mean(closes[:10]); got[9] != sma {
		t.Errorf("EMA[9] = %v, want the seed SMA %v exactly", got[9], sma)
	}
}

func mean(xs []float64) float64 {
	s := 0.0
	for _, x := range xs {
		s += x
	}
	return s / float64(len(xs))
}

func TestMACDAgainstTALib(t *testing.T) {
	macd, sig, hist := MACD(taLibClose, 12, 26, 9)
	checkWarmUp(t, "MACD", macd, 25)
	checkWarmUp(t, "signal", sig, 33)
	checkWarmUp(t, "histogram", hist, 33)
	// test_macd.c, "MACD - CLASSIC": the first output (index 33).
	checkValues(t, "MACD", macd, []at{{33, -1.9738}}, 0.00005)
	checkValues(t, "signal", sig, []at{{33, -2.7071}}, 0.00005)
	checkValues(t, "histogram", hist, []at{{33, -1.9738 - -2.7071}}, 0.0001)

	// The same test with the periods given the other way round.
	m2, s2, h2 := MACD(taLibClose, 26, 12, 9)
	if diff := cmp.Diff(macd, m2, cmpopts.EquateNaNs()); diff != "" {
		t.Errorf("swapped periods change MACD:\n%s", diff)
	}
	if !cmp.Equal(sig, s2, cmpopts.EquateNaNs()) || !cmp.Equal(hist, h2, cmpopts.EquateNaNs()) {
		t.Error("swapped periods change the signal or histogram")
	}
}

// TestMACDAlignment pins TA-Lib's alignment exactly: both EMAs are seeded
// at index 25, the fast one with the average of closes 14..25, and the
// signal at index 33 with the average of MACD 25..33.
func TestMACDAlignment(t *testing.T) {
	macd, sig, hist := MACD(taLibClose, 12, 26, 9)
	if want := mean(taLibClose[14:26]) - mean(taLibClose[0:26]); macd[25] != want {
		t.Errorf("MACD[25] = %v, want %v", macd[25], want)
	}
	if want := mean(macd[25:34]); sig[33] != want {
		t.Errorf("signal[33] = %v, want %v", sig[33], want)
	}
	if hist[33] != macd[33]-sig[33] {
		t.Errorf("histogram[33] = %v, want %v", hist[33], macd[33]-sig[33])
	}
	// A standalone EMA(12) is seeded at index 11 and differs at index 25:
	// the alignment is what makes the values TA-Lib's.
	standalone := EMA(taLibClose, 12)[25] - EMA(taLibClose, 26)[25]
	if math.Abs(standalone-macd[25]) < 1e-6 {
		t.Errorf("MACD[25] = %v equals the unaligned difference %v; the test data cannot tell them apart", macd[25], standalone)
	}
}

func TestBollingerAgainstTALib(t *testing.T) {
	up, mid, low := Bollinger(taLibClose, 20, 2)
	for name, s := range map[string][]float64{"upper": up, "middle": mid, "lower": low} {
		checkWarmUp(t, name, s, 19)
	}
	// test_bbands.c, "BBANDS - CLASSIC - SMA", 20 periods, 2 deviations.
	checkValues(t, "upper", up, []at{{19, 98.0734}}, 0.00005)
	checkValues(t, "middle", mid, []at{{19, 92.8910}}, 0.00005)
	checkValues(t, "lower", low, []at{{19, 87.7086}}, 0.00005)
}

// The Bollinger Bands worked example of StockCharts ChartSchool ("Bollinger
// Bands", the cs-bollinger spreadsheet: 20-day SMA and two population
// standard deviations), listed to two decimals from the 20th close on.
func TestBollingerAgainstStockCharts(t *testing.T) {
	closes := []float64{
		86.1557, 89.0867, 88.7829, 90.3228, 89.0671, 91.1453, 89.4397, 89.1750, 86.9302, 87.6752,
		86.9596, 89.4299, 89.3221, 88.7241, 87.4497, 87.2634, 89.4985, 87.9006, 89.1260, 90.7043,
		92.9001, 92.9784, 91.8021, 92.6647, 92.6843, 92.3021, 92.7725, 92.5373, 92.9490, 93.2039,
		91.0669, 89.8318, 89.7435, 90.3994, 90.7387, 88.0177, 88.0867, 88.8439, 90.7781, 90.5416,
		91.3894, 90.6500,
	}
	up, mid, low := Bollinger(closes, 20, 2)
	checkValues(t, "middle", mid, series(19,
		88.71, 89.05, 89.24, 89.39, 89.51, 89.69, 89.75, 89.91, 90.08, 90.38, 90.66, 90.86,
		90.88, 90.91, 90.99, 91.15, 91.19, 91.12, 91.17, 91.25, 91.24, 91.17, 91.05), 0.005)
	checkValues(t, "upper", up, series(19,
		91.29, 91.95, 92.61, 92.93, 93.31, 93.73, 93.90, 94.27, 94.57, 94.79, 95.04, 94.91,
		94.90, 94.90, 94.86, 94.67, 94.56, 94.68, 94.58, 94.53, 94.53, 94.37, 94.15), 0.005)
	checkValues(t, "lower", low, series(19,
		86.12, 86.14, 85.87, 85.85, 85.70, 85.65, 85.59, 85.56, 85.60, 85.98, 86.27, 86.82,
		86.87, 86.91, 87.12, 87.63, 87.83, 87.56, 87.76, 87.97, 87.95, 87.96, 87.95), 0.005)
}

func TestBadParametersGiveNaNNotPanic(t *testing.T) {
	short := []float64{1, 2, 3}
	all := func(name string, s []float64, n int) {
		t.Helper()
		if len(s) != n {
			t.Errorf("%s: %d values, want %d", name, len(s), n)
		}
		for _, v := range s {
			if !math.IsNaN(v) {
				t.Errorf("%s = %v, want all NaN", name, s)
				return
			}
		}
	}
	all("RSI period 0", RSI(short, 0), 3)
	all("RSI too short", RSI(short, 3), 3)
	all("RSI empty", RSI(nil, 14), 0)
	all("EMA period -1", EMA(short, -1), 3)
	all("EMA too short", EMA(short, 4), 3)
	m, s, h := MACD(short, 12, 26, 9)
	all("MACD too short", m, 3)
	all("signal too short", s, 3)
	all("histogram too short", h, 3)
	m, _, _ = MACD(taLibClose, 0, 26, 9)
	all("MACD fast 0", m, len(taLibClose))
	m, s, _ = MACD(taLibClose[:30], 12, 26, 9)
	all("signal without enough MACD", s, 30)
	if math.IsNaN(m[25]) {
		t.Error("MACD line missing at 25 although 30 closes suffice for it")
	}
	u, _, _ := Bollinger(short, 0, 2)
	all("Bollinger period 0", u, 3)
	if p := VolumeProfile(nil, 24, 0.7); p.POC != -1 || p.Buckets != nil {
		t.Errorf("empty profile = %+v", p)
	}
	if p := VolumeProfile([]Candle{{Low: 1, High: 2, Close: 1, Volume: 1}}, 0, 0.7); p.POC != -1 {
		t.Errorf("profile with no buckets = %+v", p)
	}
}

func TestVolumeProfile(t *testing.T) {
	// Range 100..110 in five buckets of 2.
	candles := []Candle{
		{Low: 100, High: 104, Close: 103, Volume: 40}, // 20 in [100,102), 20 in [102,104)
		{Low: 103, High: 103, Close: 103, Volume: 30}, // no span: all at its close, [102,104)
		{Low: 105, High: 110, Close: 106, Volume: 50}, // 10 in [104,106), 20 each in [106,108) and [108,110]
		{Low: 101, High: 101.5, Close: 101, Volume: 0},
	}
	got := VolumeProfile(candles, 5, 0.7)
	want := Profile{
		Low: 100, High: 110,
		Buckets: []VolumeBucket{
			{100, 102, 20}, {102, 104, 50}, {104, 106, 10}, {106, 108, 20}, {108, 110, 20},
		},
		TotalVolume: 120,
		POC:         1,
		// From bucket 1 (50): below 20 vs above 10, take below (70); then
		// above 10 (80), still < 84; then above 20 (100).
		ValueAreaLow: 0, ValueAreaHigh: 3, ValueAreaVolume: 100,
	}
	if diff := cmp.Diff(want, got, cmpopts.EquateApprox(0, 1e-9)); diff != "" {
		t.Errorf("profile (-want +got):\n%s", diff)
	}
}

func TestVolumeProfileTiesAndFlatRange(t *testing.T) {
	// Equal neighbours: the value area grows upwards first.
	candles := []Candle{
		{Low: 0, High: 1, Close: 0.5, Volume: 10},
		{Low: 1, High: 2, Close: 1.5, Volume: 30},
		{Low: 2, High: 3, Close: 2.5, Volume: 10},
	}
	got := VolumeProfile(candles, 3, 0.7)
	if got.POC != 1 || got.ValueAreaLow != 1 || got.ValueAreaHigh != 2 || got.ValueAreaVolume != 40 {
		t.Errorf("POC %d, value area %d..%d with %v; want 1, 1..2 with 40", got.POC, got.ValueAreaLow, got.ValueAreaHigh, got.ValueAreaVolume)
	}
	// One price only: everything in the first bucket.
	flat := VolumeProfile([]Candle{{Low: 5, High: 5, Close: 5, Volume: 3}, {Low: 5, High: 5, Close: 5, Volume: 4}}, 4, 0.7)
	if flat.POC != 0 || flat.Buckets[0].Volume != 7 || flat.ValueAreaLow != 0 || flat.ValueAreaHigh != 0 {
		t.Errorf("flat profile = %+v", flat)
	}
	// No volume at all: no point of control.
	none := VolumeProfile([]Candle{{Low: 1, High: 2, Close: 1.5}}, 4, 0.7)
	if none.POC != -1 || len(none.Buckets) != 4 {
		t.Errorf("profile without volume = %+v", none)
	}
}

// randomCandles is a deterministic random walk for benchmarks.
func randomCandles(n int) []Candle {
	r := rand.New(rand.NewPCG(1, 2))
	out := make([]Candle, n)
	price := 30000.0
	t := time.Date(2020, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range out {
		open := price
		price *= 1 + (r.Float64()-0.5)*0.02
		hi := math.Max(open, price) * (1 + r.Float64()*0.005)
		lo := math.Min(open, price) * (1 - r.Float64()*0.005)
		out[i] = Candle{OpenTime: t.Add(time.Duration(i) * time.Hour), Open: open, High: hi, Low: lo, Close: price, Volume: 100 + r.Float64()*1000}
	}
	return out
}

// computeAll runs all five indicators as the tool does.
func computeAll(candles []Candle, emaPeriods []int) {
	closes := make([]float64, len(candles))
	for i, c := range candles {
		closes[i] = c.Close
	}
	_ = RSI(closes, RSIPeriod)
	_, _, _ = MACD(closes, MACDFast, MACDSlow, MACDSignal)
	_, _, _ = Bollinger(closes, BollingerPeriod, BollingerStdDevs)
	for _, p := range emaPeriods {
		_ = EMA(closes, p)
	}
	_ = VolumeProfile(candles, ProfileBuckets, ValueAreaShare)
}

// BenchmarkAllIndicators100k is the budget of FR-131's indicators: all five
// over 100,000 candles (the volume profile over all of them), in well under
// 20 ms.
func BenchmarkAllIndicators100k(b *testing.B) {
	candles := randomCandles(100_000)
	b.ReportAllocs()
	for b.Loop() {
		computeAll(candles, []int{20, 50, 200})
	}
}
