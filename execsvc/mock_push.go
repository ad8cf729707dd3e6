package execsvc

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sync"
	"time"

	"github.com/agentrunner/agentrunner/internal/clip"
	"github.com/agentrunner/agentrunner/webhook"
)

// MockCallback is where a mock pushes the status changes of its
// strategies: the runner's POST /api/execution/callback, which `serve`
// offers when execution_service.callback_secret_env names the secret
// (docs/execution-service.md). A real service pushes so the runner need
// not wait for its next poll; the mock does the same so that path can be
// tried offline.
type MockCallback struct {
	// URL is the callback endpoint, such as
	// http://127.0.0.1:8080/api/execution/callback. Empty: no pushes.
	URL string
	// Secret signs each push in the webhook format; it must not be empty.
	Secret []byte
	// Client sends the pushes; nil means a client with a 10s timeout.
	Client *http.Client
}

// Validate checks a callback target that has a URL: an absolute http(s)
// URL and a secret to sign with.
func (c MockCallback) Validate() error {
	u, err := url.Parse(c.URL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("callback URL %q: want an absolute http or https URL such as http://127.0.0.1:8080/api/execution/callback", clip.String(c.URL, 200))
	}
	if u.User != nil {
		return errors.New("callback URL: credentials do not belong in the URL; pushes are signed with the secret")
	}
	if len(c.Secret) == 0 {
		return errors.New("callback secret is empty: the runner refuses unsigned callbacks")
	}
	return nil
}

// Push is one status callback the mock sent, and how it went.
type Push struct {
	StrategyID string
	Status     Status
	Error      string
	// Time is when the status changed, by the mock's clock.
	Time time.Time
	// StatusCode is the runner's answer; 0 when there was none, and
	// Failure says why.
	StatusCode int
	Failure    string
}

// Pushes returns the status callbacks sent so far, in the order sent.
func (m *Mock) Pushes() []Push {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Push(nil), m.pushed...)
}

// background is the mock's work outside requests, ended by Close.
type background struct {
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// goBackground runs f in the background until Close. Work started by
// background work (parent) that Close has ended is not started: checked
// under bgMu, which Close holds while it cancels, so none escapes it.
func (m *Mock) goBackground(parent context.Context, f func(ctx context.Context)) {
	m.bgMu.Lock()
	defer m.bgMu.Unlock()
	if parent.Err() != nil {
		return
	}
	if m.bg == nil {
		ctx, cancel := context.WithCancel(context.Background())
		m.bg = &background{ctx: ctx, cancel: cancel}
	}
	b := m.bg
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		f(b.ctx)
	}()
}

// stopBackground ends the background work and waits for it: a push in
// flight finishes, callbacks still queued are dropped (their runner polls
// anyway).
func (m *Mock) stopBackground() {
	m.bgMu.Lock()
	b := m.bg
	m.bg = nil
	if b != nil {
		b.cancel()
	}
	m.bgMu.Unlock()
	if b != nil {
		b.wg.Wait()
	}
}

// rank orders statuses: a strategy's status only moves up.
func rank(s Status) int {
	switch s {
	case StatusExecuting:
		return 1
	case StatusCompleted, StatusErrored:
		return 2
	}
	return 0
}

// final is the status a strategy ends in: error when FailWith is set.
func (m *Mock) final() Status {
	if m.opts.FailWith != "" {
		return StatusErrored
	}
	return StatusCompleted
}

// moveTo moves a to next, if that is further on, and queues its push;
// ctx is the caller's background work, or context.Background() for a
// request. The caller holds m.mu.
func (m *Mock) moveTo(ctx context.Context, a *accepted, next Status) {
	if rank(next) <= rank(a.status) {
		return
	}
	a.status = next
	a.updatedAt = m.opts.Now().UTC()
	if m.opts.Callback.URL == "" {
		return
	}
	p := Push{StrategyID: a.id, Status: next, Time: a.updatedAt}
	if next == StatusErrored {
		p.Error = m.opts.FailWith
	}
	m.pushes = append(m.pushes, p)
	if !m.pushing {
		m.pushing = true
		m.goBackground(ctx, m.drain)
	}
}

// advance moves a on by itself, one status every Advance, until it is
// final (by this or by polls) or the mock closes.
func (m *Mock) advance(ctx context.Context, a *accepted) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-m.opts.After(m.opts.Advance):
		}
		m.mu.Lock()
		if a.status == StatusAcknowledged {
			m.moveTo(ctx, a, StatusExecuting)
		} else {
			m.moveTo(ctx, a, m.final())
		}
		done := a.status.Terminal()
		m.mu.Unlock()
		if done {
			return
		}
	}
}

// drain sends the queued pushes one at a time, in order, so the runner
// never hears "executing" after "completed".
func (m *Mock) drain(ctx context.Context) {
	for {
		m.mu.Lock()
		if ctx.Err() != nil {
			m.pushes = nil // Close dropped them
		}
		if len(m.pushes) == 0 {
			m.pushing = false
			m.mu.Unlock()
			return
		}
		p := m.pushes[0]
		m.pushes = m.pushes[1:]
		m.mu.Unlock()

		// A push in flight is finished, within the client's timeout,
		// even when Close comes: it is recorded, whatever its outcome.
		p.StatusCode, p.Failure = m.send(context.WithoutCancel(ctx), p)
		m.mu.Lock()
		m.pushed = append(m.pushed, p)
		m.mu.Unlock()
		if m.opts.OnPush != nil {
			m.opts.OnPush(p)
		}
	}
}

// send posts one push, signed, and returns the runner's answer. A push
// that fails is not sent again: the runner polls, so it loses only time.
func (m *Mock) send(ctx context.Context, p Push) (int, string) {
	body := encodeJSON(struct {
		StrategyID string `json:"strategy_id"`
		Status     Status `json:"status"`
		Error      string `json:"error,omitempty"`
	}{p.StrategyID, p.Status, p.Error})
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, m.opts.Callback.URL, bytes.NewReader(body))
	if err != nil {
		return 0, err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(webhook.SignatureHeader, webhook.Sign(m.opts.Callback.Secret, body, m.opts.Now()))
	client := m.opts.Callback.Client
	if client == nil {
		client = &http.Client{Timeout: 10 * time.Second}
	}
	resp, err := client.Do(req)
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	answer, _ := io.ReadAll(io.LimitReader(resp.Body, 1000))
	if resp.StatusCode >= 300 {
		return resp.StatusCode, clip.String(string(bytes.TrimSpace(answer)), 300)
	}
	return resp.StatusCode, ""
}
