package sqlite

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"

	"github.com/agentrunner/agentrunner"
)

var _ agentrunner.ConversationStore = (*Store)(nil)

// The statements of the model agents' conversations.
const (
	conversationColumns = `run_id, step, visit, attempt, turns, messages, saved_at`
	sqlSaveConversation = `INSERT INTO conversations (` + conversationColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (run_id, step, visit) DO UPDATE SET attempt = excluded.attempt, turns = excluded.turns,
messages = excluded.messages, saved_at = excluded.saved_at`
	sqlConversation = `SELECT ` + conversationColumns + ` FROM conversations WHERE run_id = ? AND step = ? AND visit = ?`
)

// SaveConversation stores a conversation, replacing the one of its run,
// step and visit.
func (s *Store) SaveConversation(ctx context.Context, c *agentrunner.Conversation) error {
	what := fmt.Sprintf("the conversation of step %q of run %q (visit %d)", c.Step, c.RunID, c.Visit)
	messages := c.Messages
	if len(messages) == 0 {
		messages = json.RawMessage("[]")
	}
	switch {
	case c.RunID == "" || c.Step == "":
		return agentrunner.Errorf(agentrunner.EINVALID, "a conversation needs the run and the step it belongs to")
	case c.Visit < 0 || c.Attempt < 0 || c.Turns < 0:
		return agentrunner.Errorf(agentrunner.EINVALID, "%s: visit, attempt and turns are 0 or more", what)
	case c.SavedAt.IsZero():
		return agentrunner.Errorf(agentrunner.EINVALID, "%s: a save time is required", what)
	case !json.Valid(messages) || messages[0] != '[':
		return agentrunner.Errorf(agentrunner.EINVALID, "%s: the messages are not a JSON array", what)
	}
	return s.inTx(ctx, func(ctx context.Context, w *writer) (bool, error) {
		if _, err := w.exec(ctx, sqlSaveConversation, c.RunID, c.Step, c.Visit, c.Attempt, c.Turns, string(messages), encodeTime(c.SavedAt)); err != nil {
			return false, translate(err, what, "")
		}
		return true, nil
	})
}

// Conversation returns the conversation of a run's step in a visit.
func (s *Store) Conversation(ctx context.Context, runID, step string, visit int) (*agentrunner.Conversation, error) {
	var c agentrunner.Conversation
	var messages string
	var saved sql.NullString
	err := s.read.QueryRowContext(ctx, sqlConversation, runID, step, visit).Scan(
		&c.RunID, &c.Step, &c.Visit, &c.Attempt, &c.Turns, &messages, &saved)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, agentrunner.Errorf(agentrunner.ENOTFOUND, "step %q of run %q has no conversation in visit %d", step, runID, visit)
	}
	if err != nil {
		return nil, err
	}
	if c.SavedAt, err = decodeTime(saved); err != nil {
		return nil, err
	}
	c.Messages = json.RawMessage(messages)
	return &c, nil
}
