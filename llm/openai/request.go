package openai

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"regexp"
	"strings"

	oai "github.com/openai/openai-go/v3"
	"github.com/openai/openai-go/v3/shared"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/llm"
)

// namePattern is OpenAI's rule for function and response-format names; a
// name outside it is refused with a 400 that does not say which tool.
var namePattern = regexp.MustCompile(`^[a-zA-Z0-9_-]{1,64}$`)

// buildParams maps a provider-neutral request onto Chat Completions.
//
//   - System becomes a system message (not developer: every compatible
//     server knows system).
//   - A user message's ToolResults become one tool message each, in order,
//     followed by a user message with its Text if any. The result content
//     is sent as given: the runtime already encodes errors in it.
//   - MaxTokens is sent as max_tokens, not max_completion_tokens: many
//     compatible servers (Ollama, llama.cpp, older vLLM) know only
//     max_tokens, and OpenAI still accepts it for non-reasoning models.
//   - JSONSchema becomes response_format json_schema with strict false:
//     strict mode accepts only a subset of JSON Schema, and the runtime
//     validates the answer itself.
//
// Problems of configuration (model, tools, schema) are ClassConfig; a
// malformed conversation is a bug of the caller, ClassInternal.
func buildParams(req *llm.Request) (oai.ChatCompletionNewParams, error) {
	var p oai.ChatCompletionNewParams
	if req == nil {
		return p, agentrunner.Fail(agentrunner.ClassInternal, "openai: nil request")
	}
	if strings.TrimSpace(req.Model) == "" {
		return p, agentrunner.Fail(agentrunner.ClassConfig, "openai: no model given; set model on the agent or its provider")
	}
	p.Model = req.Model
	if req.MaxTokens < 0 {
		return p, agentrunner.Fail(agentrunner.ClassConfig, "openai: max_tokens %d is negative", req.MaxTokens)
	}
	if req.MaxTokens > 0 {
		p.MaxTokens = oai.Int(int64(req.MaxTokens))
	}
	if t := req.Temperature; t != nil {
		if !finite(*t) || *t < 0 {
			return p, agentrunner.Fail(agentrunner.ClassConfig, "openai: temperature %v is not a number ≥ 0", *t)
		}
		p.Temperature = oai.Float(*t)
	}
	if len(req.Messages) == 0 {
		return p, agentrunner.Fail(agentrunner.ClassInternal, "openai: the request has no messages")
	}
	if req.System != "" {
		p.Messages = append(p.Messages, oai.SystemMessage(req.System))
	}
	for i, msg := range req.Messages {
		mapped, err := mapMessage(i, msg)
		if err != nil {
			return p, err
		}
		p.Messages = append(p.Messages, mapped...)
	}
	seen := map[string]bool{}
	for i, t := range req.Tools {
		if !namePattern.MatchString(t.Name) {
			return p, agentrunner.Fail(agentrunner.ClassConfig,
				"openai: tools[%d]: name %q must be 1 to 64 letters, digits, '_' or '-'", i, t.Name)
		}
		if seen[t.Name] {
			return p, agentrunner.Fail(agentrunner.ClassConfig, "openai: tools[%d]: tool %q is offered twice", i, t.Name)
		}
		seen[t.Name] = true
		fn := shared.FunctionDefinitionParam{Name: t.Name}
		if t.Description != "" {
			fn.Description = oai.String(t.Description)
		}
		if len(bytes.TrimSpace(t.Parameters)) > 0 {
			params, err := jsonObject(t.Parameters)
			if err != nil {
				return p, agentrunner.Fail(agentrunner.ClassConfig, "openai: tool %q: parameters: %v", t.Name, err)
			}
			fn.Parameters = params
		}
		p.Tools = append(p.Tools, oai.ChatCompletionFunctionTool(fn))
	}
	if len(bytes.TrimSpace(req.JSONSchema)) > 0 {
		if _, err := jsonObject(req.JSONSchema); err != nil {
			return p, agentrunner.Fail(agentrunner.ClassConfig, "openai: JSON schema of the answer: %v", err)
		}
		p.ResponseFormat = oai.ChatCompletionNewParamsResponseFormatUnion{
			OfJSONSchema: &shared.ResponseFormatJSONSchemaParam{
				JSONSchema: shared.ResponseFormatJSONSchemaJSONSchemaParam{
					Name:   schemaName(req.SchemaName),
					Strict: oai.Bool(false),
					Schema: json.RawMessage(bytes.TrimSpace(req.JSONSchema)),
				},
			},
		}
	}
	return p, nil
}

func mapMessage(i int, msg llm.Message) ([]oai.ChatCompletionMessageParamUnion, error) {
	switch msg.Role {
	case llm.User:
		if len(msg.ToolCalls) > 0 {
			return nil, agentrunner.Fail(agentrunner.ClassInternal, "openai: messages[%d]: a user message has tool calls", i)
		}
		if msg.Text == "" && len(msg.ToolResults) == 0 {
			return nil, agentrunner.Fail(agentrunner.ClassInternal, "openai: messages[%d]: empty user message", i)
		}
		var out []oai.ChatCompletionMessageParamUnion
		for j, r := range msg.ToolResults {
			if r.CallID == "" {
				return nil, agentrunner.Fail(agentrunner.ClassInternal, "openai: messages[%d].tool_results[%d]: no call id", i, j)
			}
			out = append(out, oai.ToolMessage(r.Content, r.CallID))
		}
		if msg.Text != "" {
			out = append(out, oai.UserMessage(msg.Text))
		}
		return out, nil
	case llm.Assistant:
		if len(msg.ToolResults) > 0 {
			return nil, agentrunner.Fail(agentrunner.ClassInternal, "openai: messages[%d]: an assistant message has tool results", i)
		}
		var a oai.ChatCompletionAssistantMessageParam
		// Content may be left out only when there are tool calls; an
		// empty turn is sent as "" so the conversation stays well-formed.
		if msg.Text != "" || len(msg.ToolCalls) == 0 {
			a.Content.OfString = oai.String(msg.Text)
		}
		for j, c := range msg.ToolCalls {
			if c.ID == "" || c.Name == "" {
				return nil, agentrunner.Fail(agentrunner.ClassInternal, "openai: messages[%d].tool_calls[%d]: missing id or name", i, j)
			}
			a.ToolCalls = append(a.ToolCalls, oai.ChatCompletionMessageToolCallUnionParam{
				OfFunction: &oai.ChatCompletionMessageFunctionToolCallParam{
					ID: c.ID,
					// The arguments go back as the model sent them, even
					// invalid: the conversation must show what it did.
					Function: oai.ChatCompletionMessageFunctionToolCallFunctionParam{Name: c.Name, Arguments: string(c.Arguments)},
				},
			})
		}
		return []oai.ChatCompletionMessageParamUnion{{OfAssistant: &a}}, nil
	default:
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "openai: messages[%d]: unknown role %q", i, msg.Role)
	}
}

// jsonObject checks that raw is one JSON object and returns its members
// as raw values, so the schema is sent byte for byte (no float rounding).
func jsonObject(raw json.RawMessage) (map[string]any, error) {
	var members map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(raw))
	if err := dec.Decode(&members); err != nil {
		return nil, fmt.Errorf("not a JSON object: %v", err)
	}
	if members == nil || dec.More() {
		return nil, errors.New("not a single JSON object")
	}
	out := make(map[string]any, len(members))
	for k, v := range members {
		out[k] = v
	}
	return out, nil
}

// schemaName makes name fit OpenAI's rule for response-format names; the
// name only labels the schema, so replacing characters is harmless.
func schemaName(name string) string {
	var b strings.Builder
	for _, r := range name {
		if r < 0x80 && (r == '_' || r == '-' || r >= '0' && r <= '9' || r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z') {
			b.WriteRune(r)
		} else {
			b.WriteByte('_')
		}
		if b.Len() == 64 {
			break
		}
	}
	if b.Len() == 0 {
		return "output"
	}
	return b.String()
}
