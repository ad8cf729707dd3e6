package sqlite

import (
	"context"
	"database/sql"
	"errors"
	"time"

	"github.com/agentrunner/agentrunner"
)

var _ agentrunner.SessionStore = (*Store)(nil)

// The statements of the ended sessions.
const (
	sqlEndSession      = `INSERT OR REPLACE INTO ended_sessions (id, expires) VALUES (?, ?)`
	sqlDropEndedBefore = `DELETE FROM ended_sessions WHERE expires < ?`
	sqlSessionEnded    = `SELECT 1 FROM ended_sessions WHERE id = ?`
)

// EndSession records the session id as ended until expires, and drops the
// records of sessions expired by now, in one transaction.
func (s *Store) EndSession(ctx context.Context, id string, expires, now time.Time) error {
	if id == "" || expires.IsZero() {
		return agentrunner.Errorf(agentrunner.EINVALID, "an ended session needs its id and its expiry")
	}
	return s.inTx(ctx, func(ctx context.Context, w *writer) (bool, error) {
		if _, err := w.exec(ctx, sqlDropEndedBefore, encodeTime(now)); err != nil {
			return false, translate(err, "drop the expired ended sessions", "")
		}
		if _, err := w.exec(ctx, sqlEndSession, id, encodeTime(expires)); err != nil {
			return false, translate(err, "end a session", "")
		}
		return true, nil
	})
}

// SessionEnded reports whether the session id was ended.
func (s *Store) SessionEnded(ctx context.Context, id string) (bool, error) {
	var one int
	err := s.read.QueryRowContext(ctx, sqlSessionEnded, id).Scan(&one)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return false, nil
	case err != nil:
		return false, translate(err, "read an ended session", "")
	}
	return true, nil
}
