package agentrunner

import (
	"context"
	"encoding/json"
	"time"
)

// Conversation is the checkpoint of a model agent's conversation in one
// visit of a step of a run (spec 4: the lead's conversation is
// checkpointed after every turn, the tool calls it made and their results
// included), so an attempt that dies is resumed by the next from its last
// completed turn: the model is not asked again for turns it answered, and
// tools that ran do not run again.
type Conversation struct {
	RunID string
	Step  string
	Visit int
	// Attempt is the attempt that saved it.
	Attempt int
	// Turns is the number of model turns the messages hold; 0 means there
	// is nothing to resume (a conversation the next attempt starts over).
	Turns int
	// Messages is the conversation as the model runtime keeps it: its
	// messages as a JSON array.
	Messages json.RawMessage
	SavedAt  time.Time
}

// ConversationStore keeps the model agents' conversations, one per run,
// step and visit.
type ConversationStore interface {
	// SaveConversation stores c, replacing the conversation of its run,
	// step and visit.
	SaveConversation(ctx context.Context, c *Conversation) error
	// Conversation returns the conversation of a run's step in a visit;
	// ENOTFOUND when none was saved.
	Conversation(ctx context.Context, runID, step string, visit int) (*Conversation, error)
}
