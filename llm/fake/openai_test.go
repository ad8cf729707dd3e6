package fake

import (
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner/llm"
)

// openaiPost sends body to the server's chat completions endpoint with key
// as bearer token ("" sends none) and returns the status and the body.
func openaiPost(t *testing.T, s *OpenAIServer, key, body string) (int, http.Header, []byte) {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, s.URL()+"/chat/completions", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	if key != "" {
		req.Header.Set("Authorization", "Bearer "+key)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, resp.Header, data
}

// openaiErrorMessage is the message of an OpenAI error body.
func openaiErrorMessage(t *testing.T, body []byte) string {
	t.Helper()
	var e struct {
		Error struct {
			Message string `json:"message"`
			Type    string `json:"type"`
		} `json:"error"`
	}
	if err := json.Unmarshal(body, &e); err != nil || e.Error.Message == "" || e.Error.Type == "" {
		t.Fatalf("not an OpenAI error object (%v): %s", err, body)
	}
	return e.Error.Message
}

const openaiHello = `{"model":"gpt-test","messages":[{"role":"user","content":"hi"}]}`

func TestOpenAICompletionShape(t *testing.T) {
	s := NewOpenAI(t, "",
		OpenAIReply{ToolCalls: []llm.ToolCall{{Name: "f", Arguments: json.RawMessage(`{"a":1}`)}, {ID: "call_given", Name: "g"}}, Usage: llm.Usage{InputTokens: 9, OutputTokens: 4, CachedTokens: 2}},
		OpenAIReply{Text: "plain", FinishReason: "length"},
	)
	status, header, body := openaiPost(t, s, "", openaiHello)
	if status != http.StatusOK || !strings.HasPrefix(header.Get("Content-Type"), "application/json") {
		t.Fatalf("status %d, content type %q: %s", status, header.Get("Content-Type"), body)
	}
	var got map[string]any
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(got["id"].(string), "chatcmpl-") || got["object"] != "chat.completion" || got["model"] != "gpt-test" || got["created"].(float64) <= 0 {
		t.Errorf("envelope = %s", body)
	}
	choice := got["choices"].([]any)[0].(map[string]any)
	msg := choice["message"].(map[string]any)
	want := map[string]any{
		"role": "assistant", "content": nil, "refusal": nil, "annotations": []any{},
		"tool_calls": []any{
			map[string]any{"id": "call_fake000100", "type": "function", "function": map[string]any{"name": "f", "arguments": `{"a":1}`}},
			map[string]any{"id": "call_given", "type": "function", "function": map[string]any{"name": "g", "arguments": "{}"}},
		},
	}
	if d := cmp.Diff(want, msg); d != "" {
		t.Errorf("message (-want +got):\n%s", d)
	}
	if choice["finish_reason"] != "tool_calls" {
		t.Errorf("finish_reason = %v", choice["finish_reason"])
	}
	wantUsage := map[string]any{
		"prompt_tokens": 9.0, "completion_tokens": 4.0, "total_tokens": 13.0,
		"prompt_tokens_details":     map[string]any{"cached_tokens": 2.0, "audio_tokens": 0.0},
		"completion_tokens_details": map[string]any{"reasoning_tokens": 0.0, "audio_tokens": 0.0, "accepted_prediction_tokens": 0.0, "rejected_prediction_tokens": 0.0},
	}
	if d := cmp.Diff(wantUsage, got["usage"]); d != "" {
		t.Errorf("usage (-want +got):\n%s", d)
	}

	_, _, body = openaiPost(t, s, "", openaiHello)
	if !strings.Contains(string(body), `"content":"plain"`) || !strings.Contains(string(body), `"finish_reason":"length"`) {
		t.Errorf("second reply = %s", body)
	}
}

func TestOpenAIScriptExhausted(t *testing.T) {
	s := NewOpenAI(t, "", OpenAIReply{Text: "only one"})
	if status, _, _ := openaiPost(t, s, "", openaiHello); status != http.StatusOK {
		t.Fatalf("first request: status %d", status)
	}
	status, _, body := openaiPost(t, s, "", openaiHello)
	if status != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", status)
	}
	if msg := openaiErrorMessage(t, body); !strings.Contains(msg, "no reply for request 2 (it has 1 replies)") {
		t.Errorf("message %q does not say the script ran out", msg)
	}
}

func TestOpenAIAuthorization(t *testing.T) {
	const key = "sk-fake-key"
	s := NewOpenAI(t, key, OpenAIReply{Text: "ok"})
	tests := []struct {
		name    string
		key     string
		status  int
		message string
	}{
		{"missing", "", http.StatusUnauthorized, "You didn't provide an API key"},
		{"wrong", "sk-other", http.StatusUnauthorized, "Incorrect API key provided: sk-other"},
		{"right", key, http.StatusOK, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, _, body := openaiPost(t, s, tt.key, openaiHello)
			if status != tt.status {
				t.Fatalf("status %d, want %d: %s", status, tt.status, body)
			}
			if tt.message != "" && !strings.Contains(openaiErrorMessage(t, body), tt.message) {
				t.Errorf("body %s lacks %q", body, tt.message)
			}
		})
	}
	// Rejected requests are recorded but do not use up the script.
	if n := len(s.Requests()); n != 3 {
		t.Errorf("%d requests recorded, want 3", n)
	}
}

func TestOpenAIValidatesRequests(t *testing.T) {
	tests := []struct {
		name string
		body string
		want string
	}{
		{"not JSON", `{"model":`, "could not parse the JSON body"},
		{"no model", `{"messages":[{"role":"user","content":"hi"}]}`, "provide a model"},
		{"no messages", `{"model":"m","messages":[]}`, "at least one message"},
		{"unknown role", `{"model":"m","messages":[{"role":"robot","content":"hi"}]}`, `"robot" is not one of`},
		{"stream", `{"model":"m","stream":true,"messages":[{"role":"user","content":"hi"}]}`, "stream is not supported"},
		{"tool without call", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"tool","tool_call_id":"call_x","content":"r"}]}`, "must be a response to a preceding message with 'tool_calls'"},
		{"unanswered call", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}},{"id":"call_2","type":"function","function":{"name":"f","arguments":"{}"}}]},{"role":"tool","tool_call_id":"call_1","content":"r"},{"role":"user","content":"next"}]}`, "missing call_2"},
		{"call unanswered at the end", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{}"}}]}]}`, "missing call_1"},
		{"empty assistant", `{"model":"m","messages":[{"role":"user","content":"hi"},{"role":"assistant","content":null}]}`, "needs content or tool_calls"},
		{"tool type", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"custom","custom":{"name":"x"}}]}`, `tools[0].type: "custom"`},
		{"tool parameters", `{"model":"m","messages":[{"role":"user","content":"hi"}],"tools":[{"type":"function","function":{"name":"f","parameters":[]}}]}`, "parameters must be a JSON object"},
		{"json_schema without schema", `{"model":"m","messages":[{"role":"user","content":"hi"}],"response_format":{"type":"json_schema","json_schema":{"name":"x"}}}`, "needs a name and a schema"},
		{"temperature", `{"model":"m","temperature":3,"messages":[{"role":"user","content":"hi"}]}`, "temperature must be between 0 and 2"},
		{"content part", `{"model":"m","messages":[{"role":"user","content":[{"type":"image_url","image_url":{"url":"x"}}]}]}`, "only knows text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := NewOpenAI(t, "", OpenAIReply{Text: "must not be used"})
			status, _, body := openaiPost(t, s, "", tt.body)
			if status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", status, body)
			}
			if msg := openaiErrorMessage(t, body); !strings.Contains(msg, tt.want) {
				t.Errorf("message %q lacks %q", msg, tt.want)
			}
			if reqs := s.Requests(); len(reqs) != 1 || string(reqs[0].Body) != tt.body {
				t.Errorf("the request was not recorded as sent: %+v", reqs)
			}
		})
	}
}

func TestOpenAIRecordsAndResponds(t *testing.T) {
	var seen OpenAIRequest
	s := NewOpenAI(t, "", OpenAIReply{Respond: func(req OpenAIRequest) OpenAIReply {
		seen = req
		return OpenAIReply{Text: "you said " + req.Messages[len(req.Messages)-1].Content}
	}})
	body := `{"model":"m","max_tokens":50,"temperature":0,` +
		`"tools":[{"type":"function","function":{"name":"f","description":"d","parameters":{"type":"object"}}}],` +
		`"response_format":{"type":"json_schema","json_schema":{"name":"out","schema":{"type":"object"},"strict":false}},` +
		`"messages":[{"role":"system","content":"sys"},{"role":"user","content":"q"},` +
		`{"role":"assistant","content":null,"tool_calls":[{"id":"call_1","type":"function","function":{"name":"f","arguments":"{\"x\":"}}]},` +
		`{"role":"tool","tool_call_id":"call_1","content":"result"},{"role":"user","content":[{"type":"text","text":"par"},{"type":"text","text":"ts"}]}]}`
	status, _, resp := openaiPost(t, s, "", body)
	if status != http.StatusOK || !strings.Contains(string(resp), `"content":"you said parts"`) {
		t.Fatalf("status %d: %s", status, resp)
	}
	fifty, zero, strict := 50, 0.0, false
	want := OpenAIRequest{
		Model: "m",
		Messages: []OpenAIMessage{
			{Role: "system", Content: "sys"},
			{Role: "user", Content: "q"},
			{Role: "assistant", ContentNull: true, ToolCalls: []llm.ToolCall{{ID: "call_1", Name: "f", Arguments: json.RawMessage(`{"x":`)}}},
			{Role: "tool", ToolCallID: "call_1", Content: "result"},
			{Role: "user", Content: "parts"},
		},
		Tools:          []OpenAITool{{Name: "f", Description: "d", Parameters: json.RawMessage(`{"type":"object"}`)}},
		ResponseFormat: &OpenAIResponseFormat{Type: "json_schema", Name: "out", Schema: json.RawMessage(`{"type":"object"}`), Strict: &strict},
		MaxTokens:      &fifty,
		Temperature:    &zero,
		Body:           []byte(body),
	}
	got := s.Requests()
	if len(got) != 1 {
		t.Fatalf("%d requests", len(got))
	}
	if got[0].Header.Get("Content-Type") != "application/json" {
		t.Errorf("headers not recorded: %v", got[0].Header)
	}
	got[0].Header = nil
	if d := cmp.Diff(want, got[0]); d != "" {
		t.Errorf("recorded request (-want +got):\n%s", d)
	}
	seen.Header = nil
	if d := cmp.Diff(want, seen); d != "" {
		t.Errorf("request given to Respond (-want +got):\n%s", d)
	}
}

func TestOpenAIScriptedErrors(t *testing.T) {
	s := NewOpenAI(t, "",
		OpenAIReply{Status: 429, RetryAfter: "7", Header: http.Header{"Retry-After-Ms": {"7000"}}},
		OpenAIReply{Status: 502, ErrorBody: "<html>bad gateway</html>"},
		OpenAIReply{Raw: `{"choices":[`},
	)
	status, header, body := openaiPost(t, s, "", openaiHello)
	if status != 429 || header.Get("Retry-After") != "7" || header.Get("Retry-After-Ms") != "7000" {
		t.Errorf("429: status %d, headers %v", status, header)
	}
	if msg := openaiErrorMessage(t, body); !strings.Contains(msg, "Rate limit") {
		t.Errorf("429 message %q", msg)
	}
	status, header, body = openaiPost(t, s, "", openaiHello)
	if status != 502 || string(body) != "<html>bad gateway</html>" || !strings.HasPrefix(header.Get("Content-Type"), "text/html") {
		t.Errorf("502: status %d, type %q, body %s", status, header.Get("Content-Type"), body)
	}
	status, _, body = openaiPost(t, s, "", openaiHello)
	if status != 200 || string(body) != `{"choices":[` {
		t.Errorf("raw: status %d, body %s", status, body)
	}
}

func TestOpenAIRoutes(t *testing.T) {
	s := NewOpenAI(t, "")
	resp, err := http.Get(s.URL() + "/chat/completions")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusMethodNotAllowed {
		t.Errorf("GET: status %d, want 405", resp.StatusCode)
	}
	resp, err = http.Post(s.URL()+"/completions", "application/json", strings.NewReader(openaiHello))
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusNotFound {
		t.Errorf("other path: status %d, want 404", resp.StatusCode)
	}
	if !strings.HasPrefix(s.URL(), "http://127.0.0.1:") || !strings.HasSuffix(s.URL(), "/v1") {
		t.Errorf("URL() = %q", s.URL())
	}
}

func TestOpenAIConcurrentUse(t *testing.T) {
	const n = 20
	script := make([]OpenAIReply, n)
	for i := range script {
		script[i] = OpenAIReply{Text: "ok"}
	}
	s := NewOpenAI(t, "", script...)
	var wg sync.WaitGroup
	var mu sync.Mutex
	ids := map[string]bool{}
	for range n {
		wg.Go(func() {
			resp, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(openaiHello))
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var c struct {
				ID string `json:"id"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&c); err != nil || resp.StatusCode != http.StatusOK {
				t.Errorf("status %d, decode: %v", resp.StatusCode, err)
				return
			}
			mu.Lock()
			ids[c.ID] = true
			mu.Unlock()
		})
	}
	wg.Wait()
	if got := len(s.Requests()); got != n {
		t.Errorf("%d requests recorded, want %d", got, n)
	}
	if len(ids) != n {
		t.Errorf("%d distinct completion ids for %d requests", len(ids), n)
	}
}

// TestStartOpenAIOutsideTests: StartOpenAI needs no testing.TB; its
// respond function answers every request, the key is checked as ever,
// and Close, twice, stops it.
func TestStartOpenAIOutsideTests(t *testing.T) {
	calls := 0
	s, err := StartOpenAI("k-demo", func(req OpenAIRequest) OpenAIReply {
		calls++
		return OpenAIReply{Text: "hello " + req.Messages[len(req.Messages)-1].Content}
	})
	if err != nil {
		t.Fatal(err)
	}
	body := `{"model":"gpt-4.1","messages":[{"role":"user","content":"there"}]}`
	for range 3 {
		status, _, data := openaiPost(t, s, "k-demo", body)
		if status != http.StatusOK || !strings.Contains(string(data), `"content":"hello there"`) {
			t.Fatalf("%d %s", status, data)
		}
	}
	if status, _, _ := openaiPost(t, s, "wrong", body); status != http.StatusUnauthorized {
		t.Errorf("a wrong key: %d, want 401", status)
	}
	if calls != 3 || len(s.Requests()) != 4 {
		t.Errorf("respond called %d times, %d requests recorded; want 3 and 4", calls, len(s.Requests()))
	}
	s.Close()
	s.Close()
	if _, err := http.Post(s.URL()+"/chat/completions", "application/json", strings.NewReader(body)); err == nil {
		t.Error("the server answers after Close")
	}
	if _, err := StartOpenAI("k", nil); err == nil {
		t.Error("StartOpenAI without a respond function started")
	}
}
