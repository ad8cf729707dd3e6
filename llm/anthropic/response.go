package anthropic

import (
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	sdk "github.com/anthropics/anthropic-sdk-go"

	"github.com/agentrunner/agentrunner/internal/clip"
	"github.com/agentrunner/agentrunner/llm"
)

// convertResponse maps a message to an llm.Response; an error says what is
// malformed about it.
//
// An empty content list is not malformed: the API answers so when the model
// has nothing to add (typically after tool results), and the runtime deals
// with an empty answer. Blocks of types the runtime has no use for
// (thinking, and server tools this adapter never enables) are skipped.
func convertResponse(msg *sdk.Message) (*llm.Response, error) {
	if msg == nil {
		return nil, errors.New("no message")
	}
	if !msg.JSON.Content.Valid() {
		return nil, errors.New("no content list")
	}
	if !msg.JSON.Usage.Valid() {
		return nil, errors.New("no usage")
	}
	var resp llm.Response
	var text strings.Builder
	for i, b := range msg.Content {
		switch b.Type {
		case "text":
			text.WriteString(b.Text)
		case "tool_use":
			if b.ID == "" || b.Name == "" {
				return nil, fmt.Errorf("content block %d: a tool_use block without id or name", i)
			}
			if !json.Valid(b.Input) {
				return nil, fmt.Errorf("content block %d: tool_use %q has no valid JSON input", i, b.Name)
			}
			args := make(json.RawMessage, len(b.Input))
			copy(args, b.Input)
			resp.ToolCalls = append(resp.ToolCalls, llm.ToolCall{ID: b.ID, Name: b.Name, Arguments: args})
		case "":
			return nil, fmt.Errorf("content block %d has no type", i)
		}
	}
	resp.Text = text.String()

	switch msg.StopReason {
	case sdk.StopReasonEndTurn, sdk.StopReasonStopSequence:
		resp.StopReason = llm.StopEnd
	case sdk.StopReasonToolUse:
		if len(resp.ToolCalls) == 0 {
			return nil, errors.New("stop_reason tool_use without a tool_use block")
		}
		resp.StopReason = llm.StopToolUse
	case sdk.StopReasonMaxTokens, sdk.StopReasonModelContextWindowExceeded:
		// Both cut the answer short; the runtime treats them alike.
		resp.StopReason = llm.StopMaxTokens
	case "":
		return nil, errors.New("no stop_reason")
	default:
		// refusal, pause_turn (server tools only) or a reason newer than
		// this adapter: the turn ended without a cut, and the runtime
		// judges the answer, so it counts as an answer unless it asks for
		// tools.
		resp.StopReason = llm.StopEnd
		if len(resp.ToolCalls) > 0 {
			resp.StopReason = llm.StopToolUse
		}
	}

	// Anthropic's input_tokens leaves out the tokens read from and written
	// to the prompt cache; they are added back so InputTokens is the whole
	// prompt, as OpenAI reports it, and budgets count alike for both.
	u := msg.Usage
	if u.InputTokens < 0 || u.OutputTokens < 0 || u.CacheReadInputTokens < 0 || u.CacheCreationInputTokens < 0 {
		return nil, fmt.Errorf("negative token counts in usage %s", clip.String(u.RawJSON(), 200))
	}
	resp.Usage = llm.Usage{
		InputTokens:  int(u.InputTokens + u.CacheReadInputTokens + u.CacheCreationInputTokens),
		OutputTokens: int(u.OutputTokens),
		CachedTokens: int(u.CacheReadInputTokens),
	}
	return &resp, nil
}
