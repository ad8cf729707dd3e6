package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/agentrunner/agentrunner/internal/clip"
	"github.com/agentrunner/agentrunner/llm"
)

// The wire shape of a chat completion, as much of it as the runtime uses.
// Optional parts are pointers or raw values so absence and null can be
// told from a wrong type.
type wireCompletion struct {
	Choices []wireChoice    `json:"choices"`
	Usage   *wireUsage      `json:"usage"`
	Error   json.RawMessage `json:"error"`
}

type wireChoice struct {
	Message      *wireMessage `json:"message"`
	FinishReason *string      `json:"finish_reason"`
}

type wireMessage struct {
	// Content is a string, null, or (some compatible servers) an array of
	// content parts.
	Content   json.RawMessage `json:"content"`
	Refusal   *string         `json:"refusal"`
	ToolCalls []wireToolCall  `json:"tool_calls"`
}

type wireToolCall struct {
	ID       string        `json:"id"`
	Type     string        `json:"type"`
	Function *wireFunction `json:"function"`
}

type wireFunction struct {
	Name string `json:"name"`
	// Arguments is a JSON string per the API; a few servers send the
	// object itself.
	Arguments json.RawMessage `json:"arguments"`
}

type wireUsage struct {
	PromptTokens        int `json:"prompt_tokens"`
	CompletionTokens    int `json:"completion_tokens"`
	PromptTokensDetails *struct {
		CachedTokens int `json:"cached_tokens"`
	} `json:"prompt_tokens_details"`
}

type wirePart struct {
	Type string `json:"type"`
	Text string `json:"text"`
}

// decodeCompletion maps the first choice of a completion body onto an
// llm.Response. Its errors say what is wrong, at which field.
//
//   - Text is the content; when the model refused (content empty, refusal
//     set) it is the refusal, so the runtime and the operator see why.
//   - Tool call arguments are kept as the model sent them, even invalid
//     JSON (the runtime reports that to the model); a call without an id
//     gets call_<index>, so its result can still be matched.
//   - StopReason is StopToolUse whenever there are tool calls (some servers
//     say "stop" then), StopMaxTokens for "length", else StopEnd.
//   - Usage: InputTokens is prompt_tokens (cached ones included, as OpenAI
//     counts them), CachedTokens is prompt_tokens_details.cached_tokens.
func decodeCompletion(body []byte) (*llm.Response, error) {
	if len(bytes.TrimSpace(body)) == 0 {
		return nil, errors.New("empty body")
	}
	var c wireCompletion
	if err := json.Unmarshal(body, &c); err != nil {
		return nil, jsonProblem(err, body)
	}
	if len(c.Choices) == 0 {
		if len(c.Error) > 0 && string(c.Error) != "null" {
			return nil, fmt.Errorf("an error instead of a completion: %s", errorText(body))
		}
		return nil, errors.New("no choices")
	}
	choice := c.Choices[0]
	if choice.Message == nil {
		return nil, errors.New("choices[0] has no message")
	}
	text, err := contentText(choice.Message.Content)
	if err != nil {
		return nil, fmt.Errorf("choices[0].message.content: %w", err)
	}
	if text == "" && choice.Message.Refusal != nil {
		text = *choice.Message.Refusal
	}
	resp := &llm.Response{Text: text, StopReason: llm.StopEnd}
	for i, tc := range choice.Message.ToolCalls {
		at := fmt.Sprintf("choices[0].message.tool_calls[%d]", i)
		if tc.Type != "" && tc.Type != "function" {
			return nil, fmt.Errorf("%s: type %q, only function tools are offered", at, tc.Type)
		}
		if tc.Function == nil || tc.Function.Name == "" {
			return nil, fmt.Errorf("%s: no function name", at)
		}
		args, err := arguments(tc.Function.Arguments)
		if err != nil {
			return nil, fmt.Errorf("%s.function.arguments: %w", at, err)
		}
		id := tc.ID
		if id == "" {
			id = fmt.Sprintf("call_%d", i)
		}
		resp.ToolCalls = append(resp.ToolCalls, llm.ToolCall{ID: id, Name: tc.Function.Name, Arguments: args})
	}
	switch {
	case len(resp.ToolCalls) > 0:
		resp.StopReason = llm.StopToolUse
	case choice.FinishReason != nil && *choice.FinishReason == "length":
		resp.StopReason = llm.StopMaxTokens
	}
	if u := c.Usage; u != nil {
		resp.Usage = llm.Usage{InputTokens: u.PromptTokens, OutputTokens: u.CompletionTokens}
		if u.PromptTokensDetails != nil {
			resp.Usage.CachedTokens = u.PromptTokensDetails.CachedTokens
		}
		if u.PromptTokens < 0 || u.CompletionTokens < 0 || resp.Usage.CachedTokens < 0 {
			return nil, fmt.Errorf("usage has negative token counts (%d, %d, %d)", u.PromptTokens, u.CompletionTokens, resp.Usage.CachedTokens)
		}
	}
	return resp, nil
}

// contentText is the text of a message content: a string, null, or an
// array of parts whose text parts are joined.
func contentText(raw json.RawMessage) (string, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return "", nil
	}
	var s string
	if err := json.Unmarshal(raw, &s); err == nil {
		return s, nil
	}
	var parts []wirePart
	if err := json.Unmarshal(raw, &parts); err != nil {
		return "", errors.New("neither a string nor an array of content parts")
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" || p.Type == "output_text" {
			b.WriteString(p.Text)
		}
	}
	return b.String(), nil
}

// arguments is a tool call's arguments as the model produced them: the
// content of the JSON string, or the raw object a few servers send.
// Absent or null arguments are empty.
func arguments(raw json.RawMessage) (json.RawMessage, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return json.RawMessage{}, nil
	}
	switch raw[0] {
	case '"':
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return json.RawMessage(s), nil
	case '{':
		return append(json.RawMessage(nil), raw...), nil
	}
	return nil, errors.New("neither a JSON string nor an object")
}

// jsonProblem describes why a body is not a completion, without Go type
// names.
func jsonProblem(err error, body []byte) error {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		if syntax.Offset >= int64(len(body)) {
			return fmt.Errorf("truncated JSON (%d bytes)", len(body))
		}
		return fmt.Errorf("not JSON (at byte %d: %v): %q", syntax.Offset, syntax, snippet(body))
	case errors.As(err, &typ):
		field := typ.Field
		if field == "" {
			field = "the body"
		}
		return fmt.Errorf("%s is a JSON %s", field, typ.Value)
	}
	return err
}

// snippet is the start of a body, for an error.
func snippet(body []byte) string {
	return clip.String(string(body), 120)
}
