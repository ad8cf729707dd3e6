package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/llm"
	"github.com/agentrunner/agentrunner/llm/fake"
	"github.com/agentrunner/agentrunner/llm/openai"
)

const testKey = "sk-test-0123456789abcdef"

// newModel returns a Model talking to srv with testKey; opts adjust the
// configuration.
func newModel(t *testing.T, srv *fake.OpenAIServer, opts ...func(*openai.Config)) *openai.Model {
	t.Helper()
	cfg := openai.Config{BaseURL: srv.URL(), APIKey: testKey}
	for _, o := range opts {
		o(&cfg)
	}
	m, err := openai.New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return m
}

func noRetries(c *openai.Config) { c.MaxRetries = -1 }

func userTurn(text string) *llm.Request {
	return &llm.Request{Model: "gpt-test", Messages: []llm.Message{{Role: llm.User, Text: text}}}
}

// jsonValue decodes raw for a comparison that ignores formatting and key order.
func jsonValue(t *testing.T, raw []byte) any {
	t.Helper()
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatalf("not JSON: %v: %s", err, raw)
	}
	return v
}

func wantClass(t *testing.T, err error, class agentrunner.ErrorClass) {
	t.Helper()
	if err == nil {
		t.Fatalf("no error, want class %s", class)
	}
	if got := agentrunner.ClassOf(err); got != class {
		t.Fatalf("class %s, want %s; error: %v", got, class, err)
	}
}

func TestGenerateText(t *testing.T) {
	srv := fake.NewOpenAI(t, testKey, fake.OpenAIReply{Text: "Hello.", Usage: llm.Usage{InputTokens: 120, OutputTokens: 7, CachedTokens: 64}})
	m := newModel(t, srv)
	req := userTurn("Say hello.")
	req.System = "You are terse."
	resp, err := m.Generate(context.Background(), req)
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.Response{Text: "Hello.", StopReason: llm.StopEnd, Usage: llm.Usage{InputTokens: 120, OutputTokens: 7, CachedTokens: 64}}
	if d := cmp.Diff(want, resp); d != "" {
		t.Errorf("response (-want +got):\n%s", d)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	got := reqs[0]
	if got.Header.Get("Authorization") != "Bearer "+testKey {
		t.Errorf("Authorization = %q, want the key as Bearer", got.Header.Get("Authorization"))
	}
	wantMsgs := []fake.OpenAIMessage{{Role: "system", Content: "You are terse."}, {Role: "user", Content: "Say hello."}}
	if d := cmp.Diff(wantMsgs, got.Messages); d != "" {
		t.Errorf("messages (-want +got):\n%s", d)
	}
	if got.Model != "gpt-test" || got.Tools != nil || got.ResponseFormat != nil || got.MaxTokens != nil || got.MaxCompletionTokens != nil || got.Temperature != nil || got.Stream {
		t.Errorf("unexpected parameters in %s", got.Body)
	}
}

func TestGenerateToolRoundTrip(t *testing.T) {
	params := json.RawMessage(`{"type":"object","properties":{"url":{"type":"string","maxLength":2048}},"required":["url"]}`)
	srv := fake.NewOpenAI(t, testKey,
		fake.OpenAIReply{
			ToolCalls: []llm.ToolCall{
				{Name: "web_fetch", Arguments: json.RawMessage(`{"url":"https://example.com"}`)},
				{Name: "read_file", Arguments: json.RawMessage(`{"path": "plan.md"`)}, // invalid JSON, kept raw
			},
			Usage: llm.Usage{InputTokens: 50, OutputTokens: 20},
		},
		fake.OpenAIReply{Text: "# Report\nDone."},
	)
	m := newModel(t, srv)
	tools := []llm.ToolSpec{
		{Name: "web_fetch", Description: "Fetch a page.", Parameters: params},
		{Name: "read_file", Description: "Read a file."},
	}
	msgs := []llm.Message{{Role: llm.User, Text: "Research."}}
	first, err := m.Generate(context.Background(), &llm.Request{Model: "gpt-test", Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	wantFirst := &llm.Response{
		ToolCalls: []llm.ToolCall{
			{ID: "call_fake000100", Name: "web_fetch", Arguments: json.RawMessage(`{"url":"https://example.com"}`)},
			{ID: "call_fake000101", Name: "read_file", Arguments: json.RawMessage(`{"path": "plan.md"`)},
		},
		StopReason: llm.StopToolUse,
		Usage:      llm.Usage{InputTokens: 50, OutputTokens: 20},
	}
	if d := cmp.Diff(wantFirst, first); d != "" {
		t.Fatalf("first turn (-want +got):\n%s", d)
	}

	msgs = append(msgs,
		llm.Message{Role: llm.Assistant, ToolCalls: first.ToolCalls},
		llm.Message{Role: llm.User, ToolResults: []llm.ToolResult{
			{CallID: first.ToolCalls[0].ID, Content: `{"isError":false,"message":"<html>page</html>"}`},
			{CallID: first.ToolCalls[1].ID, Content: `{"isError":true,"message":"arguments are not valid JSON"}`, IsError: true},
		}},
	)
	second, err := m.Generate(context.Background(), &llm.Request{Model: "gpt-test", Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if second.Text != "# Report\nDone." || second.StopReason != llm.StopEnd {
		t.Errorf("second turn = %+v", second)
	}

	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	wantMsgs := []fake.OpenAIMessage{
		{Role: "user", Content: "Research."},
		{Role: "assistant", ContentNull: true, ToolCalls: wantFirst.ToolCalls},
		{Role: "tool", ToolCallID: "call_fake000100", Content: `{"isError":false,"message":"<html>page</html>"}`},
		{Role: "tool", ToolCallID: "call_fake000101", Content: `{"isError":true,"message":"arguments are not valid JSON"}`},
	}
	if d := cmp.Diff(wantMsgs, reqs[1].Messages); d != "" {
		t.Errorf("second request messages (-want +got):\n%s", d)
	}
	for i, r := range reqs {
		if len(r.Tools) != 2 {
			t.Fatalf("request %d offers %d tools, want 2", i, len(r.Tools))
		}
		if r.Tools[0].Name != "web_fetch" || r.Tools[0].Description != "Fetch a page." || r.Tools[1].Name != "read_file" {
			t.Errorf("request %d tools = %+v", i, r.Tools)
		}
		if d := cmp.Diff(jsonValue(t, params), jsonValue(t, r.Tools[0].Parameters)); d != "" {
			t.Errorf("request %d web_fetch parameters (-want +got):\n%s", i, d)
		}
		if r.Tools[1].Parameters != nil {
			t.Errorf("request %d read_file parameters = %s, want none", i, r.Tools[1].Parameters)
		}
	}
}

func TestGenerateSendsOptions(t *testing.T) {
	schema := json.RawMessage(`{"$schema":"https://json-schema.org/draft/2020-12/schema","type":"object","properties":{"size":{"type":"number","maximum":0.1234567890123456789}}}`)
	zero, warm := 0.0, 0.7
	tests := []struct {
		name       string
		req        llm.Request
		wantFormat *fake.OpenAIResponseFormat
		wantMax    *int
		wantTemp   *float64
	}{
		{
			name:       "schema, temperature, max tokens",
			req:        llm.Request{JSONSchema: schema, SchemaName: "strategy", Temperature: &warm, MaxTokens: 500},
			wantFormat: &fake.OpenAIResponseFormat{Type: "json_schema", Name: "strategy", Schema: schema, Strict: new(bool)},
			wantMax:    func() *int { n := 500; return &n }(),
			wantTemp:   &warm,
		},
		{
			name:     "zero temperature is sent",
			req:      llm.Request{Temperature: &zero},
			wantTemp: &zero,
		},
		{
			name:       "schema name made valid",
			req:        llm.Request{JSONSchema: schema, SchemaName: "my strategy.v2"},
			wantFormat: &fake.OpenAIResponseFormat{Type: "json_schema", Name: "my_strategy_v2", Schema: schema, Strict: new(bool)},
		},
		{
			name:       "schema without name",
			req:        llm.Request{JSONSchema: schema},
			wantFormat: &fake.OpenAIResponseFormat{Type: "json_schema", Name: "output", Schema: schema, Strict: new(bool)},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fake.NewOpenAI(t, testKey, fake.OpenAIReply{Text: "{}"})
			req := tt.req
			req.Model, req.Messages = "gpt-test", []llm.Message{{Role: llm.User, Text: "go"}}
			if _, err := newModel(t, srv).Generate(context.Background(), &req); err != nil {
				t.Fatal(err)
			}
			got := srv.Requests()[0]
			// The schema must arrive unchanged, digits and all.
			if tt.wantFormat != nil && got.ResponseFormat != nil && string(got.ResponseFormat.Schema) != string(tt.wantFormat.Schema) {
				t.Errorf("schema sent as %s, want %s", got.ResponseFormat.Schema, tt.wantFormat.Schema)
			}
			if d := cmp.Diff(tt.wantFormat, got.ResponseFormat); d != "" {
				t.Errorf("response_format (-want +got):\n%s", d)
			}
			if d := cmp.Diff(tt.wantMax, got.MaxTokens); d != "" {
				t.Errorf("max_tokens (-want +got):\n%s", d)
			}
			if got.MaxCompletionTokens != nil {
				t.Errorf("max_completion_tokens sent: %s", got.Body)
			}
			if d := cmp.Diff(tt.wantTemp, got.Temperature); d != "" {
				t.Errorf("temperature (-want +got):\n%s", d)
			}
		})
	}
}

func TestGenerateDecodesServerVariants(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want *llm.Response
	}{
		{
			name: "length",
			raw:  `{"choices":[{"index":0,"message":{"role":"assistant","content":"cut"},"finish_reason":"length"}],"usage":{"prompt_tokens":3,"completion_tokens":4}}`,
			want: &llm.Response{Text: "cut", StopReason: llm.StopMaxTokens, Usage: llm.Usage{InputTokens: 3, OutputTokens: 4}},
		},
		{
			name: "tool calls with finish reason stop",
			raw:  `{"choices":[{"message":{"role":"assistant","content":"","tool_calls":[{"id":"call_a","type":"function","function":{"name":"f","arguments":"{}"}}]},"finish_reason":"stop"}]}`,
			want: &llm.Response{ToolCalls: []llm.ToolCall{{ID: "call_a", Name: "f", Arguments: json.RawMessage(`{}`)}}, StopReason: llm.StopToolUse},
		},
		{
			name: "arguments as an object, no id, no type",
			raw:  `{"choices":[{"message":{"tool_calls":[{"function":{"name":"f","arguments":{"a":1}}},{"function":{"name":"g"}}]},"finish_reason":"tool_calls"}]}`,
			want: &llm.Response{ToolCalls: []llm.ToolCall{
				{ID: "call_0", Name: "f", Arguments: json.RawMessage(`{"a":1}`)},
				{ID: "call_1", Name: "g", Arguments: json.RawMessage{}},
			}, StopReason: llm.StopToolUse},
		},
		{
			name: "content parts",
			raw:  `{"choices":[{"message":{"content":[{"type":"text","text":"a"},{"type":"image_url"},{"type":"text","text":"b"}]},"finish_reason":"stop"}]}`,
			want: &llm.Response{Text: "ab", StopReason: llm.StopEnd},
		},
		{
			name: "refusal",
			raw:  `{"choices":[{"message":{"content":null,"refusal":"I can't help with that."},"finish_reason":"stop"}]}`,
			want: &llm.Response{Text: "I can't help with that.", StopReason: llm.StopEnd},
		},
		{
			name: "content filter, null finish reason and usage",
			raw:  `{"choices":[{"message":{"content":"x"},"finish_reason":null}],"usage":null}`,
			want: &llm.Response{Text: "x", StopReason: llm.StopEnd},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fake.NewOpenAI(t, "", fake.OpenAIReply{Raw: tt.raw})
			got, err := newModel(t, srv).Generate(context.Background(), userTurn("go"))
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tt.want, got); d != "" {
				t.Errorf("(-want +got):\n%s", d)
			}
		})
	}
}

func TestBaseURLFromEnvironment(t *testing.T) {
	srv := fake.NewOpenAI(t, testKey, fake.OpenAIReply{Text: "via env"})
	t.Setenv(openai.BaseURLEnv, srv.URL())
	m, err := openai.New(openai.Config{APIKey: testKey})
	if err != nil {
		t.Fatal(err)
	}
	resp, err := m.Generate(context.Background(), userTurn("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "via env" || len(srv.Requests()) != 1 {
		t.Errorf("got %+v after %d requests", resp, len(srv.Requests()))
	}

	// An explicit base URL wins over the environment.
	other := fake.NewOpenAI(t, testKey, fake.OpenAIReply{Text: "explicit"})
	resp, err = newModel(t, other).Generate(context.Background(), userTurn("hi"))
	if err != nil || resp.Text != "explicit" {
		t.Fatalf("explicit base URL: %+v, %v", resp, err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("the environment's server got %d requests, want 1", n)
	}

	t.Setenv(openai.BaseURLEnv, "ftp://example.com")
	_, err = openai.New(openai.Config{})
	wantClass(t, err, agentrunner.ClassConfig)
	if !strings.Contains(err.Error(), openai.BaseURLEnv) {
		t.Errorf("error %q does not name %s", err, openai.BaseURLEnv)
	}
}

func TestEnvironmentKeyIsNotSent(t *testing.T) {
	t.Setenv("OPENAI_API_KEY", "sk-from-the-environment")
	t.Setenv("OPENAI_ORG_ID", "org-ambient")
	srv := fake.NewOpenAI(t, "", fake.OpenAIReply{Text: "local"})
	m, err := openai.New(openai.Config{BaseURL: srv.URL()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), userTurn("hi")); err != nil {
		t.Fatal(err)
	}
	h := srv.Requests()[0].Header
	if h.Get("Authorization") != "" || h.Get("OpenAI-Organization") != "" {
		t.Errorf("ambient credentials sent to a server without a configured key: %v", h)
	}
}

func TestWrongKeyIsConfigAndNotLeaked(t *testing.T) {
	// Not shaped like an OpenAI key: only exact redaction can hide it.
	const wrong = "wrong-key-9876543210fedcba"
	srv := fake.NewOpenAI(t, testKey)
	m := newModel(t, srv, func(c *openai.Config) { c.APIKey = wrong })
	_, err := m.Generate(context.Background(), userTurn("hi"))
	wantClass(t, err, agentrunner.ClassConfig)
	msg := err.Error()
	if strings.Contains(msg, wrong) || strings.Contains(msg, "9876543210") {
		t.Errorf("the error quotes the key: %s", msg)
	}
	for _, want := range []string{"API key was rejected", "HTTP 401", "Incorrect API key provided"} {
		if !strings.Contains(msg, want) {
			t.Errorf("error %q lacks %q", msg, want)
		}
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1: a rejected key is not retried", n)
	}

	// Without a key, the error says that none is configured.
	_, err = newModel(t, srv, func(c *openai.Config) { c.APIKey = "" }).Generate(context.Background(), userTurn("hi"))
	wantClass(t, err, agentrunner.ClassConfig)
	if !strings.Contains(err.Error(), "none is configured") {
		t.Errorf("error %q does not say that no key is configured", err)
	}
}

func TestHTTPErrorClasses(t *testing.T) {
	tests := []struct {
		name  string
		reply fake.OpenAIReply
		class agentrunner.ErrorClass
		want  []string
	}{
		{"400", fake.OpenAIReply{Status: 400, ErrorBody: `{"error":{"message":"This model's maximum context length is 8192 tokens.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`},
			agentrunner.ClassInvalidOutput, []string{"HTTP 400", "maximum context length", "context_length_exceeded"}},
		{"422", fake.OpenAIReply{Status: 422, ErrorBody: `{"detail":[{"loc":["body","messages"],"msg":"field required"}]}`},
			agentrunner.ClassInvalidOutput, []string{"HTTP 422", "field required"}},
		{"404 model", fake.OpenAIReply{Status: 404}, agentrunner.ClassConfig, []string{"HTTP 404", `model "gpt-test" or the endpoint does not exist`, "model_not_found"}},
		{"404 error string", fake.OpenAIReply{Status: 404, ErrorBody: `{"error":"model \"llama9\" not found, try pulling it first"}`},
			agentrunner.ClassConfig, []string{"HTTP 404", `model "llama9" not found`}},
		{"403", fake.OpenAIReply{Status: 403, ErrorBody: `{"error":{"message":"Project does not have access to model"}}`},
			agentrunner.ClassConfig, []string{"HTTP 403", "rejected", "does not have access"}},
		{"402", fake.OpenAIReply{Status: 402, ErrorBody: `{"error":{"message":"Insufficient credits"}}`}, agentrunner.ClassConfig, []string{"HTTP 402", "Insufficient credits"}},
		{"429", fake.OpenAIReply{Status: 429, RetryAfter: "20"}, agentrunner.ClassUnavailable, []string{"HTTP 429", "Rate limit"}},
		{"500", fake.OpenAIReply{Status: 500}, agentrunner.ClassUnavailable, []string{"HTTP 500", "had an error"}},
		{"502 html", fake.OpenAIReply{Status: 502, ErrorBody: "<html><body><h1>502 Bad Gateway</h1>\n\n</body></html>"},
			agentrunner.ClassUnavailable, []string{"HTTP 502", "<h1>502 Bad Gateway</h1> </body>"}},
		{"400 long message truncated", fake.OpenAIReply{Status: 400, ErrorBody: `{"error":{"message":"` + strings.Repeat("x", 5000) + `"}}`},
			agentrunner.ClassInvalidOutput, []string{"HTTP 400", strings.Repeat("x", 400) + "…"}},
		{"400 echoing the key", fake.OpenAIReply{Status: 400, ErrorBody: `{"error":{"message":"bad header Bearer ` + testKey + ` and ` + testKey + `"}}`},
			agentrunner.ClassInvalidOutput, []string{"HTTP 400", "bad header [redacted] and [redacted]"}},
		{"401 echoing a masked key", fake.OpenAIReply{Status: 401, ErrorBody: `{"error":{"message":"Incorrect API key provided: sk-proj-abc*********wxyz. You can find your API key at https://platform.openai.com/account/api-keys."}}`},
			agentrunner.ClassConfig, []string{"HTTP 401", "Incorrect API key provided: [redacted] You can find"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fake.NewOpenAI(t, testKey, tt.reply)
			_, err := newModel(t, srv, noRetries).Generate(context.Background(), userTurn("hi"))
			wantClass(t, err, tt.class)
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("error %q lacks %q", err, w)
				}
			}
			if strings.Contains(err.Error(), testKey) {
				t.Errorf("the error quotes the key: %s", err)
			}
			if len(err.Error()) > 1000 {
				t.Errorf("error of %d bytes is not truncated", len(err.Error()))
			}
		})
	}
}

func TestRateLimitIsRetried(t *testing.T) {
	srv := fake.NewOpenAI(t, testKey,
		// Retry-After-Ms takes precedence in the SDK and keeps the test fast.
		fake.OpenAIReply{Status: 429, RetryAfter: "1", Header: http.Header{"Retry-After-Ms": {"10"}}},
		fake.OpenAIReply{Text: "after the limit"},
	)
	resp, err := newModel(t, srv).Generate(context.Background(), userTurn("hi"))
	if err != nil {
		t.Fatal(err)
	}
	if resp.Text != "after the limit" {
		t.Errorf("text = %q", resp.Text)
	}
	reqs := srv.Requests()
	if len(reqs) != 2 {
		t.Fatalf("%d requests, want 2", len(reqs))
	}
	if got := reqs[1].Header.Get("X-Stainless-Retry-Count"); got != "1" {
		t.Errorf("second request's retry count = %q, want 1", got)
	}
	if string(reqs[0].Body) != string(reqs[1].Body) {
		t.Errorf("the retry sent another body:\n%s\n%s", reqs[0].Body, reqs[1].Body)
	}
}

func TestServerErrorsExhaustRetries(t *testing.T) {
	fail := fake.OpenAIReply{Status: 503, ErrorBody: `{"error":{"message":"The engine is currently overloaded"}}`, Header: http.Header{"Retry-After-Ms": {"1"}}}
	srv := fake.NewOpenAI(t, testKey, fail, fail, fail, fake.OpenAIReply{Text: "too late"})
	_, err := newModel(t, srv, func(c *openai.Config) { c.MaxRetries = 2 }).Generate(context.Background(), userTurn("hi"))
	wantClass(t, err, agentrunner.ClassUnavailable)
	if !strings.Contains(err.Error(), "HTTP 503") || !strings.Contains(err.Error(), "overloaded") {
		t.Errorf("error %q lacks the status or the message", err)
	}
	if n := len(srv.Requests()); n != 3 {
		t.Errorf("%d requests, want 3 (1 + MaxRetries 2)", n)
	}
}

func TestMalformedResponses(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want string
	}{
		{"truncated", `{"id":"chatcmpl-1","choices":[{"message":{"content":"par`, "truncated JSON"},
		{"not JSON", `<html>oops</html>`, "not JSON"},
		{"no choices", `{"id":"chatcmpl-1","object":"chat.completion","choices":[]}`, "no choices"},
		{"choices missing", `{"id":"chatcmpl-1","object":"chat.completion"}`, "no choices"},
		{"error with 200", `{"error":{"message":"upstream provider overloaded","code":502}}`, "upstream provider overloaded"},
		{"choices of wrong type", `{"choices":"none"}`, "choices is a JSON string"},
		{"no message", `{"choices":[{"finish_reason":"stop"}]}`, "choices[0] has no message"},
		{"content of wrong type", `{"choices":[{"message":{"content":42}}]}`, "choices[0].message.content"},
		{"tool call without name", `{"choices":[{"message":{"tool_calls":[{"id":"call_1","type":"function","function":{"arguments":"{}"}}]}}]}`, "tool_calls[0]: no function name"},
		{"custom tool call", `{"choices":[{"message":{"tool_calls":[{"id":"call_1","type":"custom","custom":{"name":"x"}}]}}]}`, `type "custom"`},
		{"arguments of wrong type", `{"choices":[{"message":{"tool_calls":[{"id":"c","function":{"name":"f","arguments":[1]}}]}}]}`, "arguments: neither"},
		{"negative usage", `{"choices":[{"message":{"content":"x"}}],"usage":{"prompt_tokens":-1}}`, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fake.NewOpenAI(t, testKey, fake.OpenAIReply{Raw: tt.raw})
			_, err := newModel(t, srv).Generate(context.Background(), userTurn("hi"))
			wantClass(t, err, agentrunner.ClassUnavailable)
			if !strings.Contains(err.Error(), "malformed response") || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q lacks \"malformed response\" or %q", err, tt.want)
			}
		})
	}
}

func TestCancelledContextIsNotRetried(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	srv := fake.NewOpenAI(t, testKey, fake.OpenAIReply{Respond: func(fake.OpenAIRequest) fake.OpenAIReply {
		cancel() // the runner shuts down while the request is in flight
		return fake.OpenAIReply{Status: 500}
	}}, fake.OpenAIReply{Text: "must not be reached"})
	_, err := newModel(t, srv).Generate(ctx, userTurn("hi"))
	wantClass(t, err, agentrunner.ClassInterrupted)
	if !errors.Is(err, context.Canceled) {
		t.Errorf("error %v does not wrap context.Canceled", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}

	// A context that has already ended sends nothing.
	_, err = newModel(t, srv).Generate(ctx, userTurn("hi"))
	wantClass(t, err, agentrunner.ClassInterrupted)
	past, cancelPast := context.WithDeadline(context.Background(), time.Unix(0, 0))
	defer cancelPast()
	_, err = newModel(t, srv).Generate(past, userTurn("hi"))
	wantClass(t, err, agentrunner.ClassTimeout)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("error %v does not wrap context.DeadlineExceeded", err)
	}
	shutdown := errors.New("runner shutting down")
	caused, cancelCause := context.WithCancelCause(context.Background())
	cancelCause(shutdown)
	_, err = newModel(t, srv).Generate(caused, userTurn("hi"))
	wantClass(t, err, agentrunner.ClassInterrupted)
	if !errors.Is(err, context.Canceled) || !errors.Is(err, shutdown) {
		t.Errorf("error %v does not wrap both context.Canceled and the cause", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests after ended contexts, want still 1", n)
	}
}

func TestRequestTimeout(t *testing.T) {
	// A real, short timeout is what is under test here.
	srv := fake.NewOpenAI(t, testKey, fake.OpenAIReply{Text: "late", Delay: time.Minute})
	m := newModel(t, srv, func(c *openai.Config) { c.RequestTimeout = 100 * time.Millisecond })
	_, err := m.Generate(context.Background(), userTurn("hi"))
	wantClass(t, err, agentrunner.ClassUnavailable)
	if !strings.Contains(err.Error(), "no response within the request timeout") {
		t.Errorf("error %q does not say it timed out", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1", n)
	}
}

func TestConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	m, err := openai.New(openai.Config{BaseURL: "http://" + addr + "/v1", APIKey: testKey, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Generate(context.Background(), userTurn("hi"))
	wantClass(t, err, agentrunner.ClassUnavailable)
	if !strings.Contains(err.Error(), "request failed") || strings.Contains(err.Error(), testKey) {
		t.Errorf("error = %q", err)
	}
}

func TestRecordingRedactsTheKey(t *testing.T) {
	srv := fake.NewOpenAI(t, testKey, fake.OpenAIReply{Text: "recorded answer"})
	dir := t.TempDir()
	ctx := llm.WithRecording(context.Background(), llm.NewRecording(dir, testKey))
	if _, err := newModel(t, srv).Generate(ctx, userTurn("recorded question")); err != nil {
		t.Fatal(err)
	}
	req, err := os.ReadFile(filepath.Join(dir, "001-request.json"))
	if err != nil {
		t.Fatal(err)
	}
	resp, err := os.ReadFile(filepath.Join(dir, "001-response.json"))
	if err != nil {
		t.Fatal(err)
	}
	for name, data := range map[string][]byte{"request": req, "response": resp} {
		if strings.Contains(string(data), testKey) {
			t.Errorf("the recorded %s contains the key:\n%s", name, data)
		}
	}
	var rec struct {
		Method  string              `json:"method"`
		URL     string              `json:"url"`
		Headers map[string][]string `json:"headers"`
		Body    json.RawMessage     `json:"body"`
	}
	if err := json.Unmarshal(req, &rec); err != nil {
		t.Fatal(err)
	}
	if d := cmp.Diff([]string{"[redacted]"}, rec.Headers["Authorization"]); d != "" {
		t.Errorf("Authorization header (-want +got):\n%s", d)
	}
	if rec.Method != "POST" || rec.URL != srv.URL()+"/chat/completions" || !strings.Contains(string(rec.Body), "recorded question") {
		t.Errorf("recorded request = %s", req)
	}
	if !strings.Contains(string(resp), "recorded answer") {
		t.Errorf("recorded response = %s", resp)
	}
}

func TestInvalidRequestsAreNotSent(t *testing.T) {
	nan := math.NaN()
	user := []llm.Message{{Role: llm.User, Text: "hi"}}
	tests := []struct {
		name  string
		req   *llm.Request
		class agentrunner.ErrorClass
		want  string
	}{
		{"nil", nil, agentrunner.ClassInternal, "nil request"},
		{"no model", &llm.Request{Messages: user}, agentrunner.ClassConfig, "no model"},
		{"no messages", &llm.Request{Model: "m"}, agentrunner.ClassInternal, "no messages"},
		{"negative max tokens", &llm.Request{Model: "m", Messages: user, MaxTokens: -1}, agentrunner.ClassConfig, "max_tokens -1"},
		{"NaN temperature", &llm.Request{Model: "m", Messages: user, Temperature: &nan}, agentrunner.ClassConfig, "temperature"},
		{"bad tool name", &llm.Request{Model: "m", Messages: user, Tools: []llm.ToolSpec{{Name: "web.fetch"}}}, agentrunner.ClassConfig, `tools[0]: name "web.fetch"`},
		{"duplicate tool", &llm.Request{Model: "m", Messages: user, Tools: []llm.ToolSpec{{Name: "a"}, {Name: "a"}}}, agentrunner.ClassConfig, "offered twice"},
		{"parameters not an object", &llm.Request{Model: "m", Messages: user, Tools: []llm.ToolSpec{{Name: "a", Parameters: json.RawMessage(`[1]`)}}}, agentrunner.ClassConfig, `tool "a": parameters: not a JSON object`},
		{"parameters with trailing data", &llm.Request{Model: "m", Messages: user, Tools: []llm.ToolSpec{{Name: "a", Parameters: json.RawMessage(`{} {}`)}}}, agentrunner.ClassConfig, "not a single JSON object"},
		{"schema null", &llm.Request{Model: "m", Messages: user, JSONSchema: json.RawMessage(`null`)}, agentrunner.ClassConfig, "JSON schema of the answer"},
		{"empty user message", &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.User}}}, agentrunner.ClassInternal, "messages[0]: empty user message"},
		{"result without id", &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.User, ToolResults: []llm.ToolResult{{Content: "x"}}}}}, agentrunner.ClassInternal, "tool_results[0]: no call id"},
		{"call without id", &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.Assistant, ToolCalls: []llm.ToolCall{{Name: "f"}}}}}, agentrunner.ClassInternal, "tool_calls[0]: missing id"},
		{"user with calls", &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.User, Text: "x", ToolCalls: []llm.ToolCall{{ID: "1", Name: "f"}}}}}, agentrunner.ClassInternal, "user message has tool calls"},
		{"assistant with results", &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.Assistant, ToolResults: []llm.ToolResult{{CallID: "1"}}}}}, agentrunner.ClassInternal, "assistant message has tool results"},
		{"unknown role", &llm.Request{Model: "m", Messages: []llm.Message{{Role: "system", Text: "x"}}}, agentrunner.ClassInternal, `unknown role "system"`},
	}
	srv := fake.NewOpenAI(t, testKey)
	m := newModel(t, srv)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := m.Generate(context.Background(), tt.req)
			wantClass(t, err, tt.class)
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q lacks %q", err, tt.want)
			}
		})
	}
	if n := len(srv.Requests()); n != 0 {
		t.Errorf("%d invalid requests were sent", n)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	t.Setenv(openai.BaseURLEnv, "")
	tests := []struct {
		name string
		cfg  openai.Config
		want string
	}{
		{"scheme", openai.Config{BaseURL: "ftp://example.com/v1"}, "scheme must be http or https"},
		{"no host", openai.Config{BaseURL: "http:///v1"}, "no host"},
		{"relative", openai.Config{BaseURL: "localhost:11434/v1"}, "base URL from base_url"},
		{"query", openai.Config{BaseURL: "https://example.com/v1?key=abc"}, "https://example.com/v1?key=REDACTED: a base URL takes no query"},
		{"credentials and fragment", openai.Config{BaseURL: "https://user:abc@example.com/v1#abc"}, "https://example.com/v1: credentials do not belong"},
		{"credentials", openai.Config{BaseURL: "https://user:abc@example.com/v1"}, "credentials do not belong in the base URL"},
		{"negative timeout", openai.Config{RequestTimeout: -time.Second}, "request timeout -1s is negative"},
		{"key with newline", openai.Config{APIKey: testKey + "\n"}, "line break"},
		{"key with space", openai.Config{APIKey: "Bearer " + testKey}, "at byte 6"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := openai.New(tt.cfg)
			wantClass(t, err, agentrunner.ClassConfig)
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q lacks %q", err, tt.want)
			}
			if strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), "abc") {
				t.Errorf("error quotes a secret: %s", err)
			}
		})
	}
	// Credentials in the URL never reach an error.
	_, err := openai.New(openai.Config{BaseURL: "ftp://user:hunter2@example.com/v1"})
	wantClass(t, err, agentrunner.ClassConfig)
	if strings.Contains(err.Error(), "hunter2") {
		t.Errorf("error quotes the URL's password: %s", err)
	}
}

func TestConcurrentGenerate(t *testing.T) {
	const n = 16
	replies := make([]fake.OpenAIReply, n)
	for i := range replies {
		replies[i] = fake.OpenAIReply{Respond: func(req fake.OpenAIRequest) fake.OpenAIReply {
			return fake.OpenAIReply{Text: "echo " + req.Messages[len(req.Messages)-1].Content}
		}}
	}
	srv := fake.NewOpenAI(t, testKey, replies...)
	m := newModel(t, srv)
	var wg sync.WaitGroup
	errs := make(chan error, n)
	for i := range n {
		wg.Go(func() {
			q := fmt.Sprintf("question %d", i)
			resp, err := m.Generate(context.Background(), userTurn(q))
			switch {
			case err != nil:
				errs <- err
			case resp.Text != "echo "+q:
				errs <- fmt.Errorf("asked %q, got %q", q, resp.Text)
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	if got := len(srv.Requests()); got != n {
		t.Errorf("%d requests, want %d", got, n)
	}
}
