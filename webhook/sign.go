package webhook

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/agentrunner/agentrunner/internal/clip"
)

// SignatureHeader carries Sign's value on every delivery.
const SignatureHeader = "Agentrunner-Signature"

// Errors of Verify, for receivers that answer each differently; every error
// Verify returns wraps one of them, or is about its own arguments.
var (
	// ErrSignatureFormat: the header is not "t=<unix seconds>,v1=<64 hex>".
	ErrSignatureFormat = errors.New("malformed signature header")
	// ErrSignatureMismatch: no v1 value is the MAC of this body and
	// timestamp under this secret: the body was changed, or the secret differs.
	ErrSignatureMismatch = errors.New("signature does not match the body")
	// ErrSignatureAge: the signature is authentic but its timestamp is
	// further from now than the tolerance: a replay, or a clock off.
	ErrSignatureAge = errors.New("signature timestamp is outside the tolerance")
)

// maxHeaderLen bounds the signature header Verify parses, so a hostile
// request cannot make it work on megabytes.
const maxHeaderLen = 4096

// Sign returns the signature header value for a body sent at t:
// "t=<unix seconds>,v1=<hex of HMAC-SHA256(secret, "<unix seconds>.<body>")>".
// The timestamp is inside the MAC, so a receiver can refuse replays by age
// without trusting anything unsigned.
func Sign(secret []byte, body []byte, t time.Time) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

// mac is HMAC-SHA256(secret, ts + "." + body).
func mac(secret []byte, ts string, body []byte) []byte {
	m := hmac.New(sha256.New, secret)
	m.Write([]byte(ts))
	m.Write([]byte{'.'})
	m.Write(body)
	return m.Sum(nil)
}

// Verify checks a signature header against the body exactly as received,
// for receivers. It refuses a malformed header (ErrSignatureFormat), a MAC
// that does not match (ErrSignatureMismatch; compared in constant time)
// and an authentic signature whose timestamp is more than tolerance away
// from now, in the past or the future (ErrSignatureAge). Several v1 values
// are accepted, any of which may match, and other schemes are ignored, so
// the format can grow. The secret must not be empty and tolerance must be
// positive; five minutes suits receivers whose clocks are synchronised.
func Verify(secret []byte, body []byte, header string, now time.Time, tolerance time.Duration) error {
	if len(secret) == 0 {
		return errors.New("verify webhook signature: the secret is empty")
	}
	if tolerance <= 0 {
		return fmt.Errorf("verify webhook signature: tolerance must be positive, got %s", tolerance)
	}
	ts, sigs, err := parseSignature(header)
	if err != nil {
		return fmt.Errorf("verify webhook signature: %w: %v", ErrSignatureFormat, err)
	}
	want := mac(secret, ts, body)
	ok := false
	for _, sig := range sigs {
		// Every candidate is compared, so the time taken says nothing about
		// which one matched. The expected MAC is never put in an error: it
		// would be a valid signature for whoever sent the body.
		if hmac.Equal(sig, want) {
			ok = true
		}
	}
	if !ok {
		return fmt.Errorf("verify webhook signature: %w (wrong secret, or the body was changed after signing)", ErrSignatureMismatch)
	}
	secs, _ := strconv.ParseInt(ts, 10, 64) // parseSignature checked it
	signed := time.Unix(secs, 0)
	if age := now.Sub(signed); age > tolerance || -age > tolerance {
		return fmt.Errorf("verify webhook signature: %w: signed at %s, %s from now, tolerance %s",
			ErrSignatureAge, signed.UTC().Format(time.RFC3339), age.Truncate(time.Second), tolerance)
	}
	return nil
}

// parseSignature splits "t=<digits>,v1=<hex>[,v1=<hex>…]" into the
// timestamp as signed and the decoded v1 MACs. Its messages quote no MAC.
func parseSignature(header string) (ts string, sigs [][]byte, err error) {
	if header == "" {
		return "", nil, errors.New("the header is empty or missing")
	}
	if len(header) > maxHeaderLen {
		return "", nil, fmt.Errorf("the header is %d bytes, more than %d", len(header), maxHeaderLen)
	}
	haveT := false
	for i, part := range strings.Split(header, ",") {
		key, value, found := strings.Cut(strings.TrimSpace(part), "=")
		if !found || key == "" {
			return "", nil, fmt.Errorf("element %d is not key=value", i+1)
		}
		switch key {
		case "t":
			if haveT {
				return "", nil, errors.New("t is given more than once")
			}
			haveT = true
			if !isDigits(value) || len(value) > 18 {
				return "", nil, fmt.Errorf("t is not a Unix time in seconds (%q)", clip.String(value, 24))
			}
			ts = value
		case "v1":
			if len(value) != 2*sha256.Size {
				return "", nil, fmt.Errorf("v1 is %d characters, want %d hex digits", len(value), 2*sha256.Size)
			}
			sig, err := hex.DecodeString(value)
			if err != nil {
				return "", nil, errors.New("v1 is not hexadecimal")
			}
			sigs = append(sigs, sig)
		}
	}
	if !haveT {
		return "", nil, errors.New("t is missing")
	}
	if len(sigs) == 0 {
		return "", nil, errors.New("v1 is missing")
	}
	return ts, sigs, nil
}

// isDigits reports whether s is one or more ASCII digits.
func isDigits(s string) bool {
	if s == "" {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
