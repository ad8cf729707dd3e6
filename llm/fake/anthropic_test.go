package fake_test

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner/llm"
	"github.com/agentrunner/agentrunner/llm/fake"
)

const anthropicTestKey = "sk-ant-fake-test-key"

type anthropicResult struct {
	status int
	header http.Header
	body   map[string]any
	raw    string
}

// anthropicPost sends body as the SDK would; edit may change the request.
func anthropicPost(t *testing.T, srv *fake.AnthropicServer, body string, edit ...func(*http.Request)) anthropicResult {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, srv.URL()+"/v1/messages", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("anthropic-version", "2023-06-01")
	req.Header.Set("x-api-key", anthropicTestKey)
	for _, e := range edit {
		e(req)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	res := anthropicResult{status: resp.StatusCode, header: resp.Header, raw: string(raw)}
	json.Unmarshal(raw, &res.body)
	return res
}

// anthropicErrorOf returns the type and message of an error body.
func anthropicErrorOf(t *testing.T, res anthropicResult) (string, string) {
	t.Helper()
	if res.body["type"] != "error" {
		t.Fatalf("body %s is not an error", res.raw)
	}
	e, _ := res.body["error"].(map[string]any)
	typ, _ := e["type"].(string)
	msg, _ := e["message"].(string)
	return typ, msg
}

const anthropicHello = `{"model":"claude-test","max_tokens":100,"messages":[{"role":"user","content":"Hi"}]}`

func TestAnthropicMessageReply(t *testing.T) {
	srv := fake.NewAnthropic(t, anthropicTestKey,
		fake.AnthropicReply{
			Text:      "Looking.",
			ToolCalls: []llm.ToolCall{{ID: "toolu_a", Name: "lookup", Arguments: json.RawMessage(`{"q":"x"}`)}, {Name: "clock"}},
			Usage:     llm.Usage{InputTokens: 100, OutputTokens: 9, CachedTokens: 60},
		},
		fake.AnthropicReply{Text: "Done.", StopReason: "max_tokens"},
	)
	res := anthropicPost(t, srv, anthropicHello)
	if res.status != http.StatusOK {
		t.Fatalf("status %d: %s", res.status, res.raw)
	}
	id, _ := res.body["id"].(string)
	if !strings.HasPrefix(id, "msg_") {
		t.Errorf("id %q does not look like a message id", id)
	}
	delete(res.body, "id")
	want := map[string]any{
		"type":          "message",
		"role":          "assistant",
		"model":         "claude-test",
		"stop_reason":   "tool_use",
		"stop_sequence": nil,
		"content": []any{
			map[string]any{"type": "text", "text": "Looking."},
			map[string]any{"type": "tool_use", "id": "toolu_a", "name": "lookup", "input": map[string]any{"q": "x"}},
			map[string]any{"type": "tool_use", "id": "toolu_fake001_1", "name": "clock", "input": map[string]any{}},
		},
		"usage": map[string]any{
			"input_tokens":                40.0,
			"output_tokens":               9.0,
			"cache_creation_input_tokens": 0.0,
			"cache_read_input_tokens":     60.0,
			"service_tier":                "standard",
		},
	}
	if diff := cmp.Diff(want, res.body); diff != "" {
		t.Errorf("body (-want +got):\n%s", diff)
	}

	res = anthropicPost(t, srv, anthropicHello)
	if res.body["stop_reason"] != "max_tokens" {
		t.Errorf("stop_reason = %v, want the scripted max_tokens", res.body["stop_reason"])
	}
}

func TestAnthropicErrorReplies(t *testing.T) {
	tests := []struct {
		reply      fake.AnthropicReply
		wantStatus int
		wantType   string
		wantMsg    string
		wantHeader http.Header
	}{
		{fake.AnthropicReply{Status: 529}, 529, "overloaded_error", "Overloaded", nil},
		{fake.AnthropicReply{Status: 429, RetryAfter: "7"}, 429, "rate_limit_error", "Too Many Requests", http.Header{"Retry-After": {"7"}}},
		{fake.AnthropicReply{Status: 500, ErrorMessage: "boom", Header: http.Header{"X-Should-Retry": {"false"}}}, 500, "api_error", "boom", http.Header{"X-Should-Retry": {"false"}}},
		{fake.AnthropicReply{Status: 401}, 401, "authentication_error", "Unauthorized", nil},
		{fake.AnthropicReply{Status: 418, ErrorType: "teapot_error"}, 418, "teapot_error", "I'm a teapot", nil},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprint(tt.wantStatus), func(t *testing.T) {
			srv := fake.NewAnthropic(t, "", tt.reply)
			res := anthropicPost(t, srv, anthropicHello)
			if res.status != tt.wantStatus {
				t.Errorf("status %d, want %d", res.status, tt.wantStatus)
			}
			typ, msg := anthropicErrorOf(t, res)
			if typ != tt.wantType || msg != tt.wantMsg {
				t.Errorf("error %q %q, want %q %q", typ, msg, tt.wantType, tt.wantMsg)
			}
			for k := range tt.wantHeader {
				if got := res.header.Get(k); got != tt.wantHeader.Get(k) {
					t.Errorf("header %s = %q, want %q", k, got, tt.wantHeader.Get(k))
				}
			}
		})
	}
}

func TestAnthropicRawAndRespond(t *testing.T) {
	srv := fake.NewAnthropic(t, "",
		fake.AnthropicReply{Raw: `{"broken":`, Status: 200},
		fake.AnthropicReply{Respond: func(req fake.AnthropicRequest) fake.AnthropicReply {
			return fake.AnthropicReply{Text: "echo " + req.Messages[0].Content[0].Text}
		}},
	)
	if res := anthropicPost(t, srv, anthropicHello); res.raw != `{"broken":` || res.status != 200 {
		t.Errorf("raw reply: %d %q", res.status, res.raw)
	}
	res := anthropicPost(t, srv, anthropicHello)
	content, _ := res.body["content"].([]any)
	if len(content) != 1 || content[0].(map[string]any)["text"] != "echo Hi" {
		t.Errorf("Respond reply: %s", res.raw)
	}
}

func TestAnthropicScriptExhausted(t *testing.T) {
	srv := fake.NewAnthropic(t, "", fake.AnthropicReply{Text: "only one"})
	anthropicPost(t, srv, anthropicHello)
	res := anthropicPost(t, srv, anthropicHello)
	if res.status != http.StatusInternalServerError {
		t.Fatalf("status %d, want 500", res.status)
	}
	if _, msg := anthropicErrorOf(t, res); !strings.Contains(msg, "script exhausted") {
		t.Errorf("message %q does not say the script ran out", msg)
	}
}

func TestAnthropicHeadersChecked(t *testing.T) {
	tests := []struct {
		name       string
		edit       func(*http.Request)
		wantStatus int
		wantType   string
	}{
		{"no version", func(r *http.Request) { r.Header.Del("anthropic-version") }, 400, "invalid_request_error"},
		{"no key", func(r *http.Request) { r.Header.Del("x-api-key") }, 401, "authentication_error"},
		{"wrong key", func(r *http.Request) { r.Header.Set("x-api-key", "sk-ant-other") }, 401, "authentication_error"},
		{"bearer instead of x-api-key", func(r *http.Request) {
			r.Header.Del("x-api-key")
			r.Header.Set("Authorization", "Bearer "+anthropicTestKey)
		}, 401, "authentication_error"},
		{"not JSON", func(r *http.Request) { r.Header.Set("Content-Type", "text/plain") }, 400, "invalid_request_error"},
		{"wrong path", func(r *http.Request) { r.URL.Path = "/v1/v1/messages" }, 404, "not_found_error"},
		{"wrong method", func(r *http.Request) { r.Method = http.MethodPut }, 405, "invalid_request_error"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fake.NewAnthropic(t, anthropicTestKey, fake.AnthropicReply{Text: "ok"})
			res := anthropicPost(t, srv, anthropicHello, tt.edit)
			if res.status != tt.wantStatus {
				t.Fatalf("status %d, want %d: %s", res.status, tt.wantStatus, res.raw)
			}
			if typ, _ := anthropicErrorOf(t, res); typ != tt.wantType {
				t.Errorf("type %q, want %q", typ, tt.wantType)
			}
			if n := len(srv.Requests()); n != 1 {
				t.Errorf("%d requests recorded, want the rejected one", n)
			}
			// The rejected request consumed no reply.
			if res := anthropicPost(t, srv, anthropicHello); res.status != http.StatusOK {
				t.Errorf("the next good request got %d: %s", res.status, res.raw)
			}
		})
	}
}

func TestAnthropicRequestValidation(t *testing.T) {
	const tools = `"tools":[{"name":"lookup","input_schema":{"type":"object"}}]`
	tests := []struct {
		name string
		body string
		want string // in the error message; empty: the request is valid
	}{
		{"valid conversation with tools",
			`{"model":"m","max_tokens":5,` + tools + `,"messages":[
				{"role":"user","content":"Go"},
				{"role":"assistant","content":[{"type":"text","text":"Calling."},{"type":"tool_use","id":"t1","name":"lookup","input":{}}]},
				{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":"42"},{"type":"text","text":"and now?"}]}]}`, ""},
		{"not JSON", `{"model":`, "not a valid JSON request"},
		{"no model", `{"max_tokens":5,"messages":[{"role":"user","content":"Go"}]}`, "model: field required"},
		{"no max_tokens", `{"model":"m","messages":[{"role":"user","content":"Go"}]}`, "max_tokens: field required"},
		{"zero max_tokens", `{"model":"m","max_tokens":0,"messages":[{"role":"user","content":"Go"}]}`, "at least 1"},
		{"temperature", `{"model":"m","max_tokens":5,"temperature":1.2,"messages":[{"role":"user","content":"Go"}]}`, "temperature"},
		{"no messages", `{"model":"m","max_tokens":5,"messages":[]}`, "at least one message"},
		{"assistant first", `{"model":"m","max_tokens":5,"messages":[{"role":"assistant","content":"Hi"},{"role":"user","content":"Go"}]}`, "first message"},
		{"two user turns", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"Go"},{"role":"user","content":"Again"}]}`, "roles must alternate"},
		{"bad role", `{"model":"m","max_tokens":5,"messages":[{"role":"system","content":"Go"}]}`, "messages.0.role"},
		{"empty text", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"text","text":" "}]}]}`, "non-whitespace"},
		{"empty content list", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[]}]}`, "at least one content block"},
		{"tool_use input not an object", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"Go"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"lookup","input":"x"}]}]}`, "must be a JSON object"},
		{"tool_use from the user", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":[{"type":"tool_use","id":"t1","name":"lookup","input":{}}]}]}`, "only allowed in assistant"},
		{"unanswered tool_use", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"Go"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"lookup","input":{}}]},{"role":"user","content":"what?"}]}`, "without tool_result"},
		{"result for an unknown call", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"Go"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"lookup","input":{}}]},{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1"},{"type":"tool_result","tool_use_id":"t9"}]}]}`, `unexpected tool_use_id "t9"`},
		{"result after text", `{"model":"m","max_tokens":5,"messages":[{"role":"user","content":"Go"},{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"lookup","input":{}}]},{"role":"user","content":[{"type":"text","text":"here"},{"type":"tool_result","tool_use_id":"t1"}]}]}`, "must come before"},
		{"tool schema not an object type", `{"model":"m","max_tokens":5,"tools":[{"name":"x","input_schema":{"type":"string"}}],"messages":[{"role":"user","content":"Go"}]}`, `must be "object"`},
		{"tool names repeated", `{"model":"m","max_tokens":5,"tools":[{"name":"x","input_schema":{"type":"object"}},{"name":"x","input_schema":{"type":"object"}}],"messages":[{"role":"user","content":"Go"}]}`, "unique"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fake.NewAnthropic(t, anthropicTestKey, fake.AnthropicReply{Text: "ok"})
			res := anthropicPost(t, srv, tt.body)
			if tt.want == "" {
				if res.status != http.StatusOK {
					t.Fatalf("status %d: %s", res.status, res.raw)
				}
				return
			}
			if res.status != http.StatusBadRequest {
				t.Fatalf("status %d, want 400: %s", res.status, res.raw)
			}
			if _, msg := anthropicErrorOf(t, res); !strings.Contains(msg, tt.want) {
				t.Errorf("message %q does not say %q", msg, tt.want)
			}
		})
	}
}

func TestAnthropicRequestsDecoded(t *testing.T) {
	srv := fake.NewAnthropic(t, anthropicTestKey, fake.AnthropicReply{}, fake.AnthropicReply{})
	anthropicPost(t, srv, `{"model":"m","max_tokens":5,"temperature":0.5,"system":"Be brief.",
		"tools":[{"name":"lookup","description":"Find.","input_schema":{"type":"object"}}],
		"messages":[
			{"role":"user","content":"Go"},
			{"role":"assistant","content":[{"type":"tool_use","id":"t1","name":"lookup","input":{"q":1}}]},
			{"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","is_error":true,"content":[{"type":"text","text":"a"},{"type":"text","text":"b"}]}]}]}`)
	anthropicPost(t, srv, `{"model":"m","max_tokens":5,"system":[{"type":"text","text":"One."},{"type":"text","text":"Two."}],"messages":[{"role":"user","content":"Go"}]}`)
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	temp := 0.5
	want := fake.AnthropicRequest{
		Method: "POST", Path: "/v1/messages", Model: "m", System: "Be brief.", MaxTokens: 5, Temperature: &temp,
		Tools: []fake.AnthropicTool{{Name: "lookup", Description: "Find.", InputSchema: json.RawMessage(`{"type":"object"}`)}},
		Messages: []fake.AnthropicMessage{
			{Role: "user", Content: []fake.AnthropicBlock{{Type: "text", Text: "Go"}}},
			{Role: "assistant", Content: []fake.AnthropicBlock{{Type: "tool_use", ID: "t1", Name: "lookup", Input: json.RawMessage(`{"q":1}`)}}},
			{Role: "user", Content: []fake.AnthropicBlock{{Type: "tool_result", ToolUseID: "t1", IsError: true, Content: "a\nb"}}},
		},
	}
	got := reqs[0]
	if got.Header.Get("x-api-key") != anthropicTestKey || len(got.Body) == 0 {
		t.Errorf("header or body not kept: %v %q", got.Header, got.Body)
	}
	got.Header, got.Body = nil, nil
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("decoded request (-want +got):\n%s", diff)
	}
	if reqs[1].System != "One.\nTwo." {
		t.Errorf("system of blocks = %q", reqs[1].System)
	}
}

func TestAnthropicConcurrentRequests(t *testing.T) {
	const n = 20
	script := make([]fake.AnthropicReply, n)
	for i := range script {
		script[i] = fake.AnthropicReply{Text: fmt.Sprint("reply ", i)}
	}
	srv := fake.NewAnthropic(t, "", script...)
	var wg sync.WaitGroup
	texts := make(chan string, n)
	for range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			// t.Fatal may not be called here, so no anthropicPost.
			req, _ := http.NewRequest(http.MethodPost, srv.URL()+"/v1/messages", strings.NewReader(anthropicHello))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("anthropic-version", "2023-06-01")
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			var body struct {
				Content []struct {
					Text string `json:"text"`
				} `json:"content"`
			}
			if err := json.NewDecoder(resp.Body).Decode(&body); err != nil || len(body.Content) != 1 {
				t.Errorf("reply %d: %+v, %v", resp.StatusCode, body, err)
				return
			}
			texts <- body.Content[0].Text
		}()
	}
	wg.Wait()
	close(texts)
	seen := map[string]bool{}
	for s := range texts {
		seen[s] = true
	}
	if len(seen) != n {
		t.Errorf("%d distinct replies, want %d: each scripted reply is served once", len(seen), n)
	}
	if got := len(srv.Requests()); got != n {
		t.Errorf("%d requests recorded, want %d", got, n)
	}
}
