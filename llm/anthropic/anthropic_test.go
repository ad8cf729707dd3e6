package anthropic_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/llm"
	"github.com/agentrunner/agentrunner/llm/anthropic"
	"github.com/agentrunner/agentrunner/llm/fake"
)

const testKey = "sk-ant-test-0123456789abcdef"

func newModel(t *testing.T, srv *fake.AnthropicServer, edit ...func(*anthropic.Config)) *anthropic.Model {
	t.Helper()
	cfg := anthropic.Config{BaseURL: srv.URL(), APIKey: testKey}
	for _, e := range edit {
		e(&cfg)
	}
	m, err := anthropic.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// jsonEqual compares raw JSON by meaning, not by spacing.
var jsonEqual = cmp.Comparer(func(a, b json.RawMessage) bool {
	if len(a) == 0 || len(b) == 0 {
		return len(a) == len(b)
	}
	var x, y any
	if json.Unmarshal(a, &x) != nil || json.Unmarshal(b, &y) != nil {
		return bytes.Equal(a, b)
	}
	return cmp.Equal(x, y)
})

func userText(s string) llm.Message { return llm.Message{Role: llm.User, Text: s} }

func ptr[T any](v T) *T { return &v }

func TestTextAnswer(t *testing.T) {
	srv := fake.NewAnthropic(t, testKey, fake.AnthropicReply{Text: "Hello there.", Usage: llm.Usage{InputTokens: 12, OutputTokens: 3}})
	m := newModel(t, srv)
	got, err := m.Generate(context.Background(), &llm.Request{Model: "claude-test", Messages: []llm.Message{userText("Hi")}})
	if err != nil {
		t.Fatal(err)
	}
	want := &llm.Response{Text: "Hello there.", StopReason: llm.StopEnd, Usage: llm.Usage{InputTokens: 12, OutputTokens: 3}}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("response (-want +got):\n%s", diff)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests, want 1", len(reqs))
	}
	r := reqs[0]
	if r.Method != http.MethodPost || r.Path != "/v1/messages" {
		t.Errorf("sent %s %s, want POST /v1/messages", r.Method, r.Path)
	}
	if got := r.Header.Get("x-api-key"); got != testKey {
		t.Errorf("x-api-key = %q, want the configured key", got)
	}
	if r.Header.Get("anthropic-version") == "" {
		t.Error("no anthropic-version header")
	}
	wantMsgs := []fake.AnthropicMessage{{Role: "user", Content: []fake.AnthropicBlock{{Type: "text", Text: "Hi"}}}}
	if diff := cmp.Diff(wantMsgs, r.Messages, jsonEqual); diff != "" {
		t.Errorf("messages (-want +got):\n%s", diff)
	}
}

func TestRequestParameters(t *testing.T) {
	schema := json.RawMessage(`{
		"type": "object",
		"required": ["ok"],
		"properties": {"ok": {"type": "boolean"}}
	}`)
	compact := `{"type":"object","required":["ok"],"properties":{"ok":{"type":"boolean"}}}`
	instruction := "Answer with one JSON document matching this schema (verdict), and nothing else: no prose, no code fence.\n" + compact
	tests := []struct {
		name      string
		req       llm.Request
		wantSys   string
		wantMax   int
		wantTemp  *float64
		wantTools []fake.AnthropicTool
	}{
		{
			name:    "defaults",
			req:     llm.Request{Model: "claude-test"},
			wantMax: anthropic.DefaultMaxTokens,
		},
		{
			name:     "system, max_tokens and temperature",
			req:      llm.Request{Model: "claude-test", System: "You are the planner.", MaxTokens: 800, Temperature: ptr(0.2)},
			wantSys:  "You are the planner.",
			wantMax:  800,
			wantTemp: ptr(0.2),
		},
		{
			name:     "temperature zero is sent",
			req:      llm.Request{Model: "claude-test", Temperature: ptr(0.0)},
			wantMax:  anthropic.DefaultMaxTokens,
			wantTemp: ptr(0.0),
		},
		{
			name:    "schema appended to the system prompt",
			req:     llm.Request{Model: "claude-test", System: "You are the judge.", JSONSchema: schema, SchemaName: "verdict"},
			wantSys: "You are the judge.\n\n" + instruction,
			wantMax: anthropic.DefaultMaxTokens,
		},
		{
			name:    "schema without a system prompt",
			req:     llm.Request{Model: "claude-test", JSONSchema: schema, SchemaName: "verdict"},
			wantSys: instruction,
			wantMax: anthropic.DefaultMaxTokens,
		},
		{
			name: "tools",
			req: llm.Request{Model: "claude-test", Tools: []llm.ToolSpec{
				{Name: "web_fetch", Description: "Fetch a page.", Parameters: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string","format":"uri"}},"required":["url"],"additionalProperties":false}`)},
				{Name: "clock", Parameters: json.RawMessage(`{"properties":{}}`)},
				{Name: "ping"},
			}},
			wantMax: anthropic.DefaultMaxTokens,
			wantTools: []fake.AnthropicTool{
				{Name: "web_fetch", Description: "Fetch a page.", InputSchema: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string","format":"uri"}},"required":["url"],"additionalProperties":false}`)},
				{Name: "clock", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)},
				{Name: "ping", InputSchema: json.RawMessage(`{"type":"object","properties":{}}`)},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fake.NewAnthropic(t, testKey, fake.AnthropicReply{Text: "ok"})
			req := tt.req
			req.Messages = []llm.Message{userText("Go.")}
			if _, err := newModel(t, srv).Generate(context.Background(), &req); err != nil {
				t.Fatal(err)
			}
			r := srv.Requests()[0]
			if r.Model != "claude-test" {
				t.Errorf("model = %q", r.Model)
			}
			if r.System != tt.wantSys {
				t.Errorf("system = %q, want %q", r.System, tt.wantSys)
			}
			if r.MaxTokens != tt.wantMax {
				t.Errorf("max_tokens = %d, want %d", r.MaxTokens, tt.wantMax)
			}
			if diff := cmp.Diff(tt.wantTemp, r.Temperature); diff != "" {
				t.Errorf("temperature (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tt.wantTools, r.Tools, jsonEqual); diff != "" {
				t.Errorf("tools (-want +got):\n%s", diff)
			}
		})
	}
}

func TestToolUseRoundTrip(t *testing.T) {
	srv := fake.NewAnthropic(t, testKey,
		fake.AnthropicReply{
			Text: "Let me look.",
			ToolCalls: []llm.ToolCall{
				{ID: "toolu_01", Name: "web_fetch", Arguments: json.RawMessage(`{"url":"https://example.com"}`)},
				{ID: "toolu_02", Name: "read_file", Arguments: json.RawMessage(`{"path":"plan.md"}`)},
			},
			Usage: llm.Usage{InputTokens: 100, OutputTokens: 20},
		},
		fake.AnthropicReply{Text: "# Report", Usage: llm.Usage{InputTokens: 180, OutputTokens: 40}},
	)
	m := newModel(t, srv)
	tools := []llm.ToolSpec{
		{Name: "web_fetch", Parameters: json.RawMessage(`{"type":"object","properties":{"url":{"type":"string"}}}`)},
		{Name: "read_file", Parameters: json.RawMessage(`{"type":"object","properties":{"path":{"type":"string"}}}`)},
	}
	msgs := []llm.Message{userText("Research.")}
	first, err := m.Generate(context.Background(), &llm.Request{Model: "claude-test", Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	wantFirst := &llm.Response{
		Text: "Let me look.",
		ToolCalls: []llm.ToolCall{
			{ID: "toolu_01", Name: "web_fetch", Arguments: json.RawMessage(`{"url":"https://example.com"}`)},
			{ID: "toolu_02", Name: "read_file", Arguments: json.RawMessage(`{"path":"plan.md"}`)},
		},
		StopReason: llm.StopToolUse,
		Usage:      llm.Usage{InputTokens: 100, OutputTokens: 20},
	}
	if diff := cmp.Diff(wantFirst, first, jsonEqual); diff != "" {
		t.Fatalf("first turn (-want +got):\n%s", diff)
	}

	msgs = append(msgs,
		llm.Message{Role: llm.Assistant, Text: first.Text, ToolCalls: first.ToolCalls},
		llm.Message{Role: llm.User, ToolResults: []llm.ToolResult{
			{CallID: "toolu_01", Content: `{"isError":false,"message":"<html>…"}`},
			{CallID: "toolu_02", Content: `{"isError":true,"message":"no such file"}`, IsError: true},
		}},
	)
	second, err := m.Generate(context.Background(), &llm.Request{Model: "claude-test", Messages: msgs, Tools: tools})
	if err != nil {
		t.Fatal(err)
	}
	if second.Text != "# Report" || second.StopReason != llm.StopEnd || len(second.ToolCalls) != 0 {
		t.Errorf("second turn = %+v", second)
	}
	want := []fake.AnthropicMessage{
		{Role: "user", Content: []fake.AnthropicBlock{{Type: "text", Text: "Research."}}},
		{Role: "assistant", Content: []fake.AnthropicBlock{
			{Type: "text", Text: "Let me look."},
			{Type: "tool_use", ID: "toolu_01", Name: "web_fetch", Input: json.RawMessage(`{"url":"https://example.com"}`)},
			{Type: "tool_use", ID: "toolu_02", Name: "read_file", Input: json.RawMessage(`{"path":"plan.md"}`)},
		}},
		{Role: "user", Content: []fake.AnthropicBlock{
			{Type: "tool_result", ToolUseID: "toolu_01", Content: `{"isError":false,"message":"<html>…"}`},
			{Type: "tool_result", ToolUseID: "toolu_02", Content: `{"isError":true,"message":"no such file"}`, IsError: true},
		}},
	}
	reqs := srv.Requests()
	if diff := cmp.Diff(want, reqs[1].Messages, jsonEqual); diff != "" {
		t.Errorf("second request's messages (-want +got):\n%s", diff)
	}
	if !strings.Contains(string(reqs[1].Body), `"is_error":true`) {
		t.Errorf("is_error not sent: %s", reqs[1].Body)
	}
}

func TestConversationMapping(t *testing.T) {
	call := func(id, args string) llm.ToolCall {
		return llm.ToolCall{ID: id, Name: "lookup", Arguments: json.RawMessage(args)}
	}
	text := func(s string) fake.AnthropicBlock { return fake.AnthropicBlock{Type: "text", Text: s} }
	use := func(id, input string) fake.AnthropicBlock {
		return fake.AnthropicBlock{Type: "tool_use", ID: id, Name: "lookup", Input: json.RawMessage(input)}
	}
	result := func(id, content string) fake.AnthropicBlock {
		return fake.AnthropicBlock{Type: "tool_result", ToolUseID: id, Content: content}
	}
	tests := []struct {
		name string
		msgs []llm.Message
		want []fake.AnthropicMessage
	}{
		{
			name: "tool results then a repair message become one user turn",
			msgs: []llm.Message{
				userText("Go."),
				{Role: llm.Assistant, ToolCalls: []llm.ToolCall{call("t1", `{"q":1}`)}},
				{Role: llm.User, ToolResults: []llm.ToolResult{{CallID: "t1", Content: "42"}}},
				userText("Your answer breaks the contract."),
			},
			want: []fake.AnthropicMessage{
				{Role: "user", Content: []fake.AnthropicBlock{text("Go.")}},
				{Role: "assistant", Content: []fake.AnthropicBlock{use("t1", `{"q":1}`)}},
				{Role: "user", Content: []fake.AnthropicBlock{result("t1", "42"), text("Your answer breaks the contract.")}},
			},
		},
		{
			name: "tool results move ahead of text merged before them",
			msgs: []llm.Message{
				userText("Go."),
				{Role: llm.Assistant, ToolCalls: []llm.ToolCall{call("t1", `{}`), call("t2", `{}`)}},
				{Role: llm.User, Text: "Results:", ToolResults: []llm.ToolResult{{CallID: "t1", Content: "a"}}},
				{Role: llm.User, ToolResults: []llm.ToolResult{{CallID: "t2", Content: "b"}}},
			},
			want: []fake.AnthropicMessage{
				{Role: "user", Content: []fake.AnthropicBlock{text("Go.")}},
				{Role: "assistant", Content: []fake.AnthropicBlock{use("t1", `{}`), use("t2", `{}`)}},
				{Role: "user", Content: []fake.AnthropicBlock{result("t1", "a"), result("t2", "b"), text("Results:")}},
			},
		},
		{
			name: "an empty answer is left out and the user turns around it merge",
			msgs: []llm.Message{
				userText("Go."),
				{Role: llm.Assistant, Text: "  "},
				userText("You gave no answer."),
			},
			want: []fake.AnthropicMessage{
				{Role: "user", Content: []fake.AnthropicBlock{text("Go."), text("You gave no answer.")}},
			},
		},
		{
			name: "arguments that are not a JSON object are sent as {}",
			msgs: []llm.Message{
				userText("Go."),
				{Role: llm.Assistant, Text: "Calling.", ToolCalls: []llm.ToolCall{call("t1", `{"q": "unterminated`), call("t2", `[1,2]`), call("t3", ``)}},
				{Role: llm.User, ToolResults: []llm.ToolResult{
					{CallID: "t1", Content: "invalid arguments", IsError: true},
					{CallID: "t2", Content: "invalid arguments", IsError: true},
					{CallID: "t3", Content: ""},
				}},
			},
			want: []fake.AnthropicMessage{
				{Role: "user", Content: []fake.AnthropicBlock{text("Go.")}},
				{Role: "assistant", Content: []fake.AnthropicBlock{text("Calling."), use("t1", `{}`), use("t2", `{}`), use("t3", `{}`)}},
				{Role: "user", Content: []fake.AnthropicBlock{
					{Type: "tool_result", ToolUseID: "t1", Content: "invalid arguments", IsError: true},
					{Type: "tool_result", ToolUseID: "t2", Content: "invalid arguments", IsError: true},
					result("t3", ""),
				}},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fake.NewAnthropic(t, testKey, fake.AnthropicReply{Text: "ok"})
			_, err := newModel(t, srv).Generate(context.Background(), &llm.Request{Model: "claude-test", Messages: tt.msgs})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, srv.Requests()[0].Messages, jsonEqual); diff != "" {
				t.Errorf("messages (-want +got):\n%s", diff)
			}
		})
	}
}

func TestResponseMapping(t *testing.T) {
	tests := []struct {
		name string
		raw  string
		want *llm.Response
	}{
		{
			name: "usage counts cache reads and writes as input",
			raw: `{"id":"msg_01","type":"message","role":"assistant","model":"claude-test",
				"content":[{"type":"text","text":"Hel"},{"type":"text","text":"lo"}],
				"stop_reason":"end_turn","stop_sequence":null,
				"usage":{"input_tokens":10,"cache_creation_input_tokens":5,"cache_read_input_tokens":30,"output_tokens":7}}`,
			want: &llm.Response{Text: "Hello", StopReason: llm.StopEnd, Usage: llm.Usage{InputTokens: 45, OutputTokens: 7, CachedTokens: 30}},
		},
		{
			name: "stop_sequence ends the turn",
			raw:  `{"id":"msg_01","type":"message","role":"assistant","content":[{"type":"text","text":"x"}],"stop_reason":"stop_sequence","usage":{"input_tokens":1,"output_tokens":1}}`,
			want: &llm.Response{Text: "x", StopReason: llm.StopEnd, Usage: llm.Usage{InputTokens: 1, OutputTokens: 1}},
		},
		{
			name: "max_tokens",
			raw:  `{"id":"msg_01","type":"message","role":"assistant","content":[{"type":"text","text":"# Rep"}],"stop_reason":"max_tokens","usage":{"input_tokens":1,"output_tokens":9}}`,
			want: &llm.Response{Text: "# Rep", StopReason: llm.StopMaxTokens, Usage: llm.Usage{InputTokens: 1, OutputTokens: 9}},
		},
		{
			name: "context window exceeded cuts like max_tokens",
			raw:  `{"id":"msg_01","type":"message","role":"assistant","content":[{"type":"text","text":"# Rep"}],"stop_reason":"model_context_window_exceeded","usage":{"input_tokens":1,"output_tokens":9}}`,
			want: &llm.Response{Text: "# Rep", StopReason: llm.StopMaxTokens, Usage: llm.Usage{InputTokens: 1, OutputTokens: 9}},
		},
		{
			name: "refusal is an answer for the runtime to judge",
			raw:  `{"id":"msg_01","type":"message","role":"assistant","content":[],"stop_reason":"refusal","usage":{"input_tokens":1,"output_tokens":0}}`,
			want: &llm.Response{StopReason: llm.StopEnd, Usage: llm.Usage{InputTokens: 1}},
		},
		{
			name: "empty content is an empty answer",
			raw:  `{"id":"msg_01","type":"message","role":"assistant","content":[],"stop_reason":"end_turn","usage":{"input_tokens":4,"output_tokens":1}}`,
			want: &llm.Response{StopReason: llm.StopEnd, Usage: llm.Usage{InputTokens: 4, OutputTokens: 1}},
		},
		{
			name: "thinking blocks are skipped, tool_use input kept verbatim",
			raw: `{"id":"msg_01","type":"message","role":"assistant","content":[
				{"type":"thinking","thinking":"hmm","signature":"sig"},
				{"type":"tool_use","id":"toolu_9","name":"clock","input":{"tz":"UTC","n":12345678901234567890}}],
				"stop_reason":"tool_use","usage":{"input_tokens":2,"output_tokens":3}}`,
			want: &llm.Response{
				ToolCalls:  []llm.ToolCall{{ID: "toolu_9", Name: "clock", Arguments: json.RawMessage(`{"tz":"UTC","n":12345678901234567890}`)}},
				StopReason: llm.StopToolUse,
				Usage:      llm.Usage{InputTokens: 2, OutputTokens: 3},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fake.NewAnthropic(t, testKey, fake.AnthropicReply{Raw: tt.raw})
			got, err := newModel(t, srv).Generate(context.Background(), &llm.Request{Model: "claude-test", Messages: []llm.Message{userText("Go.")}})
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("response (-want +got):\n%s", diff)
			}
		})
	}
}

func TestFakeUsageRoundTrips(t *testing.T) {
	usage := llm.Usage{InputTokens: 500, OutputTokens: 60, CachedTokens: 400}
	srv := fake.NewAnthropic(t, testKey, fake.AnthropicReply{Text: "ok", Usage: usage})
	got, err := newModel(t, srv).Generate(context.Background(), &llm.Request{Model: "claude-test", Messages: []llm.Message{userText("Go.")}})
	if err != nil {
		t.Fatal(err)
	}
	if got.Usage != usage {
		t.Errorf("usage = %+v, want %+v", got.Usage, usage)
	}
}

func TestBaseURLFromEnvironment(t *testing.T) {
	srv := fake.NewAnthropic(t, "", fake.AnthropicReply{Text: "ok"})
	t.Setenv(anthropic.BaseURLEnv, srv.URL())
	// The SDK's own credential lookup is off: a key in the environment
	// that the configuration did not name is not sent.
	t.Setenv("ANTHROPIC_API_KEY", "sk-ant-from-the-environment")
	m, err := anthropic.New(anthropic.Config{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := m.Generate(context.Background(), &llm.Request{Model: "claude-test", Messages: []llm.Message{userText("Go.")}}); err != nil {
		t.Fatal(err)
	}
	reqs := srv.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests at the base URL from %s, want 1", len(reqs), anthropic.BaseURLEnv)
	}
	if k := reqs[0].Header.Get("x-api-key"); k != "" {
		t.Errorf("x-api-key %q sent, want none", k)
	}
}

func TestWrongKey(t *testing.T) {
	srv := fake.NewAnthropic(t, "sk-ant-the-right-key-987654321")
	const wrong = "sk-ant-a-wrong-key-123456789"
	m := newModel(t, srv, func(c *anthropic.Config) { c.APIKey = wrong })
	_, err := m.Generate(context.Background(), &llm.Request{Model: "claude-test", Messages: []llm.Message{userText("Go.")}})
	if got := agentrunner.ClassOf(err); got != agentrunner.ClassConfig {
		t.Fatalf("class = %s (%v), want %s", got, err, agentrunner.ClassConfig)
	}
	for _, want := range []string{"401", "authentication_error", "invalid x-api-key"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("error %q does not say %q", err, want)
		}
	}
	if strings.Contains(err.Error(), wrong) || strings.Contains(err.Error(), "sk-ant-a-wrong") {
		t.Errorf("error %q contains the key", err)
	}
	if n := len(srv.Requests()); n != 1 {
		t.Errorf("%d requests, want 1: a rejected key is not retried", n)
	}
}

func TestKeyEchoedByProviderIsRedacted(t *testing.T) {
	srv := fake.NewAnthropic(t, "", fake.AnthropicReply{Status: 400, ErrorMessage: "bad header " + testKey + " in request"})
	_, err := newModel(t, srv).Generate(context.Background(), &llm.Request{Model: "claude-test", Messages: []llm.Message{userText("Go.")}})
	if err == nil || strings.Contains(err.Error(), testKey) {
		t.Fatalf("error %v: want one without the key", err)
	}
	if !strings.Contains(err.Error(), "[redacted]") {
		t.Errorf("error %q shows no redaction", err)
	}
}

func TestHTTPErrors(t *testing.T) {
	tests := []struct {
		status    int
		errType   string
		message   string
		wantClass agentrunner.ErrorClass
	}{
		{400, "invalid_request_error", "prompt is too long: 210000 tokens > 200000 maximum", agentrunner.ClassInvalidOutput},
		{401, "authentication_error", "invalid x-api-key", agentrunner.ClassConfig},
		{402, "billing_error", "your credit balance is too low", agentrunner.ClassConfig},
		{403, "permission_error", "your API key does not have permission", agentrunner.ClassConfig},
		{404, "not_found_error", "model: claude-nonexistent", agentrunner.ClassConfig},
		{413, "request_too_large", "request exceeds the maximum allowed number of bytes", agentrunner.ClassInvalidOutput},
		{422, "invalid_request_error", "unprocessable", agentrunner.ClassInvalidOutput},
		{429, "rate_limit_error", "number of request tokens has exceeded your per-minute rate limit", agentrunner.ClassUnavailable},
		{500, "api_error", "internal server error", agentrunner.ClassUnavailable},
		{503, "api_error", "service unavailable", agentrunner.ClassUnavailable},
		{529, "overloaded_error", "Overloaded", agentrunner.ClassUnavailable},
	}
	for _, tt := range tests {
		t.Run(strconv.Itoa(tt.status)+" "+tt.errType, func(t *testing.T) {
			srv := fake.NewAnthropic(t, testKey, fake.AnthropicReply{Status: tt.status, ErrorType: tt.errType, ErrorMessage: tt.message})
			m := newModel(t, srv, func(c *anthropic.Config) { c.MaxRetries = -1 })
			_, err := m.Generate(context.Background(), &llm.Request{Model: "claude-nonexistent", Messages: []llm.Message{userText("Go.")}})
			if got := agentrunner.ClassOf(err); got != tt.wantClass {
				t.Fatalf("class = %s (%v), want %s", got, err, tt.wantClass)
			}
			for _, want := range []string{tt.errType, tt.message, "req_fake"} {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error %q does not say %q", err, want)
				}
			}
			if !strings.Contains(err.Error(), "HTTP "+strconv.Itoa(tt.status)) {
				t.Errorf("error %q does not give the status %d", err, tt.status)
			}
		})
	}
}

func TestLongProviderMessageIsClipped(t *testing.T) {
	long := strings.Repeat("very long explanation ", 200)
	srv := fake.NewAnthropic(t, testKey, fake.AnthropicReply{Status: 400, ErrorMessage: long})
	_, err := newModel(t, srv).Generate(context.Background(), &llm.Request{Model: "claude-test", Messages: []llm.Message{userText("Go.")}})
	if err == nil {
		t.Fatal("want an error")
	}
	if n := len(err.Error()); n > 1000 {
		t.Errorf("error is %d bytes long, want it clipped", n)
	}
}

func TestRateLimitThenSuccess(t *testing.T) {
	tests := []struct {
		name  string
		reply fake.AnthropicReply
	}{
		{"retry-after", fake.AnthropicReply{Status: 429, RetryAfter: "0"}},
		{"retry-after-ms", fake.AnthropicReply{Status: 429, Header: http.Header{"Retry-After-Ms": {"1"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fake.NewAnthropic(t, testKey, tt.reply, fake.AnthropicReply{Text: "ok"})
			got, err := newModel(t, srv).Generate(context.Background(), &llm.Request{Model: "claude-test", Messages: []llm.Message{userText("Go.")}})
			if err != nil {
				t.Fatal(err)
			}
			if got.Text != "ok" {
				t.Errorf("text = %q", got.Text)
			}
			if n := len(srv.Requests()); n != 2 {
				t.Errorf("%d requests, want 2 (one retry)", n)
			}
		})
	}
}

func TestOverloadedRepeatedly(t *testing.T) {
	overloaded := fake.AnthropicReply{Status: 529, RetryAfter: "0"}
	srv := fake.NewAnthropic(t, testKey, overloaded, overloaded, overloaded, fake.AnthropicReply{Text: "too late"})
	_, err := newModel(t, srv).Generate(context.Background(), &llm.Request{Model: "claude-test", Messages: []llm.Message{userText("Go.")}})
	if got := agentrunner.ClassOf(err); got != agentrunner.ClassUnavailable {
		t.Fatalf("class = %s (%v), want %s", got, err, agentrunner.ClassUnavailable)
	}
	if !strings.Contains(err.Error(), "overloaded_error") || !strings.Contains(err.Error(), "529") {
		t.Errorf("error %q does not say it was overloaded", err)
	}
	if n := len(srv.Requests()); n != 1+anthropic.DefaultMaxRetries {
		t.Errorf("%d requests, want %d (the default retries)", n, 1+anthropic.DefaultMaxRetries)
	}
}

func TestMalformedResponses(t *testing.T) {
	tests := []struct {
		name   string
		reply  fake.AnthropicReply
		detail string
	}{
		{"not JSON", fake.AnthropicReply{Raw: "this is not json"}, "malformed response"},
		{"cut short", fake.AnthropicReply{Raw: `{"id":"msg_1","type":"message","content":[{"type":"text","te`}, "malformed response"},
		{"HTML page", fake.AnthropicReply{Raw: "<html>gateway</html>", Header: http.Header{"Content-Type": {"text/html"}}}, "malformed response"},
		{"empty object", fake.AnthropicReply{Raw: `{}`}, "no content"},
		{"content not a list", fake.AnthropicReply{Raw: `{"content":"hi","stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`}, "no content"},
		{"no usage", fake.AnthropicReply{Raw: `{"content":[{"type":"text","text":"hi"}],"stop_reason":"end_turn"}`}, "no usage"},
		{"no stop reason", fake.AnthropicReply{Raw: `{"content":[{"type":"text","text":"hi"}],"usage":{"input_tokens":1,"output_tokens":1}}`}, "no stop_reason"},
		{"tool_use stop without calls", fake.AnthropicReply{Raw: `{"content":[{"type":"text","text":"hi"}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}`}, "without a tool_use block"},
		{"tool_use without id", fake.AnthropicReply{Raw: `{"content":[{"type":"tool_use","name":"x","input":{}}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}`}, "without id"},
		{"tool_use without input", fake.AnthropicReply{Raw: `{"content":[{"type":"tool_use","id":"t","name":"x"}],"stop_reason":"tool_use","usage":{"input_tokens":1,"output_tokens":1}}`}, "no valid JSON input"},
		{"block without type", fake.AnthropicReply{Raw: `{"content":[{"text":"hi"}],"stop_reason":"end_turn","usage":{"input_tokens":1,"output_tokens":1}}`}, "no type"},
		{"negative usage", fake.AnthropicReply{Raw: `{"content":[],"stop_reason":"end_turn","usage":{"input_tokens":-1,"output_tokens":1}}`}, "negative"},
		{"error status with a body that is not JSON", fake.AnthropicReply{Status: 502, Raw: "<html>Bad Gateway</html>"}, "HTTP 502"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fake.NewAnthropic(t, testKey, tt.reply)
			m := newModel(t, srv, func(c *anthropic.Config) { c.MaxRetries = -1 })
			_, err := m.Generate(context.Background(), &llm.Request{Model: "claude-test", Messages: []llm.Message{userText("Go.")}})
			if got := agentrunner.ClassOf(err); got != agentrunner.ClassUnavailable {
				t.Fatalf("class = %s (%v), want %s", got, err, agentrunner.ClassUnavailable)
			}
			if !strings.Contains(err.Error(), tt.detail) {
				t.Errorf("error %q does not say %q", err, tt.detail)
			}
		})
	}
}

func TestContextEnds(t *testing.T) {
	t.Run("cancelled in flight", func(t *testing.T) {
		inFlight, release := make(chan struct{}), make(chan struct{})
		srv := fake.NewAnthropic(t, testKey, fake.AnthropicReply{Respond: func(fake.AnthropicRequest) fake.AnthropicReply {
			close(inFlight)
			<-release
			return fake.AnthropicReply{Text: "too late"}
		}})
		defer close(release)
		ctx, cancel := context.WithCancel(context.Background())
		go func() {
			<-inFlight
			cancel()
		}()
		_, err := newModel(t, srv).Generate(ctx, &llm.Request{Model: "claude-test", Messages: []llm.Message{userText("Go.")}})
		if got := agentrunner.ClassOf(err); got != agentrunner.ClassInterrupted {
			t.Fatalf("class = %s (%v), want %s", got, err, agentrunner.ClassInterrupted)
		}
		if !errors.Is(err, context.Canceled) {
			t.Errorf("error %v does not wrap context.Canceled", err)
		}
	})
	t.Run("deadline passed", func(t *testing.T) {
		srv := fake.NewAnthropic(t, testKey, fake.AnthropicReply{Text: "unused"})
		ctx, cancel := context.WithDeadline(context.Background(), time.Now().Add(-time.Second))
		defer cancel()
		_, err := newModel(t, srv).Generate(ctx, &llm.Request{Model: "claude-test", Messages: []llm.Message{userText("Go.")}})
		if got := agentrunner.ClassOf(err); got != agentrunner.ClassTimeout {
			t.Fatalf("class = %s (%v), want %s", got, err, agentrunner.ClassTimeout)
		}
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("error %v does not wrap context.DeadlineExceeded", err)
		}
	})
}

func TestRequestTimeout(t *testing.T) {
	release := make(chan struct{})
	srv := fake.NewAnthropic(t, testKey, fake.AnthropicReply{Respond: func(fake.AnthropicRequest) fake.AnthropicReply {
		<-release
		return fake.AnthropicReply{Text: "too late"}
	}})
	defer close(release)
	m := newModel(t, srv, func(c *anthropic.Config) {
		c.RequestTimeout = 50 * time.Millisecond
		c.MaxRetries = -1
	})
	_, err := m.Generate(context.Background(), &llm.Request{Model: "claude-test", Messages: []llm.Message{userText("Go.")}})
	if got := agentrunner.ClassOf(err); got != agentrunner.ClassUnavailable {
		t.Fatalf("class = %s (%v), want %s", got, err, agentrunner.ClassUnavailable)
	}
	if !strings.Contains(err.Error(), "request timeout") {
		t.Errorf("error %q does not say the request timed out", err)
	}
}

func TestConnectionRefused(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	m, err := anthropic.New(anthropic.Config{BaseURL: "http://" + addr, APIKey: testKey, MaxRetries: -1})
	if err != nil {
		t.Fatal(err)
	}
	_, err = m.Generate(context.Background(), &llm.Request{Model: "claude-test", Messages: []llm.Message{userText("Go.")}})
	if got := agentrunner.ClassOf(err); got != agentrunner.ClassUnavailable {
		t.Fatalf("class = %s (%v), want %s", got, err, agentrunner.ClassUnavailable)
	}
	if strings.Contains(err.Error(), testKey) {
		t.Errorf("error %q contains the key", err)
	}
}

func TestRecordingRedactsTheKey(t *testing.T) {
	srv := fake.NewAnthropic(t, testKey, fake.AnthropicReply{Text: "recorded answer"})
	dir := t.TempDir()
	ctx := llm.WithRecording(context.Background(), llm.NewRecording(dir, testKey))
	if _, err := newModel(t, srv).Generate(ctx, &llm.Request{Model: "claude-test", System: "sys", Messages: []llm.Message{userText("Go.")}}); err != nil {
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
		if bytes.Contains(data, []byte(testKey)) {
			t.Errorf("the recorded %s contains the key:\n%s", name, data)
		}
	}
	var ex struct {
		Headers map[string][]string `json:"headers"`
		Body    json.RawMessage     `json:"body"`
	}
	if err := json.Unmarshal(req, &ex); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"[redacted]"}, ex.Headers["X-Api-Key"]); diff != "" {
		t.Errorf("recorded x-api-key (-want +got):\n%s", diff)
	}
	if !bytes.Contains(ex.Body, []byte(`"model":"claude-test"`)) && !bytes.Contains(ex.Body, []byte(`"model": "claude-test"`)) {
		t.Errorf("request body not recorded: %s", ex.Body)
	}
	if !bytes.Contains(resp, []byte("recorded answer")) {
		t.Errorf("response body not recorded:\n%s", resp)
	}
}

func TestNewRejectsBadConfig(t *testing.T) {
	tests := []struct {
		name string
		cfg  anthropic.Config
		want string
	}{
		{"scheme", anthropic.Config{BaseURL: "ftp://example.com"}, "scheme"},
		{"no host", anthropic.Config{BaseURL: "http://"}, "no host"},
		{"not a URL", anthropic.Config{BaseURL: "http://exa mple.com:x"}, "not a valid URL"},
		{"relative", anthropic.Config{BaseURL: "api.anthropic.com"}, "scheme"},
		{"query", anthropic.Config{BaseURL: "https://example.com/?k=v"}, "query"},
		{"negative timeout", anthropic.Config{RequestTimeout: -time.Second}, "negative"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv(anthropic.BaseURLEnv, "")
			_, err := anthropic.New(tt.cfg)
			if got := agentrunner.ClassOf(err); got != agentrunner.ClassConfig {
				t.Fatalf("class = %s (%v), want %s", got, err, agentrunner.ClassConfig)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
		})
	}
	t.Run("from the environment", func(t *testing.T) {
		t.Setenv(anthropic.BaseURLEnv, "ftp://user:secret-password@example.com")
		_, err := anthropic.New(anthropic.Config{})
		if got := agentrunner.ClassOf(err); got != agentrunner.ClassConfig {
			t.Fatalf("class = %s (%v), want %s", got, err, agentrunner.ClassConfig)
		}
		if !strings.Contains(err.Error(), anthropic.BaseURLEnv) {
			t.Errorf("error %q does not name %s", err, anthropic.BaseURLEnv)
		}
		if strings.Contains(err.Error(), "secret-password") {
			t.Errorf("error %q quotes the URL's credentials", err)
		}
	})
}

func TestRequestsRefusedBeforeSending(t *testing.T) {
	good := []llm.Message{userText("Go.")}
	tests := []struct {
		name      string
		req       *llm.Request
		wantClass agentrunner.ErrorClass
		want      string
	}{
		{"nil", nil, agentrunner.ClassInternal, "nil request"},
		{"no model", &llm.Request{Messages: good}, agentrunner.ClassConfig, "no model"},
		{"negative max tokens", &llm.Request{Model: "m", MaxTokens: -1, Messages: good}, agentrunner.ClassConfig, "max_tokens"},
		{"temperature too high", &llm.Request{Model: "m", Temperature: ptr(1.5), Messages: good}, agentrunner.ClassConfig, "temperature"},
		{"schema not JSON", &llm.Request{Model: "m", JSONSchema: json.RawMessage(`{"type":`), Messages: good}, agentrunner.ClassConfig, "schema"},
		{"tool without name", &llm.Request{Model: "m", Tools: []llm.ToolSpec{{}}, Messages: good}, agentrunner.ClassConfig, "no name"},
		{"tool twice", &llm.Request{Model: "m", Tools: []llm.ToolSpec{{Name: "a"}, {Name: "a"}}, Messages: good}, agentrunner.ClassConfig, "twice"},
		{"tool schema not an object", &llm.Request{Model: "m", Tools: []llm.ToolSpec{{Name: "a", Parameters: json.RawMessage(`[1]`)}}, Messages: good}, agentrunner.ClassConfig, "not a JSON object"},
		{"tool schema of a string", &llm.Request{Model: "m", Tools: []llm.ToolSpec{{Name: "a", Parameters: json.RawMessage(`{"type":"string"}`)}}, Messages: good}, agentrunner.ClassConfig, "object schemas only"},
		{"no messages", &llm.Request{Model: "m"}, agentrunner.ClassInternal, "no message"},
		{"unknown role", &llm.Request{Model: "m", Messages: []llm.Message{{Role: "system", Text: "x"}}}, agentrunner.ClassInternal, "unknown role"},
		{"tool calls from the user", &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.User, ToolCalls: []llm.ToolCall{{ID: "a", Name: "b"}}}}}, agentrunner.ClassInternal, "user message with tool calls"},
		{"tool results from the assistant", &llm.Request{Model: "m", Messages: []llm.Message{userText("x"), {Role: llm.Assistant, ToolResults: []llm.ToolResult{{CallID: "a"}}}}}, agentrunner.ClassInternal, "assistant message with tool results"},
		{"tool call without id", &llm.Request{Model: "m", Messages: []llm.Message{userText("x"), {Role: llm.Assistant, ToolCalls: []llm.ToolCall{{Name: "b"}}}}}, agentrunner.ClassInternal, "no id"},
		{"tool result without call id", &llm.Request{Model: "m", Messages: []llm.Message{{Role: llm.User, ToolResults: []llm.ToolResult{{Content: "x"}}}}}, agentrunner.ClassInternal, "no call id"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			srv := fake.NewAnthropic(t, testKey)
			_, err := newModel(t, srv).Generate(context.Background(), tt.req)
			if got := agentrunner.ClassOf(err); got != tt.wantClass {
				t.Fatalf("class = %s (%v), want %s", got, err, tt.wantClass)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("error %q does not say %q", err, tt.want)
			}
			if n := len(srv.Requests()); n != 0 {
				t.Errorf("%d requests sent, want none", n)
			}
		})
	}
}
