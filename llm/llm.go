// Package llm is the small interface the model runtime needs of an LLM
// provider: one Generate call per model turn, with tools and tool calls in
// provider-neutral types. llm/openai and llm/anthropic implement it over
// the official SDKs; llm/fake serves both providers' wire formats on
// loopback for tests.
package llm

import (
	"context"
	"encoding/json"
)

// Model is one provider's chat API.
//
// Generate returns an error built with agentrunner.Fail: rate limits, 5xx,
// timeouts, connection failures and malformed responses are
// ClassUnavailable (retryable); a rejected key is ClassConfig; a request
// the provider refuses as invalid is ClassInvalidOutput.
type Model interface {
	Generate(ctx context.Context, req *Request) (*Response, error)
}

// Request is one model turn.
type Request struct {
	Model  string
	System string
	// Messages is the conversation so far, oldest first.
	Messages []Message
	// Tools the model may call.
	Tools       []ToolSpec
	Temperature *float64
	MaxTokens   int
	// JSONSchema, when set, asks for a final answer that is a JSON document
	// matching it (structured output), where the provider supports it.
	JSONSchema json.RawMessage
	SchemaName string
}

// ToolSpec is a tool as offered to a model.
type ToolSpec struct {
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments object.
	Parameters json.RawMessage
}

// Role says who a message is from.
type Role string

// Message roles.
const (
	// User: the prompt, or the results of the model's tool calls.
	User Role = "user"
	// Assistant: a model turn, with text and/or tool calls.
	Assistant Role = "assistant"
)

// Message is one message of the conversation.
type Message struct {
	Role Role
	// Text of the message (may be empty for a turn of tool calls only).
	Text string
	// ToolCalls of an assistant message.
	ToolCalls []ToolCall
	// ToolResults of a user message answering the previous turn's calls.
	ToolResults []ToolResult
}

// ToolCall is a call the model asked for.
type ToolCall struct {
	// ID is the provider's id, echoed in the result.
	ID   string
	Name string
	// Arguments as the model sent them: possibly not valid JSON.
	Arguments json.RawMessage
}

// ToolResult answers one tool call.
type ToolResult struct {
	CallID  string
	Content string
	IsError bool
}

// StopReason says why a turn ended.
type StopReason string

// Stop reasons.
const (
	// StopEnd: the model gave its answer.
	StopEnd StopReason = "end"
	// StopToolUse: the model wants its tool calls run.
	StopToolUse StopReason = "tool_use"
	// StopMaxTokens: the answer was cut at max_tokens.
	StopMaxTokens StopReason = "max_tokens"
)

// Response is a model turn.
type Response struct {
	Text       string
	ToolCalls  []ToolCall
	StopReason StopReason
	Usage      Usage
}

// Usage is the tokens a turn cost, as the provider reported them.
type Usage struct {
	InputTokens  int `json:"input_tokens"`
	OutputTokens int `json:"output_tokens"`
	// CachedTokens of the input served from the provider's prompt cache.
	CachedTokens int `json:"cached_tokens"`
}

// Add returns the sum of two usages.
func (u Usage) Add(o Usage) Usage {
	return Usage{u.InputTokens + o.InputTokens, u.OutputTokens + o.OutputTokens, u.CachedTokens + o.CachedTokens}
}

// Total is input plus output tokens, what token budgets count.
func (u Usage) Total() int { return u.InputTokens + u.OutputTokens }
