package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/agentrunner/agentrunner/internal/clip"
	"github.com/agentrunner/agentrunner/internal/neterr"
	"github.com/agentrunner/agentrunner/internal/retryafter"
)

// Headers of a delivery besides SignatureHeader.
const (
	// EventHeader carries the event's kind, so a receiver can route before
	// parsing the body.
	EventHeader = "Agentrunner-Event"
	// IdempotencyHeader carries the event's id; receivers dedupe by it.
	IdempotencyHeader = "Idempotency-Key"
)

// MinSecretLen is the shortest secret a Sender accepts: shorter ones can be
// guessed, and then anybody can send operators forged events.
const MinSecretLen = 16

const (
	// maxResponseBytes bounds what is read of an answer; only its start
	// matters, for the error message.
	maxResponseBytes = 64 << 10
	// maxSnippet bounds the receiver's words quoted in an error.
	maxSnippet = 200
	// maxRetryAfter bounds a Retry-After wait taken from an answer.
	maxRetryAfter = 24 * time.Hour
	// minHidden is the shortest URL part that is redacted from errors;
	// shorter ones ("/", "/in") are no tokens and would garble messages.
	minHidden = 4
)

// Sender makes single delivery attempts of stored event bodies to one
// operator webhook. The outbox decides when to try again. A Sender is safe
// for concurrent use.
type Sender struct {
	url    string
	secret []byte
	// target names the endpoint in errors without its path or query, which
	// often hold a token (https://hooks.example.com/services/<token>).
	target string
	// hidden are texts no error may quote: the secret and the parts of the
	// URL that may be a token, should the receiver echo them.
	hidden []string
	http   *http.Client
	// secretFrom, when set, gives the secret at each delivery (SecretFrom).
	secretFrom func() []byte
}

// SecretFrom makes the sender sign each delivery with the secret get
// returns then, so a rotated secret is used from the next delivery on. A
// value shorter than MinSecretLen is not taken: the last good one stays.
func (s *Sender) SecretFrom(get func() []byte) *Sender {
	s.secretFrom = get
	return s
}

// signingSecret is the secret of the next delivery.
func (s *Sender) signingSecret() []byte {
	if s.secretFrom != nil {
		if v := s.secretFrom(); len(v) >= MinSecretLen {
			return v
		}
	}
	return s.secret
}

// NewSender returns a Sender to url, an http or https URL with a host and
// no credentials or fragment, signing with secret (at least MinSecretLen
// bytes, taken from the environment by the caller). timeout bounds one
// attempt, from connecting to reading the answer, and must be positive.
// Errors never quote the secret, nor the URL's path or query.
func NewSender(rawURL string, secret []byte, timeout time.Duration) (*Sender, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		// url.Parse quotes the whole URL; say only what is wrong.
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err
		}
		return nil, fmt.Errorf("webhook URL: cannot parse it: %v", err)
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return nil, fmt.Errorf("webhook URL: scheme must be http or https, got %q", clip.String(u.Scheme, 20))
	case u.Host == "" || u.Hostname() == "":
		return nil, errors.New("webhook URL: host is missing")
	case u.User != nil:
		// Credentials in the URL would show up in transport errors.
		return nil, errors.New("webhook URL must not contain credentials; the receiver authenticates the runner by the signature")
	case u.Fragment != "" || strings.Contains(rawURL, "#"):
		return nil, errors.New("webhook URL must not have a fragment")
	}
	if len(secret) < MinSecretLen {
		return nil, fmt.Errorf("webhook secret is %d bytes, fewer than %d; generate one with e.g. `openssl rand -hex 32`", len(secret), MinSecretLen)
	}
	if timeout <= 0 {
		return nil, fmt.Errorf("webhook timeout must be positive, got %s", timeout)
	}
	transport := http.DefaultTransport
	if t, ok := transport.(*http.Transport); ok {
		// Its own pool, with the standard proxy, dial and TLS settings.
		transport = t.Clone()
	}
	hidden := []string{string(secret)}
	for _, v := range []string{u.EscapedPath(), u.Path, u.RawQuery} {
		if len(v) >= minHidden {
			hidden = append(hidden, v)
		}
	}
	for _, vs := range u.Query() {
		for _, v := range vs {
			if len(v) >= minHidden {
				hidden = append(hidden, v)
			}
		}
	}
	return &Sender{
		url:    u.String(),
		secret: bytes.Clone(secret),
		target: u.Scheme + "://" + u.Host,
		hidden: hidden,
		http: &http.Client{
			Timeout:   timeout,
			Transport: transport,
			// A redirect means the configured URL is wrong; following it
			// would hand signed events to whoever the Location names.
			CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
		},
	}, nil
}

// DeliveryError is why a delivery attempt failed. Deliver returns no other
// error type, so the outbox decides with errors.As alone.
type DeliveryError struct {
	// Status is the receiver's HTTP status, 0 when there was no answer.
	Status int
	// Retryable says whether a later attempt may succeed: no answer, a
	// timeout, 408, 429 and 5xx. Other answers will not change by waiting;
	// the outbox gives up on them and the engine logs the error.
	Retryable bool
	// RetryAfter is the wait the receiver asked for with Retry-After
	// (at most a day), 0 when it asked for none.
	RetryAfter time.Duration
	msg        string
	// err is the cause for errors.Is; cause is its text as shown, redacted.
	err   error
	cause string
}

// Error says what failed, for logs; it quotes neither the secret nor the
// URL's path or query.
func (e *DeliveryError) Error() string {
	if e.cause != "" {
		return e.msg + ": " + e.cause
	}
	return e.msg
}

// Unwrap returns the cause, so errors.Is sees context.Canceled.
func (e *DeliveryError) Unwrap() error { return e.err }

// Deliver makes one attempt to POST an event body, as Event.Body made it and
// the outbox stored it, signed at now, with the headers Content-Type:
// application/json, Agentrunner-Signature, Agentrunner-Event: kind and
// Idempotency-Key: id. id and kind must be the body's. A 2xx answer means
// delivered (nil); anything else is a *DeliveryError saying whether to try
// again. A body that breaks the contract is refused before anything is sent.
func (s *Sender) Deliver(ctx context.Context, id, kind string, body []byte, now time.Time) error {
	what := fmt.Sprintf("deliver webhook event %q (kind %q) to %s", clip.String(id, 80), clip.String(kind, 40), s.target)
	if err := checkDelivery(id, kind, body, now); err != nil {
		return s.fail(false, what, err)
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.url, bytes.NewReader(body))
	if err != nil {
		return s.fail(false, what+": build request", err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("User-Agent", "agentrunner")
	req.Header.Set(SignatureHeader, Sign(s.signingSecret(), body, now))
	req.Header.Set(EventHeader, kind)
	req.Header.Set(IdempotencyHeader, id)

	resp, err := s.http.Do(req)
	if err != nil {
		// Refused, reset, timed out, cancelled: all may pass. The cause
		// stays wrapped for errors.Is, without the URL the client adds.
		return s.fail(true, what, err)
	}
	defer resp.Body.Close()
	// A bounded start of the answer, for the message; reading it also lets
	// the connection be reused. A read error does not change the outcome.
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, maxResponseBytes))

	code := resp.StatusCode
	if code >= 200 && code < 300 {
		return nil
	}
	e := &DeliveryError{Status: code, msg: fmt.Sprintf("%s: HTTP %d", what, code)}
	switch {
	case code == http.StatusRequestTimeout, code == http.StatusTooManyRequests, code >= 500:
		e.Retryable = true
		if wait, ok := retryafter.Parse(resp.Header.Get("Retry-After"), now); ok {
			wait = min(wait, maxRetryAfter)
			e.RetryAfter = wait
			e.msg += fmt.Sprintf(", retry after %s", wait)
		}
	case code >= 300 && code < 400:
		// Location may carry a token too; name its host only.
		e.msg += ": the receiver redirects"
		if loc, err := url.Parse(resp.Header.Get("Location")); err == nil && loc.Host != "" {
			e.msg += " to " + s.clean(loc.Host, false)
		}
		e.msg += "; configure the URL it redirects to"
	}
	if snip := s.clean(string(answer), len(answer) == maxResponseBytes); snip != "" {
		e.msg += ": " + snip
	}
	return e
}

// checkDelivery refuses what the receiver would be wrong to accept: a
// header value that breaks the contract, a body that is not the event the
// headers name, a missing signing time.
func checkDelivery(id, kind string, body []byte, now time.Time) error {
	if err := checkID(id); err != nil {
		return err
	}
	if err := checkKind(kind); err != nil {
		return err
	}
	if now.IsZero() {
		return errors.New("the signing time is not set")
	}
	if len(body) == 0 {
		return errors.New("the body is empty")
	}
	if len(body) > MaxBodyBytes {
		return fmt.Errorf("the body is %d bytes, more than %d", len(body), MaxBodyBytes)
	}
	var head struct {
		Kind *string `json:"kind"`
		ID   *string `json:"id"`
	}
	if err := json.Unmarshal(body, &head); err != nil {
		return fmt.Errorf("the body is not a JSON event: %v", err)
	}
	switch {
	case head.ID == nil || *head.ID != id:
		// Receivers dedupe by the header; it must name the body's event.
		return errors.New("the body's id is not the Idempotency-Key")
	case head.Kind == nil || *head.Kind != kind:
		return errors.New("the body's kind is not the Agentrunner-Event header")
	}
	return nil
}

// fail returns the DeliveryError of a failure without an answer. The URL
// net/http puts in front of a transport error is dropped, and the rest of
// its text redacted; the cause stays wrapped for errors.Is.
func (s *Sender) fail(retryable bool, what string, err error) *DeliveryError {
	err = neterr.Unwrap(err)
	return &DeliveryError{Retryable: retryable, msg: what, err: err, cause: s.clean(err.Error(), false)}
}

// clean makes text from outside safe for one log line: the hidden texts
// are redacted, control characters and invalid UTF-8 become spaces, runs of
// spaces one, and it is clipped. cut says that t is the start of something
// longer, so a hidden text may begin at its end; that beginning goes too.
func (s *Sender) clean(t string, cut bool) string {
	for _, h := range append(s.hidden, string(s.signingSecret())) {
		t = strings.ReplaceAll(t, h, "[redacted]")
		if cut {
			for k := len(h) - 1; k > 0; k-- {
				if strings.HasSuffix(t, h[:k]) {
					t = t[:len(t)-k]
					break
				}
			}
		}
	}
	t = strings.Map(func(r rune) rune {
		if r == utf8.RuneError || unicode.IsControl(r) {
			return ' '
		}
		return r
	}, t)
	return clip.String(strings.Join(strings.Fields(t), " "), maxSnippet)
}
