package fake

import (
	"bytes"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/agentrunner/agentrunner/llm"
)

// OpenAIServer is a fake OpenAI Chat Completions server on 127.0.0.1 for
// tests and offline demos: it checks the bearer key and the shape of each request as the
// real API does, records every request, and answers from a script, so a
// client is tested over real HTTP without the internet. It is safe for
// concurrent use.
type OpenAIServer struct {
	srv       *httptest.Server
	key       string
	done      chan struct{}
	closeOnce sync.Once
	// respond, when set, answers every request instead of the script.
	respond func(OpenAIRequest) OpenAIReply

	mu       sync.Mutex
	script   []OpenAIReply
	next     int
	requests []OpenAIRequest
}

// OpenAIRequest is one request the server received, decoded as far as it
// could be (Body and Header are always set).
type OpenAIRequest struct {
	Model          string
	Messages       []OpenAIMessage
	Tools          []OpenAITool
	ResponseFormat *OpenAIResponseFormat
	// MaxTokens and MaxCompletionTokens are nil when not sent.
	MaxTokens           *int
	MaxCompletionTokens *int
	Temperature         *float64
	Stream              bool
	// Body is the raw request body; Header the request headers.
	Body   []byte
	Header http.Header
}

// OpenAIMessage is one message of a request.
type OpenAIMessage struct {
	Role string
	// Content is the text (the text parts joined, for an array content).
	Content string
	// ContentNull is set when content was null or absent.
	ContentNull bool
	ToolCalls   []llm.ToolCall
	ToolCallID  string
}

// OpenAITool is a function tool offered in a request.
type OpenAITool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// OpenAIResponseFormat is a request's response_format.
type OpenAIResponseFormat struct {
	Type string
	// Name, Schema and Strict are those of a json_schema format.
	Name   string
	Schema json.RawMessage
	Strict *bool
}

// OpenAIReply is one scripted answer. Respond, when set, computes the
// reply from the request instead. Otherwise a non-zero Status answers an
// HTTP error; else a non-empty Raw is sent as is with 200; else a chat
// completion is built from Text, ToolCalls, FinishReason and Usage.
type OpenAIReply struct {
	Text      string
	ToolCalls []llm.ToolCall
	// FinishReason defaults to "tool_calls" with tool calls, else "stop".
	FinishReason string
	Usage        llm.Usage

	// Status is an HTTP error status (401, 429, 500, …). ErrorBody is its
	// body; "" sends an OpenAI error object for the status. RetryAfter is
	// the Retry-After header.
	Status     int
	ErrorBody  string
	RetryAfter string
	// Header adds response headers (e.g. Retry-After-Ms, x-should-retry).
	Header http.Header

	// Raw is a body sent as is with 200 (e.g. truncated JSON).
	Raw string

	// Delay holds the answer back, for timeout tests; it ends early when
	// the client goes away or the server closes.
	Delay time.Duration

	Respond func(req OpenAIRequest) OpenAIReply
}

// NewOpenAI starts a server on 127.0.0.1 that answers with script, in
// order; when the script runs out it answers 500 saying so. A non-empty
// key is required as "Authorization: Bearer <key>". The server closes when
// the test ends.
func NewOpenAI(t testing.TB, key string, script ...OpenAIReply) *OpenAIServer {
	t.Helper()
	s, err := startOpenAI(key, script, nil)
	if err != nil {
		t.Fatalf("fake OpenAI server: %v", err)
	}
	t.Cleanup(s.Close)
	return s
}

// StartOpenAI starts a server on 127.0.0.1, outside tests, that answers
// every request with respond's reply (a reply's own Respond is not
// called). It checks the key and the requests as NewOpenAI's server does.
// The caller closes it.
func StartOpenAI(key string, respond func(OpenAIRequest) OpenAIReply) (*OpenAIServer, error) {
	if respond == nil {
		return nil, fmt.Errorf("fake OpenAI server: no respond function")
	}
	return startOpenAI(key, nil, respond)
}

func startOpenAI(key string, script []OpenAIReply, respond func(OpenAIRequest) OpenAIReply) (*OpenAIServer, error) {
	ln, err := net.Listen("tcp4", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("listen: %w", err)
	}
	s := &OpenAIServer{key: key, done: make(chan struct{}), script: append([]OpenAIReply(nil), script...), respond: respond}
	s.srv = httptest.NewUnstartedServer(http.HandlerFunc(s.serve))
	s.srv.Listener.Close()
	s.srv.Listener = ln
	s.srv.Start()
	return s, nil
}

// Close stops the server: replies held back by a Delay end at once. It
// may be called more than once.
func (s *OpenAIServer) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.srv.Close()
	})
}

// URL is the base URL clients use, e.g. http://127.0.0.1:PORT/v1.
func (s *OpenAIServer) URL() string { return s.srv.URL + "/v1" }

// Requests returns every request received so far, oldest first.
func (s *OpenAIServer) Requests() []OpenAIRequest {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]OpenAIRequest(nil), s.requests...)
}

// openaiMaxBody bounds a request body, as real servers do.
const openaiMaxBody = 32 << 20

func (s *OpenAIServer) serve(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path != "/v1/chat/completions" {
		openaiError(w, http.StatusNotFound, fmt.Sprintf("Invalid URL (%s %s)", r.Method, r.URL.Path), "invalid_request_error", "")
		return
	}
	if r.Method != http.MethodPost {
		openaiError(w, http.StatusMethodNotAllowed, fmt.Sprintf("Invalid method for URL (%s %s)", r.Method, r.URL.Path), "invalid_request_error", "")
		return
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, openaiMaxBody+1))
	if err != nil {
		openaiError(w, http.StatusBadRequest, "could not read the request body: "+err.Error(), "invalid_request_error", "")
		return
	}
	req, decodeErr := openaiDecodeRequest(body)
	req.Body, req.Header = body, r.Header.Clone()
	s.mu.Lock()
	s.requests = append(s.requests, req)
	n := len(s.requests)
	s.mu.Unlock()

	if s.key != "" {
		got := r.Header.Get("Authorization")
		if got == "" {
			openaiError(w, http.StatusUnauthorized, "You didn't provide an API key. You need to provide your API key in an Authorization header using Bearer auth (i.e. Authorization: Bearer YOUR_KEY).", "invalid_request_error", "")
			return
		}
		if subtle.ConstantTimeCompare([]byte(got), []byte("Bearer "+s.key)) != 1 {
			// The key is echoed whole, the worst a server may do, so tests
			// can prove a client never passes it on.
			openaiError(w, http.StatusUnauthorized, "Incorrect API key provided: "+strings.TrimPrefix(got, "Bearer ")+". You can find your API key at https://platform.openai.com/account/api-keys.", "invalid_request_error", "invalid_api_key")
			return
		}
	}
	if len(body) > openaiMaxBody {
		openaiError(w, http.StatusRequestEntityTooLarge, "request body too large", "invalid_request_error", "")
		return
	}
	if decodeErr != nil {
		openaiError(w, http.StatusBadRequest, "We could not parse the JSON body of your request: "+decodeErr.Error(), "invalid_request_error", "")
		return
	}
	if problem := openaiValidate(&req); problem != "" {
		openaiError(w, http.StatusBadRequest, problem, "invalid_request_error", "")
		return
	}

	var reply OpenAIReply
	if s.respond != nil {
		reply = s.respond(req)
	} else if reply, err = s.scripted(n); err != nil {
		openaiError(w, http.StatusInternalServerError, err.Error(), "server_error", "")
		return
	} else if reply.Respond != nil {
		reply = reply.Respond(req)
	}

	if reply.Delay > 0 {
		timer := time.NewTimer(reply.Delay)
		defer timer.Stop()
		select {
		case <-timer.C:
		case <-r.Context().Done():
			return
		case <-s.done:
			return
		}
	}
	for k, vs := range reply.Header {
		for _, v := range vs {
			w.Header().Add(k, v)
		}
	}
	w.Header().Set("X-Request-Id", fmt.Sprintf("req_fake%06d", n))
	switch {
	case reply.Status != 0:
		if reply.RetryAfter != "" {
			w.Header().Set("Retry-After", reply.RetryAfter)
		}
		if reply.ErrorBody == "" {
			typ, code := openaiErrorKind(reply.Status)
			openaiError(w, reply.Status, openaiStatusMessage(reply.Status), typ, code)
			return
		}
		if json.Valid([]byte(reply.ErrorBody)) {
			w.Header().Set("Content-Type", "application/json")
		} else {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
		}
		w.WriteHeader(reply.Status)
		io.WriteString(w, reply.ErrorBody)
	case reply.Raw != "":
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, reply.Raw)
	default:
		openaiWriteJSON(w, http.StatusOK, openaiCompletion(n, req.Model, reply))
	}
}

// scripted is the script's next reply, for request n.
func (s *OpenAIServer) scripted(n int) (OpenAIReply, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.next >= len(s.script) {
		return OpenAIReply{}, fmt.Errorf("fake OpenAI server: the script has no reply for request %d (it has %d replies)", n, len(s.script))
	}
	reply := s.script[s.next]
	s.next++
	return reply, nil
}

// openaiCompletion builds a chat.completion object as OpenAI sends it.
func openaiCompletion(n int, model string, reply OpenAIReply) map[string]any {
	message := map[string]any{"role": "assistant", "content": reply.Text, "refusal": nil, "annotations": []any{}}
	finish := reply.FinishReason
	if len(reply.ToolCalls) > 0 {
		if reply.Text == "" {
			message["content"] = nil
		}
		calls := make([]map[string]any, len(reply.ToolCalls))
		for i, c := range reply.ToolCalls {
			id := c.ID
			if id == "" {
				id = fmt.Sprintf("call_fake%04d%02d", n, i)
			}
			args := string(c.Arguments)
			if args == "" {
				args = "{}"
			}
			calls[i] = map[string]any{"id": id, "type": "function", "function": map[string]any{"name": c.Name, "arguments": args}}
		}
		message["tool_calls"] = calls
		if finish == "" {
			finish = "tool_calls"
		}
	}
	if finish == "" {
		finish = "stop"
	}
	u := reply.Usage
	return map[string]any{
		"id":      fmt.Sprintf("chatcmpl-fake%06d", n),
		"object":  "chat.completion",
		"created": time.Now().Unix(),
		"model":   model,
		"choices": []any{map[string]any{"index": 0, "message": message, "logprobs": nil, "finish_reason": finish}},
		"usage": map[string]any{
			"prompt_tokens":             u.InputTokens,
			"completion_tokens":         u.OutputTokens,
			"total_tokens":              u.InputTokens + u.OutputTokens,
			"prompt_tokens_details":     map[string]any{"cached_tokens": u.CachedTokens, "audio_tokens": 0},
			"completion_tokens_details": map[string]any{"reasoning_tokens": 0, "audio_tokens": 0, "accepted_prediction_tokens": 0, "rejected_prediction_tokens": 0},
		},
		"service_tier":       "default",
		"system_fingerprint": "fp_fake",
	}
}

// The request as it is on the wire.
type openaiWireRequest struct {
	Model          string              `json:"model"`
	Messages       []openaiWireMessage `json:"messages"`
	Tools          []openaiWireTool    `json:"tools"`
	ResponseFormat *struct {
		Type       string `json:"type"`
		JSONSchema *struct {
			Name   string          `json:"name"`
			Schema json.RawMessage `json:"schema"`
			Strict *bool           `json:"strict"`
		} `json:"json_schema"`
	} `json:"response_format"`
	MaxTokens           *int     `json:"max_tokens"`
	MaxCompletionTokens *int     `json:"max_completion_tokens"`
	Temperature         *float64 `json:"temperature"`
	Stream              bool     `json:"stream"`
}

type openaiWireMessage struct {
	Role       string          `json:"role"`
	Content    json.RawMessage `json:"content"`
	ToolCallID string          `json:"tool_call_id"`
	ToolCalls  []struct {
		ID       string `json:"id"`
		Type     string `json:"type"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

type openaiWireTool struct {
	Type     string `json:"type"`
	Function struct {
		Name        string          `json:"name"`
		Description string          `json:"description"`
		Parameters  json.RawMessage `json:"parameters"`
	} `json:"function"`
}

// openaiDecodeRequest decodes a body into an OpenAIRequest; the error
// says what is not as the API expects.
func openaiDecodeRequest(body []byte) (OpenAIRequest, error) {
	var wire openaiWireRequest
	if err := json.Unmarshal(body, &wire); err != nil {
		return OpenAIRequest{}, err
	}
	req := OpenAIRequest{
		Model: wire.Model, MaxTokens: wire.MaxTokens, MaxCompletionTokens: wire.MaxCompletionTokens,
		Temperature: wire.Temperature, Stream: wire.Stream,
	}
	for i, m := range wire.Messages {
		text, null, err := openaiContent(m.Content)
		if err != nil {
			return req, fmt.Errorf("messages[%d].content: %w", i, err)
		}
		msg := OpenAIMessage{Role: m.Role, Content: text, ContentNull: null, ToolCallID: m.ToolCallID}
		for j, c := range m.ToolCalls {
			if c.Type != "function" {
				return req, fmt.Errorf("messages[%d].tool_calls[%d].type: %q is not function", i, j, c.Type)
			}
			msg.ToolCalls = append(msg.ToolCalls, llm.ToolCall{ID: c.ID, Name: c.Function.Name, Arguments: json.RawMessage(c.Function.Arguments)})
		}
		req.Messages = append(req.Messages, msg)
	}
	for i, t := range wire.Tools {
		if t.Type != "function" {
			return req, fmt.Errorf("tools[%d].type: %q is not function", i, t.Type)
		}
		req.Tools = append(req.Tools, OpenAITool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	if rf := wire.ResponseFormat; rf != nil {
		req.ResponseFormat = &OpenAIResponseFormat{Type: rf.Type}
		if rf.JSONSchema != nil {
			req.ResponseFormat.Name = rf.JSONSchema.Name
			req.ResponseFormat.Schema = rf.JSONSchema.Schema
			req.ResponseFormat.Strict = rf.JSONSchema.Strict
		}
	}
	return req, nil
}

// openaiContent is the text of a message content: a string, null, or an
// array of text parts.
func openaiContent(raw json.RawMessage) (text string, null bool, err error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", true, nil
	}
	if err := json.Unmarshal(raw, &text); err == nil {
		return text, false, nil
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", false, fmt.Errorf("neither a string nor an array of content parts")
	}
	var b strings.Builder
	for i, p := range parts {
		if p.Type != "text" {
			return "", false, fmt.Errorf("part %d has type %q, this server only knows text", i, p.Type)
		}
		b.WriteString(p.Text)
	}
	return b.String(), false, nil
}

// openaiValidate checks what the API checks before answering: a model,
// known roles, tool messages that answer the preceding assistant's tool
// calls (each call answered before the next user or assistant message),
// named tools with object schemas and a complete json_schema format. It
// returns the API's kind of message, or "".
func openaiValidate(req *OpenAIRequest) string {
	if req.Model == "" {
		return "you must provide a model parameter"
	}
	if req.Stream {
		return "fake OpenAI server: stream is not supported"
	}
	if len(req.Messages) == 0 {
		return "'messages' must contain at least one message"
	}
	pending := map[string]bool{}
	for i, m := range req.Messages {
		if m.Role != "tool" && len(pending) > 0 {
			return fmt.Sprintf("messages[%d]: an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'; missing %s", i, openaiKeys(pending))
		}
		switch m.Role {
		case "system", "developer", "user":
			if m.ContentNull {
				return fmt.Sprintf("messages[%d].content: expected a string or an array, got null", i)
			}
		case "assistant":
			if m.ContentNull && len(m.ToolCalls) == 0 {
				return fmt.Sprintf("messages[%d]: an assistant message needs content or tool_calls", i)
			}
			for j, c := range m.ToolCalls {
				if c.ID == "" || c.Name == "" {
					return fmt.Sprintf("messages[%d].tool_calls[%d]: id and function.name are required", i, j)
				}
				pending[c.ID] = true
			}
		case "tool":
			if m.ContentNull {
				return fmt.Sprintf("messages[%d].content: a tool message needs content", i)
			}
			if !pending[m.ToolCallID] {
				return fmt.Sprintf("messages[%d]: messages with role 'tool' must be a response to a preceding message with 'tool_calls' (tool_call_id %q)", i, m.ToolCallID)
			}
			delete(pending, m.ToolCallID)
		default:
			return fmt.Sprintf("messages[%d].role: %q is not one of system, developer, user, assistant, tool", i, m.Role)
		}
	}
	if len(pending) > 0 {
		return fmt.Sprintf("an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'; missing %s", openaiKeys(pending))
	}
	for i, t := range req.Tools {
		if t.Name == "" {
			return fmt.Sprintf("tools[%d].function.name is required", i)
		}
		if len(t.Parameters) > 0 && !openaiIsObject(t.Parameters) {
			return fmt.Sprintf("tools[%d].function.parameters must be a JSON object", i)
		}
	}
	if rf := req.ResponseFormat; rf != nil {
		switch rf.Type {
		case "text", "json_object":
		case "json_schema":
			if rf.Name == "" || !openaiIsObject(rf.Schema) {
				return "response_format.json_schema needs a name and a schema object"
			}
		default:
			return fmt.Sprintf("response_format.type: %q is not one of text, json_object, json_schema", rf.Type)
		}
	}
	if req.MaxTokens != nil && *req.MaxTokens < 1 {
		return "max_tokens must be at least 1"
	}
	if t := req.Temperature; t != nil && (*t < 0 || *t > 2) {
		return "temperature must be between 0 and 2"
	}
	return ""
}

func openaiIsObject(raw json.RawMessage) bool {
	var m map[string]json.RawMessage
	return json.Unmarshal(raw, &m) == nil && m != nil
}

func openaiKeys(m map[string]bool) string {
	var ids []string
	for id := range m {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	return strings.Join(ids, ", ")
}

// openaiErrorKind is the error type and code OpenAI sends with a status.
func openaiErrorKind(status int) (typ, code string) {
	switch {
	case status == http.StatusUnauthorized:
		return "invalid_request_error", "invalid_api_key"
	case status == http.StatusNotFound:
		return "invalid_request_error", "model_not_found"
	case status == http.StatusTooManyRequests:
		return "requests", "rate_limit_exceeded"
	case status >= 500:
		return "server_error", ""
	}
	return "invalid_request_error", ""
}

func openaiStatusMessage(status int) string {
	switch status {
	case http.StatusUnauthorized:
		return "Incorrect API key provided."
	case http.StatusNotFound:
		return "The model does not exist or you do not have access to it."
	case http.StatusTooManyRequests:
		return "Rate limit reached for requests. Please try again later."
	case http.StatusInternalServerError:
		return "The server had an error while processing your request. Sorry about that!"
	}
	return fmt.Sprintf("fake OpenAI server: scripted %d %s", status, http.StatusText(status))
}

// openaiError writes an error object the way the API does.
func openaiError(w http.ResponseWriter, status int, message, typ, code string) {
	var c any
	if code != "" {
		c = code
	}
	openaiWriteJSON(w, status, map[string]any{"error": map[string]any{"message": message, "type": typ, "param": nil, "code": c}})
}

func openaiWriteJSON(w http.ResponseWriter, status int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "fake OpenAI server: encode: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	w.Write(data)
}
