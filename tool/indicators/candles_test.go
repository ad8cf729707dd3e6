package indicators

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner/tool"
)

var t0 = time.Date(2026, 11, 22, 0, 0, 0, 0, time.UTC)

// makeCandles builds n valid candles of the timeframe from closes.
func makeCandles(closes []float64, step time.Duration) []Candle {
	cs := make([]Candle, len(closes))
	for i, c := range closes {
		open := c
		if i > 0 {
			open = closes[i-1]
		}
		cs[i] = Candle{
			OpenTime: t0.Add(time.Duration(i) * step),
			Open:     open, High: max(open, c) + 0.5, Low: min(open, c) - 0.5, Close: c,
			Volume: float64(100 + i%7*10),
		}
	}
	return cs
}

// klinesServer is a Binance-shaped klines API on 127.0.0.1 serving candles
// for the symbols it knows, in Binance's array-of-arrays format.
type klinesServer struct {
	t       *testing.T
	mu      sync.Mutex
	symbols map[string][]Candle
	queries []string
	// reply, when set, answers instead.
	reply http.HandlerFunc
}

func newKlinesServer(t *testing.T, prefix string, symbols map[string][]Candle) (*klinesServer, string) {
	k := &klinesServer{t: t, symbols: symbols}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		k.mu.Lock()
		k.queries = append(k.queries, r.URL.RawQuery)
		reply := k.reply
		k.mu.Unlock()
		if r.URL.Path != prefix+"/api/v3/klines" || r.Method != http.MethodGet {
			t.Errorf("request %s %s, want GET %s/api/v3/klines", r.Method, r.URL.Path, prefix)
			w.WriteHeader(404)
			return
		}
		if reply != nil {
			reply(w, r)
			return
		}
		q := r.URL.Query()
		cs, ok := k.symbols[q.Get("symbol")]
		if !ok {
			w.WriteHeader(400)
			fmt.Fprint(w, `{"code":-1121,"msg":"Invalid symbol."}`)
			return
		}
		if _, ok := Timeframes[q.Get("interval")]; !ok {
			w.WriteHeader(400)
			fmt.Fprint(w, `{"code":-1120,"msg":"Invalid interval."}`)
			return
		}
		limit, err := strconv.Atoi(q.Get("limit"))
		if err != nil || limit < 1 || limit > 1000 {
			w.WriteHeader(400)
			fmt.Fprint(w, `{"code":-1100,"msg":"Illegal characters found in parameter 'limit'."}`)
			return
		}
		cs = cs[max(0, len(cs)-limit):]
		var b strings.Builder
		b.WriteString("[")
		for i, c := range cs {
			if i > 0 {
				b.WriteString(",")
			}
			f := func(v float64) string { return strconv.FormatFloat(v, 'f', -1, 64) }
			fmt.Fprintf(&b, `[%d,"%s","%s","%s","%s","%s",%d,"0",10,"0","0","0"]`,
				c.OpenTime.UnixMilli(), f(c.Open), f(c.High), f(c.Low), f(c.Close), f(c.Volume), c.OpenTime.Add(time.Hour).UnixMilli()-1)
		}
		b.WriteString("]")
		w.Header().Set("Content-Type", "application/json")
		fmt.Fprint(w, b.String())
	}))
	t.Cleanup(srv.Close)
	return k, srv.URL + prefix
}

func (k *klinesServer) setReply(h http.HandlerFunc) {
	k.mu.Lock()
	defer k.mu.Unlock()
	k.reply = h
}

func (k *klinesServer) requests() []string {
	k.mu.Lock()
	defer k.mu.Unlock()
	return append([]string(nil), k.queries...)
}

func TestBinanceCandles(t *testing.T) {
	want := makeCandles([]float64{100, 101.25, 99.5, 102, 103.75}, 4*time.Hour)
	k, url := newKlinesServer(t, "/prefix", map[string][]Candle{"BTCUSDT": want})
	b, err := NewBinance(url, nil)
	if err != nil {
		t.Fatal(err)
	}
	got, err := b.Candles(context.Background(), "BTC", "4h", 3)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want[2:], got); diff != "" {
		t.Errorf("candles (-want +got):\n%s", diff)
	}
	if q := k.requests(); len(q) != 1 || q[0] != "interval=4h&limit=3&symbol=BTCUSDT" {
		t.Errorf("queries = %q", q)
	}
}

func TestBinanceErrors(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name       string
		reply      http.HandlerFunc
		transient  bool
		retryAfter time.Duration
		want       string
	}{
		{"unknown symbol", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(400)
			fmt.Fprint(w, `{"code":-1121,"msg":"Invalid symbol."}`)
		}, false, 0, "asset FOO is not listed on the market data provider against USDT (no symbol FOOUSDT)"},
		{"rate limited with Retry-After", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "7")
			w.WriteHeader(429)
			fmt.Fprint(w, `{"code":-1003,"msg":"Too many requests."}`)
		}, true, 7 * time.Second, "rate limiting requests (HTTP 429) (code -1003: Too many requests.)"},
		{"banned with an HTTP date", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", now.Add(2*time.Minute).Format(http.TimeFormat))
			w.WriteHeader(418)
		}, true, 2 * time.Minute, "HTTP 418"},
		{"Retry-After beyond a day is capped", func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Retry-After", "99999999999")
			w.WriteHeader(429)
		}, true, maxRetryAfter, "HTTP 429"},
		{"rate limited without Retry-After", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(429)
		}, true, 0, "HTTP 429"},
		{"server error", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(503)
			fmt.Fprint(w, "upstream\x00 down")
		}, true, 0, "failed (HTTP 503) (upstream down)"},
		{"restricted location", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(451)
			fmt.Fprint(w, `{"code":0,"msg":"Service unavailable from a restricted location"}`)
		}, false, 0, "set the tool's base_url"},
		{"other client error", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(400)
			fmt.Fprint(w, `{"code":-1100,"msg":"Illegal characters"}`)
		}, false, 0, "refused the request for FOO (HTTP 400) (code -1100: Illegal characters)"},
		{"redirect", func(w http.ResponseWriter, r *http.Request) {
			http.Redirect(w, r, "https://elsewhere.invalid/", http.StatusFound)
		}, false, 0, "redirected the request"},
		{"not json", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `<html>`)
		}, true, 0, "malformed: not an array of klines"},
		{"short kline", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `[[1700000000000,"1","2","0.5","1.5"]]`)
		}, true, 0, "kline 0 has 5 fields"},
		{"bad price", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `[[1700000000000,"1","2","0.5","x","3",0]]`)
		}, true, 0, `kline 0 field 4: "x" is not a decimal`},
		{"high below low", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `[[1700000000000,"1","0.5","2","1","3",0]]`)
		}, true, 0, "kline 0: open 1 and close 1 must lie between low 2 and high 0.5"},
		{"time going back", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `[[1700000000000,"1","2","0.5","1","3",0],[1600000000000,"1","2","0.5","1","3",0]]`)
		}, true, 0, "kline 1: open time"},
		{"no candles", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `[]`)
		}, false, 0, "there are no 1h candles for FOO"},
		{"numbers instead of strings", func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprint(w, `[[1700000000000,1,2,0.5,1.5,3,0]]`)
		}, false, 0, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k, url := newKlinesServer(t, "", nil)
			k.setReply(tt.reply)
			b, err := NewBinance(url, nil)
			if err != nil {
				t.Fatal(err)
			}
			b.now = func() time.Time { return now }
			_, err = b.Candles(context.Background(), "FOO", "1h", 10)
			if tt.want == "" {
				if err != nil {
					t.Fatalf("err = %v, want none", err)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("err = %v, want one containing %q", err, tt.want)
			}
			if tool.IsTransient(err) != tt.transient {
				t.Errorf("transient = %v, want %v", tool.IsTransient(err), tt.transient)
			}
			if got := tool.RetryAfterOf(err); got != tt.retryAfter {
				t.Errorf("retry after = %s, want %s", got, tt.retryAfter)
			}
		})
	}
}

func TestBinanceUnreachableIsTransient(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	b, err := NewBinance("http://"+addr, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := b.Candles(context.Background(), "BTC", "1d", 5); err == nil || !tool.IsTransient(err) {
		t.Errorf("err = %v, want a transient error", err)
	}
}

func TestProvidersValidateRequests(t *testing.T) {
	b, err := NewBinance("", nil)
	if err != nil {
		t.Fatal(err)
	}
	if b.base != DefaultBinanceURL {
		t.Errorf("default base = %q", b.base)
	}
	c, err := NewCSV(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		asset, timeframe string
		limit            int
		want             string
	}{
		{"../etc", "1h", 10, `asset "../etc" is not a ticker`},
		{"btc", "1h", 10, `asset "btc" is not a ticker`},
		{"BTC", "15m", 10, `timeframe "15m" is not one of 1h, 4h, 1d, 1w`},
		{"BTC", "1h", 0, "candle limit 0 is outside 1..1000"},
		{"BTC", "1h", 1001, "candle limit 1001"},
	}
	for _, p := range []Provider{b, c} {
		for _, tt := range tests {
			// No request may leave: the base URL is the real API.
			_, err := p.Candles(context.Background(), tt.asset, tt.timeframe, tt.limit)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("%T %v: err = %v, want %q", p, tt, err, tt.want)
			}
		}
	}
}

func TestNewBinanceRejects(t *testing.T) {
	for _, u := range []string{"ftp://x", "http://", "https://user:pw@x", "https://x/?a=1", "://"} {
		if _, err := NewBinance(u, nil); err == nil {
			t.Errorf("NewBinance(%q) accepted", u)
		} else if strings.Contains(err.Error(), "pw") {
			t.Errorf("NewBinance(%q): error %q quotes the password", u, err)
		}
	}
}

func writeFile(t *testing.T, dir, name, content string) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func TestCSVCandles(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "ETH_1d.csv", "\ufeffopen_time,open,high,low,close,volume\n"+
		"2026-11-19T00:00:00Z,3000,3100,2950,3050,1200.5\n"+
		"1795132800000, 3050, 3200, 3000, 3150, 900\n"+ // 2026-11-20 in Unix ms
		"2026-11-21T00:00:00+00:00,3150,3160,3010,3020,1000\n")
	p, err := NewCSV(dir)
	if err != nil {
		t.Fatal(err)
	}
	got, err := p.Candles(context.Background(), "ETH", "1d", 2)
	if err != nil {
		t.Fatal(err)
	}
	want := []Candle{
		{OpenTime: time.Date(2026, 11, 20, 0, 0, 0, 0, time.UTC), Open: 3050, High: 3200, Low: 3000, Close: 3150, Volume: 900},
		{OpenTime: time.Date(2026, 11, 21, 0, 0, 0, 0, time.UTC), Open: 3150, High: 3160, Low: 3010, Close: 3020, Volume: 1000},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("candles (-want +got):\n%s", diff)
	}
}

func TestCSVErrors(t *testing.T) {
	const header = "open_time,open,high,low,close,volume\n"
	tests := []struct {
		name, content, want string
	}{
		{"bad header", "time,open,high,low,close,volume\n", `BTC_1h.csv: the header must be open_time,open,high,low,close,volume, column 1 is "time"`},
		{"empty", "", "BTC_1h.csv: the header is unreadable"},
		{"no rows", header, "BTC_1h.csv has no candles"},
		{"short row", header + "2026-11-19T00:00:00Z,1,2,0.5\n", "wrong number of fields"},
		{"bad time", header + "yesterday,1,2,0.5,1,1\n", `BTC_1h.csv line 2: open_time "yesterday" is neither RFC 3339 nor Unix milliseconds`},
		{"bad number", header + "2026-11-19T00:00:00Z,1,2,0.5,abc,1\n", `BTC_1h.csv line 2: close "abc" is not a number`},
		{"negative volume", header + "2026-11-19T00:00:00Z,1,2,0.5,1,-1\n", "BTC_1h.csv line 2: volume -1"},
		{"zero price", header + "2026-11-19T00:00:00Z,0,2,0.5,1,1\n", "BTC_1h.csv line 2: open 0 is not a positive price"},
		{"unsorted", header + "2026-11-19T01:00:00Z,1,2,0.5,1,1\n2026-11-19T00:00:00Z,1,2,0.5,1,1\n", "BTC_1h.csv line 3: open time 2026-11-19T00:00:00Z is not after"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			writeFile(t, dir, "BTC_1h.csv", tt.content)
			p, err := NewCSV(dir)
			if err != nil {
				t.Fatal(err)
			}
			_, err = p.Candles(context.Background(), "BTC", "1h", 100)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want one containing %q", err, tt.want)
			}
			if tool.IsTransient(err) {
				t.Errorf("err %v is transient; bad files do not fix themselves", err)
			}
		})
	}
}

func TestCSVMissingFileNamesAssetAndTimeframe(t *testing.T) {
	p, err := NewCSV(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	_, err = p.Candles(context.Background(), "SOL", "4h", 10)
	if err == nil || !strings.Contains(err.Error(), "there is no 4h data for SOL: SOL_4h.csv is not in the candle data directory") {
		t.Errorf("err = %v", err)
	}
}

func TestNewCSVRejects(t *testing.T) {
	dir := t.TempDir()
	writeFile(t, dir, "file", "x")
	for _, d := range []string{"", filepath.Join(dir, "missing"), filepath.Join(dir, "file")} {
		if _, err := NewCSV(d); err == nil {
			t.Errorf("NewCSV(%q) accepted", d)
		}
	}
}
