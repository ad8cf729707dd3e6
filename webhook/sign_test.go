package webhook

import (
	"errors"
	"regexp"
	"strings"
	"testing"
	"time"
)

// hexRun finds a MAC-sized run of hex digits.
var hexRun = regexp.MustCompile(`[0-9a-fA-F]{64}`)

func TestSignVerifyRoundTrip(t *testing.T) {
	secret := []byte("0123456789abcdef0123456789abcdef")
	at := time.Date(2026, 5, 1, 12, 0, 0, 999_000_000, time.UTC)
	tests := []struct {
		name string
		body string
		now  time.Time
	}{
		{"same second", `{"kind":"resumed"}`, at},
		{"empty body", ``, at},
		{"received a while later", `{"a":1}`, at.Add(4*time.Minute + 59*time.Second)},
		{"at the tolerance", `{"a":1}`, time.Unix(at.Unix(), 0).Add(5 * time.Minute)},
		{"receiver clock behind", `{"a":1}`, at.Add(-4 * time.Minute)},
		{"unicode and newlines", "{\"e\":\"é\\n\"}\n", at},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := Sign(secret, []byte(tt.body), at)
			if !strings.HasPrefix(h, "t=1777636800,v1=") || len(h) != len("t=1777636800,v1=")+64 {
				t.Fatalf("Sign = %q, want t=1777636800,v1=<64 hex>", h)
			}
			if err := Verify(secret, []byte(tt.body), h, tt.now, 5*time.Minute); err != nil {
				t.Errorf("Verify: %v", err)
			}
		})
	}
}

func TestVerifyAccepts(t *testing.T) {
	body := []byte(`{"kind":"resumed"}`)
	at := time.Unix(1777636800, 0)
	good := Sign(exampleSecret, body, at)
	v1 := strings.TrimPrefix(good, "t=1777636800,")
	other := "v1=" + strings.Repeat("ab", 32)
	for _, h := range []string{
		good,
		v1 + ",t=1777636800",                 // order does not matter
		"t=1777636800, " + other + ", " + v1, // any v1 may match, spaces allowed
		"t=1777636800,v0=zz," + v1 + ",v2=future",    // other schemes are ignored
		"t=1777636800,v1=" + strings.ToUpper(v1[3:]), // hex in either case
	} {
		if err := Verify(exampleSecret, body, h, at, time.Minute); err != nil {
			t.Errorf("Verify(%q): %v", h, err)
		}
	}
}

func TestVerifyRefuses(t *testing.T) {
	body := []byte(`{"kind":"escalation","id":"e"}`)
	at := time.Unix(1777636800, 0)
	good := Sign(exampleSecret, body, at)
	mac := strings.TrimPrefix(good, "t=1777636800,v1=")
	tests := []struct {
		name   string
		secret []byte
		body   string
		header string
		now    time.Time
		tol    time.Duration
		want   error // nil: an argument error
		says   string
	}{
		{"tampered body", exampleSecret, `{"kind":"escalation","id":"f"}`, good, at, time.Minute, ErrSignatureMismatch, "wrong secret, or the body was changed"},
		{"body with a trailing newline", exampleSecret, string(body) + "\n", good, at, time.Minute, ErrSignatureMismatch, ""},
		{"wrong secret", []byte("another-secret-0123456789"), string(body), good, at, time.Minute, ErrSignatureMismatch, ""},
		{"changed timestamp", exampleSecret, string(body), "t=1777636801,v1=" + mac, at, time.Minute, ErrSignatureMismatch, ""},
		{"stale", exampleSecret, string(body), good, at.Add(5*time.Minute + time.Second), 5 * time.Minute, ErrSignatureAge, "signed at 2026-05-01T12:00:00Z, 5m1s from now"},
		{"from the future", exampleSecret, string(body), good, at.Add(-2 * time.Minute), time.Minute, ErrSignatureAge, "-2m0s from now"},
		{"empty header", exampleSecret, string(body), "", at, time.Minute, ErrSignatureFormat, "empty or missing"},
		{"no t", exampleSecret, string(body), "v1=" + mac, at, time.Minute, ErrSignatureFormat, "t is missing"},
		{"no v1", exampleSecret, string(body), "t=1777636800", at, time.Minute, ErrSignatureFormat, "v1 is missing"},
		{"two t", exampleSecret, string(body), "t=1777636800,t=1777636800,v1=" + mac, at, time.Minute, ErrSignatureFormat, "more than once"},
		{"t not a number", exampleSecret, string(body), "t=soon,v1=" + mac, at, time.Minute, ErrSignatureFormat, "not a Unix time"},
		{"t negative", exampleSecret, string(body), "t=-1,v1=" + mac, at, time.Minute, ErrSignatureFormat, "not a Unix time"},
		{"t overflowing", exampleSecret, string(body), "t=99999999999999999999,v1=" + mac, at, time.Minute, ErrSignatureFormat, "not a Unix time"},
		{"v1 short", exampleSecret, string(body), "t=1777636800,v1=" + mac[:63], at, time.Minute, ErrSignatureFormat, "63 characters"},
		{"v1 not hex", exampleSecret, string(body), "t=1777636800,v1=" + strings.Repeat("zz", 32), at, time.Minute, ErrSignatureFormat, "not hexadecimal"},
		{"element without =", exampleSecret, string(body), good + ",junk", at, time.Minute, ErrSignatureFormat, "element 3 is not key=value"},
		{"empty key", exampleSecret, string(body), "=1," + good, at, time.Minute, ErrSignatureFormat, "element 1"},
		{"bare MAC", exampleSecret, string(body), mac, at, time.Minute, ErrSignatureFormat, ""},
		{"huge header", exampleSecret, string(body), good + strings.Repeat(",x=y", 2000), at, time.Minute, ErrSignatureFormat, "more than 4096"},
		{"empty secret", nil, string(body), good, at, time.Minute, nil, "secret is empty"},
		{"zero tolerance", exampleSecret, string(body), good, at, 0, nil, "tolerance must be positive"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := Verify(tt.secret, []byte(tt.body), tt.header, tt.now, tt.tol)
			if err == nil {
				t.Fatal("Verify accepted it")
			}
			if tt.want != nil && !errors.Is(err, tt.want) {
				t.Errorf("error %q is not %q", err, tt.want)
			}
			if !strings.Contains(err.Error(), tt.says) {
				t.Errorf("error %q does not say %q", err, tt.says)
			}
			// A MAC in an error could be a valid signature for the sender.
			if hexRun.MatchString(err.Error()) {
				t.Errorf("error %q quotes a MAC", err)
			}
			if len(tt.secret) > 0 && strings.Contains(err.Error(), string(tt.secret)) {
				t.Errorf("error %q contains the secret", err)
			}
		})
	}
}

// FuzzVerify: no header, body or tolerance makes Verify panic, and it only
// accepts what Sign made.
func FuzzVerify(f *testing.F) {
	body := []byte(`{"kind":"resumed"}`)
	f.Add(body, Sign(exampleSecret, body, time.Unix(1777636800, 0)), int64(1777636800))
	f.Add(body, "t=,v1=", int64(0))
	f.Add([]byte{}, "t=1,v1=00,v1=0000000000000000000000000000000000000000000000000000000000000000", int64(1))
	f.Add([]byte("x"), ",,,==,t=1=2", int64(-5))
	f.Fuzz(func(t *testing.T, body []byte, header string, now int64) {
		if err := Verify(exampleSecret, body, header, time.Unix(now, 0), time.Hour); err != nil {
			return
		}
		// Accepted: some v1 in the header must be the MAC of the body.
		ts, sigs, err := parseSignature(header)
		if err != nil {
			t.Fatalf("accepted an unparsable header %q: %v", header, err)
		}
		want := mac(exampleSecret, ts, body)
		for _, s := range sigs {
			if string(s) == string(want) {
				return
			}
		}
		t.Fatalf("accepted header %q for body %q without its MAC", header, body)
	})
}
