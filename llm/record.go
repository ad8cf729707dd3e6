package llm

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Recording writes every HTTP exchange of one attempt with a provider into
// a folder, as NNN-request.json and NNN-response.json, with credentials
// redacted, so an operator can see exactly what was sent and received.
type Recording struct {
	dir     string
	secrets []string
	mu      sync.Mutex
	n       int
}

// NewRecording records into dir. secrets are values (API keys) replaced by
// "[redacted]" wherever they appear, in addition to credential headers.
func NewRecording(dir string, secrets ...string) *Recording {
	var keep []string
	for _, s := range secrets {
		if s != "" {
			keep = append(keep, s)
		}
	}
	return &Recording{dir: dir, secrets: keep}
}

type recordingKey struct{}

// WithRecording makes requests made with ctx through Transport be recorded.
func WithRecording(ctx context.Context, r *Recording) context.Context {
	return context.WithValue(ctx, recordingKey{}, r)
}

// credentialHeaders are never written to a recording.
var credentialHeaders = []string{"Authorization", "X-Api-Key", "Api-Key", "Proxy-Authorization", "Cookie", "Set-Cookie"}

// Transport wraps base (nil: http.DefaultTransport) so that requests whose
// context carries a Recording are recorded.
func Transport(base http.RoundTripper) http.RoundTripper {
	if base == nil {
		base = http.DefaultTransport
	}
	return recordingTransport{base: base}
}

type recordingTransport struct{ base http.RoundTripper }

// exchange is what one request/response file holds.
type exchange struct {
	Method  string              `json:"method,omitempty"`
	URL     string              `json:"url,omitempty"`
	Status  int                 `json:"status,omitempty"`
	Headers map[string][]string `json:"headers"`
	Body    json.RawMessage     `json:"body,omitempty"`
	Text    string              `json:"text,omitempty"`
	Error   string              `json:"error,omitempty"`
}

func (t recordingTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	r, _ := req.Context().Value(recordingKey{}).(*Recording)
	if r == nil {
		return t.base.RoundTrip(req)
	}
	var reqBody []byte
	if req.Body != nil {
		var err error
		if reqBody, err = io.ReadAll(req.Body); err != nil {
			return nil, err
		}
		req.Body.Close()
		req.Body = io.NopCloser(bytes.NewReader(reqBody))
	}
	n := r.next()
	r.write(n, "request", exchange{Method: req.Method, URL: req.URL.String(), Headers: req.Header}, reqBody)
	resp, err := t.base.RoundTrip(req)
	if err != nil {
		r.write(n, "response", exchange{Error: err.Error()}, nil)
		return nil, err
	}
	respBody, readErr := io.ReadAll(resp.Body)
	resp.Body.Close()
	resp.Body = io.NopCloser(bytes.NewReader(respBody))
	ex := exchange{Status: resp.StatusCode, Headers: resp.Header}
	if readErr != nil {
		ex.Error = readErr.Error()
	}
	r.write(n, "response", ex, respBody)
	if readErr != nil {
		return nil, readErr
	}
	return resp, nil
}

func (r *Recording) next() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.n++
	return r.n
}

// write stores one side of an exchange. A failure to record never fails
// the request: the recording is for people, the conversation is the work.
func (r *Recording) write(n int, side string, ex exchange, body []byte) {
	headers := http.Header{}
	for k, vs := range ex.Headers {
		headers[k] = vs
	}
	for _, h := range credentialHeaders {
		if headers.Get(h) != "" {
			headers.Set(h, "[redacted]")
		}
	}
	ex.Headers = headers
	body = []byte(r.redact(string(body)))
	if json.Valid(body) {
		ex.Body = body
	} else if len(body) > 0 {
		ex.Text = string(body)
	}
	data, err := json.MarshalIndent(ex, "", "  ")
	if err != nil {
		return
	}
	data = []byte(r.redact(string(data)))
	os.WriteFile(filepath.Join(r.dir, fmt.Sprintf("%03d-%s.json", n, side)), data, 0o600)
}

func (r *Recording) redact(s string) string {
	for _, secret := range r.secrets {
		s = strings.ReplaceAll(s, secret, "[redacted]")
	}
	return s
}
