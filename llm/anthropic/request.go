package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"
	"github.com/anthropics/anthropic-sdk-go/packages/param"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/llm"
)

// buildParams maps a request to the API. A problem of the configuration
// (model, temperature, tools, schema) is ClassConfig; a conversation the
// runtime should never have built is ClassInternal.
func buildParams(req *llm.Request) (sdk.MessageNewParams, error) {
	var p sdk.MessageNewParams
	if strings.TrimSpace(req.Model) == "" {
		return p, agentrunner.Fail(agentrunner.ClassConfig, "anthropic: no model given")
	}
	p.Model = sdk.Model(req.Model)

	switch {
	case req.MaxTokens == 0:
		p.MaxTokens = DefaultMaxTokens
	case req.MaxTokens < 0:
		return p, agentrunner.Fail(agentrunner.ClassConfig, "anthropic: max_tokens %d is negative", req.MaxTokens)
	default:
		p.MaxTokens = int64(req.MaxTokens)
	}

	if t := req.Temperature; t != nil {
		if math.IsNaN(*t) || *t < 0 || *t > 1 {
			return p, agentrunner.Fail(agentrunner.ClassConfig, "anthropic: temperature %v is outside the API's range [0, 1]", *t)
		}
		p.Temperature = param.NewOpt(*t)
	}

	system := req.System
	if len(req.JSONSchema) > 0 {
		instr, err := schemaInstruction(req.JSONSchema, req.SchemaName)
		if err != nil {
			return p, err
		}
		if strings.TrimSpace(system) != "" {
			system += "\n\n"
		}
		system += instr
	}
	// The API rejects a text block of whitespace only.
	if strings.TrimSpace(system) != "" {
		p.System = []sdk.TextBlockParam{{Text: system}}
	}

	tools, err := buildTools(req.Tools)
	if err != nil {
		return p, err
	}
	p.Tools = tools

	msgs, err := buildMessages(req.Messages)
	if err != nil {
		return p, err
	}
	p.Messages = msgs
	return p, nil
}

// schemaInstruction emulates structured output, which this adapter does
// not ask of the API: the Messages API's own JSON-schema output format is
// limited to some models and to a subset of JSON Schema, and gateways that
// speak the Anthropic protocol may lack it. Instead the system prompt ends
// with the schema; the runtime validates the answer against it anyway and
// asks for a repair when it does not match.
func schemaInstruction(schema json.RawMessage, name string) (string, error) {
	var buf bytes.Buffer
	if err := json.Compact(&buf, schema); err != nil {
		return "", agentrunner.Fail(agentrunner.ClassConfig, "anthropic: the JSON schema of the answer is not valid JSON: %v", err)
	}
	what := "this schema"
	if name != "" {
		what = fmt.Sprintf("this schema (%s)", name)
	}
	return fmt.Sprintf("Answer with one JSON document matching %s, and nothing else: no prose, no code fence.\n%s", what, buf.String()), nil
}

// buildTools maps tool specs; each schema is sent verbatim, with type
// object added when it has no type, as the API requires one.
func buildTools(specs []llm.ToolSpec) ([]sdk.ToolUnionParam, error) {
	var tools []sdk.ToolUnionParam
	seen := map[string]bool{}
	for i, s := range specs {
		if s.Name == "" {
			return nil, agentrunner.Fail(agentrunner.ClassConfig, "anthropic: tool %d has no name", i)
		}
		if seen[s.Name] {
			return nil, agentrunner.Fail(agentrunner.ClassConfig, "anthropic: tool %q is offered twice", s.Name)
		}
		seen[s.Name] = true
		schema, err := inputSchema(s.Parameters)
		if err != nil {
			return nil, agentrunner.Fail(agentrunner.ClassConfig, "anthropic: tool %q: parameters: %v", s.Name, err)
		}
		tool := sdk.ToolParam{
			Name:        s.Name,
			InputSchema: param.Override[sdk.ToolInputSchemaParam](schema),
		}
		if s.Description != "" {
			tool.Description = param.NewOpt(s.Description)
		}
		tools = append(tools, sdk.ToolUnionParam{OfTool: &tool})
	}
	return tools, nil
}

// inputSchema returns the JSON Schema of a tool's arguments as the API
// wants it: an object schema.
func inputSchema(raw json.RawMessage) (json.RawMessage, error) {
	if len(bytes.TrimSpace(raw)) == 0 {
		return json.RawMessage(`{"type":"object","properties":{}}`), nil
	}
	var obj map[string]json.RawMessage
	if err := json.Unmarshal(raw, &obj); err != nil || obj == nil {
		return nil, fmt.Errorf("not a JSON object")
	}
	t, ok := obj["type"]
	if !ok {
		obj["type"] = json.RawMessage(`"object"`)
		return json.Marshal(obj)
	}
	var typ string
	if json.Unmarshal(t, &typ) != nil || typ != "object" {
		return nil, fmt.Errorf("type is %s: the API takes object schemas only", t)
	}
	return raw, nil
}

// buildMessages maps the conversation. The API wants alternating turns, so
// consecutive messages of one role (tool results, then a repair request)
// become one turn. A message with nothing to send (an empty answer the
// runtime echoes back) is left out, as the API rejects empty content.
func buildMessages(msgs []llm.Message) ([]sdk.MessageParam, error) {
	var out []sdk.MessageParam
	for i, m := range msgs {
		var blocks []sdk.ContentBlockParamUnion
		var role sdk.MessageParamRole
		switch m.Role {
		case llm.User:
			role = sdk.MessageParamRoleUser
			if len(m.ToolCalls) > 0 {
				return nil, agentrunner.Fail(agentrunner.ClassInternal, "anthropic: message %d: a user message with tool calls", i)
			}
			for j, r := range m.ToolResults {
				if r.CallID == "" {
					return nil, agentrunner.Fail(agentrunner.ClassInternal, "anthropic: message %d: tool result %d answers no call id", i, j)
				}
				blocks = append(blocks, toolResult(r))
			}
			if strings.TrimSpace(m.Text) != "" {
				blocks = append(blocks, sdk.NewTextBlock(m.Text))
			}
		case llm.Assistant:
			role = sdk.MessageParamRoleAssistant
			if len(m.ToolResults) > 0 {
				return nil, agentrunner.Fail(agentrunner.ClassInternal, "anthropic: message %d: an assistant message with tool results", i)
			}
			if strings.TrimSpace(m.Text) != "" {
				blocks = append(blocks, sdk.NewTextBlock(m.Text))
			}
			for j, c := range m.ToolCalls {
				if c.ID == "" || c.Name == "" {
					return nil, agentrunner.Fail(agentrunner.ClassInternal, "anthropic: message %d: tool call %d has no id or no name", i, j)
				}
				blocks = append(blocks, sdk.NewToolUseBlock(c.ID, toolInput(c.Arguments), c.Name))
			}
		default:
			return nil, agentrunner.Fail(agentrunner.ClassInternal, "anthropic: message %d: unknown role %q", i, m.Role)
		}
		if len(blocks) == 0 {
			continue
		}
		if n := len(out); n > 0 && out[n-1].Role == role {
			out[n-1].Content = append(out[n-1].Content, blocks...)
			continue
		}
		out = append(out, sdk.MessageParam{Role: role, Content: blocks})
	}
	if len(out) == 0 {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "anthropic: the conversation has no message with content")
	}
	for i := range out {
		if out[i].Role == sdk.MessageParamRoleUser {
			out[i].Content = resultsFirst(out[i].Content)
		}
	}
	return out, nil
}

// resultsFirst moves tool_result blocks before the other blocks of a user
// turn, keeping the order within each kind: the API wants the results
// first, and merging a repair text with the next turn's results could
// otherwise put text ahead of them.
func resultsFirst(blocks []sdk.ContentBlockParamUnion) []sdk.ContentBlockParamUnion {
	sorted := make([]sdk.ContentBlockParamUnion, 0, len(blocks))
	for _, b := range blocks {
		if b.OfToolResult != nil {
			sorted = append(sorted, b)
		}
	}
	for _, b := range blocks {
		if b.OfToolResult == nil {
			sorted = append(sorted, b)
		}
	}
	return sorted
}

func toolResult(r llm.ToolResult) sdk.ContentBlockParamUnion {
	block := sdk.ToolResultBlockParam{ToolUseID: r.CallID}
	// The API rejects an empty text block; a result without content is
	// sent without one.
	if r.Content != "" {
		block.Content = []sdk.ToolResultBlockParamContentUnion{{OfText: &sdk.TextBlockParam{Text: r.Content}}}
	}
	if r.IsError {
		block.IsError = param.NewOpt(true)
	}
	return sdk.ContentBlockParamUnion{OfToolResult: &block}
}

// toolInput returns the arguments of an earlier tool call as the API takes
// them. The API requires a JSON object; when the model's arguments were not
// one (invalid JSON, which the runtime answered with an error result), {}
// is sent instead: the conversation stays valid and the model still sees
// the error the runtime gave it.
func toolInput(args json.RawMessage) json.RawMessage {
	var obj map[string]json.RawMessage
	if json.Unmarshal(args, &obj) != nil || obj == nil {
		return json.RawMessage(`{}`)
	}
	return args
}
