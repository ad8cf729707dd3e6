package execsvc

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
)

func ptr[T any](v T) *T { return &v }

// sampleAccount is a full account with every kind of entry.
func sampleAccount() *Account {
	return &Account{
		AsOf:     time.Date(2026, 11, 22, 13, 59, 30, 0, time.UTC),
		Equity:   105234.12,
		Cash:     40210.5,
		Currency: "USD",
		Positions: []Position{
			{Asset: "BTC", Quantity: 0.75, AvgEntryPrice: 61200, MarkPrice: 64000, MarketValue: 48000, UnrealizedPnL: 2100, Side: "long"},
			{Asset: "ETH", Quantity: 3, AvgEntryPrice: 3300, MarkPrice: 3400, MarketValue: -10200, UnrealizedPnL: -300, Side: "short"},
		},
		Balances: []Balance{
			{Asset: "USD", Free: 40210.5, Locked: 6200},
			{Asset: "BTC", Free: 0.75, Locked: 0},
		},
		OpenOrders: []Order{
			{ID: "ord-1", Asset: "ETH", Side: "buy", Type: "limit", Quantity: 2, Price: ptr(3100.0), Status: "open", CreatedAt: time.Date(2026, 11, 22, 13, 55, 0, 0, time.UTC)},
			{ID: "ord-2", Asset: "SOL", Side: "sell", Type: "market", Quantity: 10, Status: "partially_filled", CreatedAt: time.Date(2026, 11, 22, 13, 58, 0, 0, time.UTC)},
		},
	}
}

func TestAccountFromMock(t *testing.T) {
	want := sampleAccount()
	m, url := startMock(t, MockOptions{Account: want, Token: "tok"})
	c := newClient(t, url, "tok")

	got, err := c.Account(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("account (-want +got):\n%s", diff)
	}
	reqs := m.Requests()
	if len(reqs) != 1 || reqs[0].Method != http.MethodGet || reqs[0].Path != "/v1/account" || reqs[0].StatusCode != http.StatusOK {
		t.Errorf("mock saw %+v, want one GET /v1/account answered 200", reqs)
	}
}

func TestAccountDefaultIsEmptyUSDAccountAtMockTime(t *testing.T) {
	_, url := startMock(t, MockOptions{Now: (&fakeClock{}).Now})
	got, err := newClient(t, url, "").Account(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// The mock reads its clock once to record the request, then for as_of.
	want := &Account{AsOf: t0.Add(time.Second), Currency: "USD", Positions: []Position{}, Balances: []Balance{}, OpenOrders: []Order{}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("account (-want +got):\n%s", diff)
	}
}

func TestAccountWrongTokenIsConfigError(t *testing.T) {
	_, url := startMock(t, MockOptions{Token: "right"})
	_, err := newClient(t, url, "wrong").Account(context.Background())
	if agentrunner.ClassOf(err) != agentrunner.ClassConfig {
		t.Fatalf("err = %v, want class config", err)
	}
	if strings.Contains(err.Error(), "wrong") || strings.Contains(err.Error(), "right") {
		t.Errorf("error %q quotes a token", err)
	}
}

func TestMockRefusesAccountThatBreaksContract(t *testing.T) {
	bad := sampleAccount()
	bad.Positions[0].Quantity = -1
	m := NewMock(MockOptions{Account: bad})
	w := serve(m, http.MethodGet, "/v1/account", nil, "")
	if w.Code != http.StatusInternalServerError {
		t.Fatalf("status = %d, want 500", w.Code)
	}
	if code := errorCode(t, w); code != "internal" {
		t.Errorf("code = %q, want internal", code)
	}
	if !strings.Contains(w.Body.String(), "positions[0].quantity") {
		t.Errorf("body %s does not name the bad field", w.Body)
	}
}

func TestMockAccountRoute(t *testing.T) {
	m := NewMock(MockOptions{})
	w := serve(m, http.MethodPost, "/v1/account", nil, "{}")
	if w.Code != http.StatusMethodNotAllowed || w.Header().Get("Allow") != http.MethodGet {
		t.Errorf("POST /v1/account: status %d, Allow %q; want 405 and GET", w.Code, w.Header().Get("Allow"))
	}
	if code := errorCode(t, w); code != "method_not_allowed" {
		t.Errorf("code = %q", code)
	}
}

const goodAccount = `{"as_of":"2026-11-22T14:00:00Z","equity":1,"cash":1,"currency":"USD",
 "positions":[{"asset":"BTC","quantity":1,"avg_entry_price":1,"mark_price":1,"market_value":1,"unrealized_pnl":0,"side":"long"}],
 "balances":[{"asset":"USD","free":1,"locked":0}],
 "open_orders":[{"id":"o1","asset":"BTC","side":"buy","type":"limit","quantity":1,"price":1,"status":"open","created_at":"2026-11-22T14:00:00Z"}],
 "extra_field":"ignored"}`

func TestParseAccount(t *testing.T) {
	if _, err := ParseAccount([]byte(goodAccount)); err != nil {
		t.Fatalf("good account refused: %v", err)
	}
	tests := []struct {
		name, from, to, wantErr string
	}{
		{"not json", goodAccount, `{`, "not a JSON account"},
		{"missing as_of", `"as_of":"2026-11-22T14:00:00Z",`, ``, "as_of is missing"},
		{"bad as_of", `2026-11-22T14:00:00Z","equity"`, `yesterday","equity"`, `as_of "yesterday" is not an RFC 3339 time`},
		{"missing equity", `"equity":1,`, ``, "equity is missing"},
		{"string equity", `"equity":1,`, `"equity":"1",`, "not a JSON account"},
		{"huge equity", `"equity":1,`, `"equity":1e999,`, "not a JSON account"},
		{"missing cash", `"cash":1,`, ``, "cash is missing"},
		{"bad currency", `"currency":"USD"`, `"currency":"usd"`, `currency "usd" is not a three-letter currency code`},
		{"null positions", `"positions":[{"asset":"BTC","quantity":1,"avg_entry_price":1,"mark_price":1,"market_value":1,"unrealized_pnl":0,"side":"long"}]`, `"positions":null`, "positions is missing"},
		{"missing balances", `"balances":[{"asset":"USD","free":1,"locked":0}],`, ``, "balances is missing"},
		{"missing mark price", `"mark_price":1,`, ``, "positions[0].mark_price is missing"},
		{"negative quantity", `"quantity":1,"avg_entry_price"`, `"quantity":-1,"avg_entry_price"`, "positions[0].quantity is -1; it must not be negative"},
		{"bad side", `"side":"long"`, `"side":"flat"`, `positions[0].side "flat" is not one of long, short`},
		{"bad asset", `"asset":"BTC","quantity":1,"avg`, `"asset":"BTC USD","quantity":1,"avg`, `positions[0].asset "BTC USD" is not an asset name`},
		{"empty asset", `"asset":"USD"`, `"asset":""`, "balances[0].asset is missing"},
		{"negative locked", `"locked":0`, `"locked":-2`, "balances[0].locked is -2"},
		{"position not object", `"positions":[{`, `"positions":[7,{`, "positions[0] is not a position object"},
		{"order without id", `"id":"o1",`, ``, "open_orders[0].id is missing"},
		{"limit without price", `"price":1,`, ``, "open_orders[0].price is missing; only a market order may have none"},
		{"limit with null price", `"price":1,`, `"price":null,`, "open_orders[0].price is missing"},
		{"negative price", `"price":1,`, `"price":-1,`, "open_orders[0].price is -1"},
		{"text price", `"price":1,`, `"price":"1",`, "open_orders[0].price is not a number"},
		{"bad type", `"type":"limit"`, `"type":"iceberg"`, `open_orders[0].type "iceberg" is not one of market, limit, stop, stop_limit`},
		{"bad status", `"status":"open"`, `"status":"filled"`, `open_orders[0].status "filled" is not one of open, partially_filled`},
		{"bad created_at", `"created_at":"2026-11-22T14:00:00Z"`, `"created_at":"now"`, `open_orders[0].created_at "now" is not an RFC 3339 time`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if !strings.Contains(goodAccount, tt.from) {
				t.Fatalf("test case edits text %q that is not in the good account", tt.from)
			}
			body := strings.Replace(goodAccount, tt.from, tt.to, 1)
			_, err := ParseAccount([]byte(body))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("err = %v, want one containing %q", err, tt.wantErr)
			}
		})
	}
}

func TestParseAccountMarketOrderWithoutPrice(t *testing.T) {
	body := strings.Replace(strings.Replace(goodAccount, `"price":1,`, ``, 1), `"type":"limit"`, `"type":"market"`, 1)
	a, err := ParseAccount([]byte(body))
	if err != nil {
		t.Fatal(err)
	}
	if a.OpenOrders[0].Price != nil {
		t.Errorf("price = %v, want nil", *a.OpenOrders[0].Price)
	}
}

func TestAccountErrorClasses(t *testing.T) {
	tests := []struct {
		status int
		body   string
		class  agentrunner.ErrorClass
		want   string
	}{
		{200, `{"as_of":"2026-11-22T14:00:00Z"}`, agentrunner.ClassUnavailable, "invalid response (status 200): equity is missing"},
		{200, `<html>`, agentrunner.ClassUnavailable, "not a JSON account"},
		{503, `{"error":{"code":"maintenance","message":"back soon"}}`, agentrunner.ClassUnavailable, "503 maintenance: back soon"},
		{429, `{"error":{"code":"slow_down","message":"later"}}`, agentrunner.ClassUnavailable, "429 slow_down"},
		{401, `{"error":{"code":"unauthorized","message":"no"}}`, agentrunner.ClassConfig, "401 unauthorized"},
		{404, `{"error":{"code":"not_found","message":"no endpoint /v1/account"}}`, agentrunner.ClassConfig, "404 not_found"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.status, " ", tt.body), func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodGet || r.URL.Path != "/v1/account" {
					t.Errorf("request %s %s, want GET /v1/account", r.Method, r.URL.Path)
				}
				w.WriteHeader(tt.status)
				fmt.Fprint(w, tt.body)
			}))
			t.Cleanup(srv.Close)
			a, err := newClient(t, srv.URL, "").Account(context.Background())
			if got := agentrunner.ClassOf(err); got != tt.class {
				t.Fatalf("class = %q (account %+v, err %v), want %q", got, a, err, tt.class)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not contain %q", err, tt.want)
			}
		})
	}
}

func TestAccountUnavailableWhenNothingListens(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	_, err = newClient(t, "http://"+addr, "").Account(context.Background())
	if agentrunner.ClassOf(err) != agentrunner.ClassUnavailable {
		t.Errorf("err = %v, want class unavailable", err)
	}
}

func TestAccountCancelledContext(t *testing.T) {
	m, url := startMock(t, MockOptions{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	_, err := newClient(t, url, "").Account(ctx)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("err = %v, want one wrapping context.Canceled", err)
	}
	if n := len(m.Requests()); n != 0 {
		t.Errorf("mock recorded %d requests, want 0", n)
	}
}

func TestAccountValidate(t *testing.T) {
	if err := sampleAccount().Validate(); err != nil {
		t.Errorf("sample account: %v", err)
	}
	var nilAccount *Account
	if err := nilAccount.Validate(); err == nil {
		t.Error("nil account validated")
	}
	a := sampleAccount()
	a.Currency = "dollars"
	if err := a.Validate(); err == nil || !strings.Contains(err.Error(), "currency") {
		t.Errorf("err = %v, want a currency error", err)
	}
}
