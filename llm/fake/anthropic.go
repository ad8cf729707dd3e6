package fake

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/agentrunner/agentrunner/internal/clip"
	"github.com/agentrunner/agentrunner/llm"
)

// AnthropicServer is a fake of Anthropic's Messages API (POST
// {base}/v1/messages) on a real HTTP server on 127.0.0.1, so the Anthropic
// adapter is tested over the wire format it meets in production, with the
// official SDK doing the HTTP. Each request gets the next scripted reply.
//
// It validates requests the way the API does where a client can get it
// wrong: the anthropic-version and x-api-key headers, required fields,
// non-empty text blocks, tool_use inputs that are objects, tool_result
// blocks that answer the previous turn's tool_use blocks and come first in
// their message. It is stricter than today's API in one respect, on
// purpose: roles must alternate and the first message must be the user's
// (the API merges consecutive turns now, but a client that relies on that
// sends a conversation it did not mean to). A request that breaks these
// rules gets 400 invalid_request_error and consumes no reply.
//
// An AnthropicServer is safe for concurrent use.
type AnthropicServer struct {
	key string
	srv *httptest.Server

	mu       sync.Mutex
	script   []AnthropicReply
	served   int
	requests []AnthropicRequest
}

// AnthropicReply scripts the answer to one request: a message (the zero
// value is an empty end_turn answer), an HTTP error in Anthropic's error
// shape, a raw body, or a function that decides from the request.
type AnthropicReply struct {
	// Text becomes one text block, before the tool_use blocks.
	Text string
	// ToolCalls become tool_use blocks; an empty ID gets a generated one,
	// empty Arguments become {}. Arguments must be valid JSON.
	ToolCalls []llm.ToolCall
	// StopReason is sent as is; empty means tool_use when there are tool
	// calls, else end_turn.
	StopReason string
	// Usage is what the client should report: input_tokens on the wire is
	// InputTokens minus CachedTokens (at least 0), and CachedTokens is
	// cache_read_input_tokens, because Anthropic counts cache reads apart.
	Usage llm.Usage

	// Status, when 400 or more, makes the reply an HTTP error with body
	// {"type":"error","error":{"type":ErrorType,"message":ErrorMessage}}.
	// ErrorType defaults to the API's type for the status (429
	// rate_limit_error, 529 overloaded_error …), ErrorMessage to the
	// status text. With Raw, Status is the status of the raw body.
	Status       int
	ErrorType    string
	ErrorMessage string
	// RetryAfter is sent as the retry-after header (seconds), as the API
	// does with 429 and 529.
	RetryAfter string
	// Header holds more response headers (retry-after-ms, x-should-retry …).
	Header http.Header

	// Raw, when set, is sent as the body verbatim (Content-Type
	// application/json unless Header says otherwise), with Status or 200.
	Raw string

	// Respond, when set, is called with the request and its result is the
	// reply (its own Respond is ignored). It may block, e.g. to hold a
	// request in flight while a test cancels it.
	Respond func(req AnthropicRequest) AnthropicReply
}

// AnthropicRequest is one request the server received, decoded as far as
// it could be. Body and Header are always set.
type AnthropicRequest struct {
	Method string
	Path   string
	Model  string
	// System is the system prompt: the string form, or the text of its
	// blocks joined with newlines.
	System      string
	MaxTokens   int
	Temperature *float64
	Messages    []AnthropicMessage
	Tools       []AnthropicTool
	// Body is the raw request body.
	Body []byte
	// Header is the request's headers, credentials included, so a test
	// can check what was sent.
	Header http.Header
}

// AnthropicMessage is one message of a request.
type AnthropicMessage struct {
	Role    string
	Content []AnthropicBlock
}

// AnthropicBlock is one content block of a request message. A string
// content is decoded as one text block.
type AnthropicBlock struct {
	// Type is text, tool_use, tool_result (or another type, undecoded).
	Type string
	// Text of a text block.
	Text string
	// ID, Name and Input of a tool_use block.
	ID    string
	Name  string
	Input json.RawMessage
	// ToolUseID, Content (the string form, or its text blocks joined) and
	// IsError of a tool_result block.
	ToolUseID string
	Content   string
	IsError   bool
}

// AnthropicTool is one tool offered in a request.
type AnthropicTool struct {
	Name        string
	Description string
	InputSchema json.RawMessage
}

// NewAnthropic starts a server on 127.0.0.1 that answers with script, in
// order, and is closed when the test ends. When key is not empty, every
// request must carry it in x-api-key or gets 401.
func NewAnthropic(t testing.TB, key string, script ...AnthropicReply) *AnthropicServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("fake anthropic server: listen on 127.0.0.1: %v", err)
	}
	s := &AnthropicServer{key: key, script: script}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Listener.Close()
	s.srv.Listener = ln
	s.srv.Start()
	t.Cleanup(s.srv.Close)
	return s
}

// URL is the base URL to configure: the SDK adds /v1/messages itself.
func (s *AnthropicServer) URL() string { return s.srv.URL }

// Requests returns every request received so far, in order, including
// rejected ones.
func (s *AnthropicServer) Requests() []AnthropicRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]AnthropicRequest(nil), s.requests...)
}

// anthropicMaxBody bounds what the server reads of a request.
const anthropicMaxBody = 32 << 20

func (s *AnthropicServer) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, anthropicMaxBody+1))
	req := AnthropicRequest{Method: r.Method, Path: r.URL.Path, Body: body, Header: r.Header.Clone()}
	if err != nil {
		s.record(req)
		anthropicWriteError(w, http.StatusBadRequest, "invalid_request_error", "reading the body: "+err.Error(), nil)
		return
	}
	if r.URL.Path != "/v1/messages" {
		s.record(req)
		anthropicWriteError(w, http.StatusNotFound, "not_found_error",
			fmt.Sprintf("fake anthropic server serves POST /v1/messages only, not %s %s", r.Method, r.URL.Path), nil)
		return
	}
	if r.Method != http.MethodPost {
		s.record(req)
		anthropicWriteError(w, http.StatusMethodNotAllowed, "invalid_request_error", "method "+r.Method+" not allowed", nil)
		return
	}
	if len(body) > anthropicMaxBody {
		s.record(req)
		anthropicWriteError(w, http.StatusRequestEntityTooLarge, "request_too_large", "request exceeds the maximum allowed number of bytes", nil)
		return
	}
	problems := anthropicDecode(body, &req)
	s.record(req)
	if r.Header.Get("anthropic-version") == "" {
		anthropicWriteError(w, http.StatusBadRequest, "invalid_request_error", "anthropic-version: header is required", nil)
		return
	}
	if s.key != "" && subtle.ConstantTimeCompare([]byte(r.Header.Get("x-api-key")), []byte(s.key)) != 1 {
		anthropicWriteError(w, http.StatusUnauthorized, "authentication_error", "invalid x-api-key", nil)
		return
	}
	if mt := r.Header.Get("Content-Type"); !strings.HasPrefix(mt, "application/json") {
		anthropicWriteError(w, http.StatusBadRequest, "invalid_request_error", fmt.Sprintf("content-type %q: want application/json", mt), nil)
		return
	}
	if len(problems) > 0 {
		anthropicWriteError(w, http.StatusBadRequest, "invalid_request_error", strings.Join(problems, "; "), nil)
		return
	}
	reply, n, ok := s.next()
	if !ok {
		anthropicWriteError(w, http.StatusInternalServerError, "api_error",
			fmt.Sprintf("fake anthropic server: script exhausted: this is request %d, only %d replies were scripted", n, n-1), nil)
		return
	}
	if reply.Respond != nil {
		reply = reply.Respond(req)
	}
	anthropicWriteReply(w, reply, req.Model, n)
}

func (s *AnthropicServer) record(req AnthropicRequest) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.requests = append(s.requests, req)
}

// next hands out the next scripted reply and its 1-based number.
func (s *AnthropicServer) next() (AnthropicReply, int, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.served++
	if s.served > len(s.script) {
		return AnthropicReply{}, s.served, false
	}
	return s.script[s.served-1], s.served, true
}

// Wire types of a request, as far as the fake decodes them.
type (
	anthropicWireRequest struct {
		Model       string          `json:"model"`
		System      json.RawMessage `json:"system"`
		MaxTokens   *int            `json:"max_tokens"`
		Temperature *float64        `json:"temperature"`
		Messages    []struct {
			Role    string          `json:"role"`
			Content json.RawMessage `json:"content"`
		} `json:"messages"`
		Tools []struct {
			Name        string          `json:"name"`
			Description string          `json:"description"`
			InputSchema json.RawMessage `json:"input_schema"`
		} `json:"tools"`
	}
	anthropicWireBlock struct {
		Type      string          `json:"type"`
		Text      *string         `json:"text"`
		ID        string          `json:"id"`
		Name      string          `json:"name"`
		Input     json.RawMessage `json:"input"`
		ToolUseID string          `json:"tool_use_id"`
		Content   json.RawMessage `json:"content"`
		IsError   bool            `json:"is_error"`
	}
)

// anthropicDecode fills req from body and returns what the API would
// reject, each problem prefixed with its location.
func anthropicDecode(body []byte, req *AnthropicRequest) []string {
	var wire anthropicWireRequest
	if err := json.Unmarshal(body, &wire); err != nil {
		return []string{"body is not a valid JSON request: " + err.Error()}
	}
	var problems []string
	bad := func(format string, args ...any) { problems = append(problems, fmt.Sprintf(format, args...)) }

	req.Model, req.Temperature = wire.Model, wire.Temperature
	if wire.Model == "" {
		bad("model: field required")
	}
	switch {
	case wire.MaxTokens == nil:
		bad("max_tokens: field required")
	case *wire.MaxTokens < 1:
		bad("max_tokens: must be at least 1, got %d", *wire.MaxTokens)
	default:
		req.MaxTokens = *wire.MaxTokens
	}
	if t := wire.Temperature; t != nil && (math.IsNaN(*t) || *t < 0 || *t > 1) {
		bad("temperature: must be between 0 and 1, got %v", *t)
	}
	if len(wire.System) > 0 {
		text, err := anthropicText(wire.System)
		if err != nil {
			bad("system: %v", err)
		}
		req.System = text
	}

	names := map[string]bool{}
	for i, tl := range wire.Tools {
		req.Tools = append(req.Tools, AnthropicTool{Name: tl.Name, Description: tl.Description, InputSchema: tl.InputSchema})
		if tl.Name == "" {
			bad("tools.%d.name: field required", i)
		} else if names[tl.Name] {
			bad("tools: tool names must be unique, %q is repeated", tl.Name)
		}
		names[tl.Name] = true
		var schema struct {
			Type string `json:"type"`
		}
		if err := json.Unmarshal(tl.InputSchema, &schema); err != nil || !anthropicIsObject(tl.InputSchema) {
			bad("tools.%d.input_schema: must be a JSON object", i)
		} else if schema.Type != "object" {
			bad("tools.%d.input_schema.type: must be \"object\", got %q", i, schema.Type)
		}
	}

	if len(wire.Messages) == 0 {
		bad("messages: at least one message is required")
	}
	var pending map[string]bool // tool_use ids of the previous assistant turn
	for i, m := range wire.Messages {
		msg := AnthropicMessage{Role: m.Role}
		at := fmt.Sprintf("messages.%d", i)
		if m.Role != "user" && m.Role != "assistant" {
			bad("%s.role: must be \"user\" or \"assistant\", got %q", at, m.Role)
		}
		if i == 0 && m.Role != "user" {
			bad("messages: first message must use the \"user\" role")
		}
		if i > 0 && m.Role == wire.Messages[i-1].Role {
			bad("messages: roles must alternate between \"user\" and \"assistant\", but found multiple %q roles in a row", m.Role)
		}
		var blocks []anthropicWireBlock
		var s string
		switch {
		case json.Unmarshal(m.Content, &s) == nil:
			if strings.TrimSpace(s) == "" {
				bad("%s.content: text content must contain non-whitespace text", at)
			}
			blocks = []anthropicWireBlock{{Type: "text", Text: &s}}
		case json.Unmarshal(m.Content, &blocks) == nil:
			if len(blocks) == 0 {
				bad("%s.content: at least one content block is required", at)
			}
		default:
			bad("%s.content: must be a string or a list of content blocks", at)
		}
		answered := map[string]bool{}
		seenOther := false
		uses := map[string]bool{}
		for j, b := range blocks {
			bat := fmt.Sprintf("%s.content.%d", at, j)
			block := AnthropicBlock{Type: b.Type, ID: b.ID, Name: b.Name, Input: b.Input, ToolUseID: b.ToolUseID, IsError: b.IsError}
			switch b.Type {
			case "text":
				if b.Text == nil {
					bad("%s.text: field required", bat)
				} else {
					block.Text = *b.Text
					if strings.TrimSpace(*b.Text) == "" {
						bad("%s: text content blocks must contain non-whitespace text", bat)
					}
				}
				seenOther = true
			case "tool_use":
				if m.Role != "assistant" {
					bad("%s: tool_use blocks are only allowed in assistant messages", bat)
				}
				if b.ID == "" || b.Name == "" {
					bad("%s: tool_use blocks need an id and a name", bat)
				}
				if !anthropicIsObject(b.Input) {
					bad("%s.input: must be a JSON object, got %s", bat, anthropicClip(string(b.Input)))
				}
				uses[b.ID] = true
				seenOther = true
			case "tool_result":
				if m.Role != "user" {
					bad("%s: tool_result blocks are only allowed in user messages", bat)
				}
				if seenOther {
					bad("%s: tool_result blocks must come before any other content in a message", bat)
				}
				if !pending[b.ToolUseID] {
					bad("%s: unexpected tool_use_id %q in tool_result blocks: each tool_result block must have a corresponding tool_use block in the previous message", bat, b.ToolUseID)
				}
				answered[b.ToolUseID] = true
				if len(b.Content) > 0 && string(b.Content) != "null" {
					text, err := anthropicText(b.Content)
					if err != nil {
						bad("%s.content: %v", bat, err)
					}
					block.Content = text
				}
			case "":
				bad("%s.type: field required", bat)
				seenOther = true
			default:
				seenOther = true
			}
			msg.Content = append(msg.Content, block)
		}
		if m.Role == "user" {
			var missing []string
			for id := range pending {
				if !answered[id] {
					missing = append(missing, id)
				}
			}
			if len(missing) > 0 {
				bad("%s: tool_use ids were found without tool_result blocks immediately after: %s", at, strings.Join(missing, ", "))
			}
		}
		pending = uses
		req.Messages = append(req.Messages, msg)
	}
	return problems
}

// anthropicText reads a string or a list of text blocks.
func anthropicText(raw json.RawMessage) (string, error) {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s, nil
	}
	var blocks []anthropicWireBlock
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return "", fmt.Errorf("must be a string or a list of text blocks")
	}
	var parts []string
	for i, b := range blocks {
		if b.Type != "text" || b.Text == nil {
			return "", fmt.Errorf("block %d: want a text block, got type %q", i, b.Type)
		}
		if strings.TrimSpace(*b.Text) == "" {
			return "", fmt.Errorf("block %d: text content blocks must contain non-whitespace text", i)
		}
		parts = append(parts, *b.Text)
	}
	return strings.Join(parts, "\n"), nil
}

func anthropicIsObject(raw json.RawMessage) bool {
	var obj map[string]json.RawMessage
	return json.Unmarshal(raw, &obj) == nil && obj != nil
}

func anthropicClip(s string) string {
	if s == "" {
		return "nothing"
	}
	return clip.String(s, 80)
}

// anthropicErrorTypes are the API's error types by status.
var anthropicErrorTypes = map[int]string{
	400: "invalid_request_error",
	401: "authentication_error",
	402: "billing_error",
	403: "permission_error",
	404: "not_found_error",
	413: "request_too_large",
	429: "rate_limit_error",
	500: "api_error",
	504: "timeout_error",
	529: "overloaded_error",
}

func anthropicWriteError(w http.ResponseWriter, status int, typ, message string, header http.Header) {
	if typ == "" {
		typ = anthropicErrorTypes[status]
		if typ == "" {
			typ = "api_error"
		}
	}
	if message == "" {
		message = http.StatusText(status)
		if status == 529 {
			message = "Overloaded"
		}
	}
	body, _ := json.Marshal(map[string]any{
		"type":       "error",
		"error":      map[string]string{"type": typ, "message": message},
		"request_id": "req_fake",
	})
	anthropicWrite(w, status, header, body)
}

func anthropicWrite(w http.ResponseWriter, status int, header http.Header, body []byte) {
	for k, vs := range header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	if w.Header().Get("Content-Type") == "" {
		w.Header().Set("Content-Type", "application/json")
	}
	w.Header().Set("request-id", "req_fake")
	w.WriteHeader(status)
	w.Write(body)
}

// anthropicWriteReply sends a scripted reply to request n.
func anthropicWriteReply(w http.ResponseWriter, reply AnthropicReply, model string, n int) {
	header := reply.Header.Clone()
	if reply.RetryAfter != "" {
		if header == nil {
			header = http.Header{}
		}
		header.Set("retry-after", reply.RetryAfter)
	}
	if reply.Raw != "" {
		status := reply.Status
		if status == 0 {
			status = http.StatusOK
		}
		anthropicWrite(w, status, header, []byte(reply.Raw))
		return
	}
	if reply.Status >= 400 {
		anthropicWriteError(w, reply.Status, reply.ErrorType, reply.ErrorMessage, header)
		return
	}

	content := []any{}
	if reply.Text != "" {
		content = append(content, map[string]string{"type": "text", "text": reply.Text})
	}
	for i, call := range reply.ToolCalls {
		id := call.ID
		if id == "" {
			id = fmt.Sprintf("toolu_fake%03d_%d", n, i)
		}
		input := call.Arguments
		if len(bytes.TrimSpace(input)) == 0 {
			input = json.RawMessage("{}")
		}
		if !json.Valid(input) {
			anthropicWriteError(w, http.StatusInternalServerError, "api_error",
				fmt.Sprintf("fake anthropic server: scripted reply %d: tool call %d has arguments that are not JSON: use Raw for a malformed body", n, i), nil)
			return
		}
		content = append(content, map[string]any{"type": "tool_use", "id": id, "name": call.Name, "input": input})
	}
	stop := reply.StopReason
	if stop == "" {
		stop = "end_turn"
		if len(reply.ToolCalls) > 0 {
			stop = "tool_use"
		}
	}
	body, err := json.Marshal(map[string]any{
		"id":            fmt.Sprintf("msg_fake%04d", n),
		"type":          "message",
		"role":          "assistant",
		"model":         model,
		"content":       content,
		"stop_reason":   stop,
		"stop_sequence": nil,
		"usage": map[string]any{
			"input_tokens":                max(0, reply.Usage.InputTokens-reply.Usage.CachedTokens),
			"output_tokens":               reply.Usage.OutputTokens,
			"cache_creation_input_tokens": 0,
			"cache_read_input_tokens":     reply.Usage.CachedTokens,
			"service_tier":                "standard",
		},
	})
	if err != nil {
		anthropicWriteError(w, http.StatusInternalServerError, "api_error", "fake anthropic server: encoding the reply: "+err.Error(), nil)
		return
	}
	status := reply.Status
	if status == 0 {
		status = http.StatusOK
	}
	anthropicWrite(w, status, header, body)
}
