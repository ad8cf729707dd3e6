package model

import (
	"context"
	"encoding/json"
	"time"

	"github.com/agentrunner/agentrunner"
	"github.com/agentrunner/agentrunner/llm"
)

// Checkpoint makes the runtime save each attempt's conversation in store
// after every completed turn (spec 4: the lead's conversation is
// checkpointed after every turn, the tool calls it made and their results
// included), and resume a later attempt of the same run, step and visit
// from it: the model is not asked again for the turns it answered, and
// the tools that ran do not run again. It returns r.
//
// A save that fails fails the attempt (ClassInternal): the store is the
// truth, and an attempt that went on would run tools a crash would run
// again.
func (r *Runtime) Checkpoint(store agentrunner.ConversationStore) *Runtime {
	r.conversations = store
	return r
}

// The shape of the saved messages: the store's own, whatever llm's types
// become. Arguments are kept as the model sent them, valid JSON or not.
type (
	savedMessage struct {
		Role        llm.Role      `json:"role"`
		Text        string        `json:"text,omitempty"`
		ToolCalls   []savedCall   `json:"tool_calls,omitempty"`
		ToolResults []savedResult `json:"tool_results,omitempty"`
	}
	savedCall struct {
		ID        string `json:"id"`
		Name      string `json:"name"`
		Arguments string `json:"arguments"`
	}
	savedResult struct {
		CallID  string `json:"call_id"`
		Content string `json:"content"`
		IsError bool   `json:"is_error,omitempty"`
	}
)

func encodeMessages(msgs []llm.Message) (json.RawMessage, error) {
	out := make([]savedMessage, len(msgs))
	for i, m := range msgs {
		out[i] = savedMessage{Role: m.Role, Text: m.Text}
		for _, c := range m.ToolCalls {
			out[i].ToolCalls = append(out[i].ToolCalls, savedCall{ID: c.ID, Name: c.Name, Arguments: string(c.Arguments)})
		}
		for _, r := range m.ToolResults {
			out[i].ToolResults = append(out[i].ToolResults, savedResult{CallID: r.CallID, Content: r.Content, IsError: r.IsError})
		}
	}
	return json.Marshal(out)
}

func decodeMessages(data json.RawMessage) ([]llm.Message, error) {
	var in []savedMessage
	if err := json.Unmarshal(data, &in); err != nil {
		return nil, err
	}
	out := make([]llm.Message, len(in))
	for i, m := range in {
		out[i] = llm.Message{Role: m.Role, Text: m.Text}
		for _, c := range m.ToolCalls {
			call := llm.ToolCall{ID: c.ID, Name: c.Name}
			if c.Arguments != "" {
				call.Arguments = json.RawMessage(c.Arguments)
			}
			out[i].ToolCalls = append(out[i].ToolCalls, call)
		}
		for _, r := range m.ToolResults {
			out[i].ToolResults = append(out[i].ToolResults, llm.ToolResult{CallID: r.CallID, Content: r.Content, IsError: r.IsError})
		}
	}
	return out, nil
}

// checkpoint saves the conversation after its turn turns.
func (c *conversation) checkpoint(ctx context.Context, turns int) error {
	store := c.rt.conversations
	if store == nil {
		return nil
	}
	msgs, err := encodeMessages(c.msgs)
	if err != nil {
		return agentrunner.Fail(agentrunner.ClassInternal, "checkpoint the conversation after turn %d: %v", turns, err)
	}
	if err := c.save(ctx, turns, msgs); err != nil {
		return agentrunner.Fail(agentrunner.ClassInternal, "checkpoint the conversation after turn %d: %v", turns, err)
	}
	c.saved = true
	return nil
}

func (c *conversation) save(ctx context.Context, turns int, msgs json.RawMessage) error {
	inv := c.inv
	return c.rt.conversations.SaveConversation(ctx, &agentrunner.Conversation{
		RunID: inv.CycleID, Step: inv.Step, Visit: inv.Visit, Attempt: inv.Attempt,
		Turns: turns, Messages: msgs, SavedAt: time.Now(),
	})
}

// forget leaves a conversation that ended in a failure no later attempt
// gets past by resuming it (no answer within max_turns, a spent budget):
// the next attempt starts over. A failure to forget it is not the
// attempt's: the next attempt checks what it resumes all the same.
func (c *conversation) forget(ctx context.Context, err error) {
	if c.rt.conversations == nil || !c.saved {
		return
	}
	switch agentrunner.ClassOf(err) {
	case agentrunner.ClassInvalidOutput, agentrunner.ClassBudget, agentrunner.ClassConfig:
		c.save(context.WithoutCancel(ctx), 0, json.RawMessage("[]"))
	}
}

// resumed is where a resumed conversation is.
type resumed struct {
	// turns the model answered, repairs asked for.
	turns, repairs int
	// answer is the final answer the conversation ended with, when it did:
	// an attempt ended after it, before the engine took it.
	answer string
}

// resume restores the conversation a previous attempt of the same run,
// step and visit saved; nil when there is none to resume, and the attempt
// starts over. A conversation that can go nowhere is not resumed: one
// whose turns reach max_turns, or that ended in an answer that breaks the
// contract.
func (c *conversation) resume(ctx context.Context) (*resumed, error) {
	inv, store := c.inv, c.rt.conversations
	if store == nil || inv.Attempt <= 1 {
		return nil, nil
	}
	saved, err := store.Conversation(ctx, inv.CycleID, inv.Step, inv.Visit)
	switch {
	case agentrunner.ErrorCode(err) == agentrunner.ENOTFOUND:
		return nil, nil
	case err != nil:
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "load the conversation to resume: %v", err)
	case saved.Turns == 0 || saved.Attempt > inv.Attempt:
		return nil, nil
	}
	msgs, err := decodeMessages(saved.Messages)
	if err != nil {
		return nil, agentrunner.Fail(agentrunner.ClassInternal, "the conversation saved by attempt %d: %v", saved.Attempt, err)
	}
	if len(msgs) < 2 || msgs[0].Role != llm.User {
		return nil, nil
	}
	// The counters are the conversation's: its turns, the tool calls
	// run against the budget and the repairs asked for.
	var at resumed
	called, budget := 0, inv.Model.ToolBudget
	for i, m := range msgs {
		if m.Role != llm.Assistant {
			continue
		}
		at.turns++
		switch {
		case len(m.ToolCalls) > 0 && budget > 0:
			called += min(len(m.ToolCalls), max(budget-called, 0))
		case len(m.ToolCalls) > 0:
			called += len(m.ToolCalls)
		case i < len(msgs)-1:
			at.repairs++
		}
	}
	last := msgs[len(msgs)-1]
	switch {
	case at.turns >= inv.Model.MaxTurns && last.Role != llm.Assistant:
		return nil, nil
	case last.Role == llm.Assistant && len(last.ToolCalls) > 0:
		return nil, nil // not a completed turn: never saved so
	case last.Role == llm.Assistant:
		at.answer = unfence(last.Text)
		if len(c.check(at.answer, llm.StopEnd)) > 0 {
			return nil, nil
		}
	}
	c.msgs, c.called, c.saved = msgs, called, true
	return &at, nil
}
