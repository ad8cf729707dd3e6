-- The loop's operator-set state (pause), one row, changed only by the
-- engine as it consumes commands.
CREATE TABLE control (
    id        INTEGER PRIMARY KEY CHECK (id = 1),
    paused    INTEGER NOT NULL DEFAULT 0,
    paused_by TEXT NOT NULL DEFAULT '',
    paused_at TEXT
);

-- GET /api/errors reads the warnings and errors, newest first.
CREATE INDEX events_problems ON events (id) WHERE level IN ('warn', 'error');
