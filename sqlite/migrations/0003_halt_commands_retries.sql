-- foreign_keys: off
-- Cycles may now be halted (waiting for an operator) or aborted. SQLite
-- cannot change a CHECK constraint in place, so the table is rebuilt, with
-- foreign keys off for the rebuild and checked before the commit.

CREATE TABLE cycles_new (
    id                  TEXT PRIMARY KEY,
    pipeline            TEXT NOT NULL,
    status              TEXT NOT NULL CHECK (status IN ('running', 'halted', 'completed', 'failed', 'aborted')),
    step                TEXT NOT NULL DEFAULT '',
    last_completed_step TEXT NOT NULL DEFAULT '',
    dir                 TEXT NOT NULL,
    started_at          TEXT NOT NULL,
    ended_at            TEXT,
    error               TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;

INSERT INTO cycles_new (id, pipeline, status, step, last_completed_step, dir, started_at, ended_at, error)
    SELECT id, pipeline, status, step, last_completed_step, dir, started_at, ended_at, error FROM cycles;
DROP TABLE cycles;
ALTER TABLE cycles_new RENAME TO cycles;

-- At most one unfinished (running or halted) cycle in a workspace.
CREATE UNIQUE INDEX cycles_one_unfinished ON cycles (status IN ('running', 'halted'))
    WHERE status IN ('running', 'halted');

-- Operators' orders, consumed by the engine exactly once.
CREATE TABLE commands (
    id          INTEGER PRIMARY KEY,
    kind        TEXT NOT NULL,
    args        TEXT NOT NULL DEFAULT '{}',
    operator    TEXT NOT NULL DEFAULT '',
    created_at  TEXT NOT NULL,
    consumed_at TEXT,
    result      TEXT NOT NULL DEFAULT ''
);
CREATE INDEX commands_pending ON commands (id) WHERE consumed_at IS NULL;

-- When an undelivered outbox message is tried again.
ALTER TABLE outbox ADD COLUMN next_attempt_at TEXT;
CREATE INDEX outbox_due ON outbox (next_attempt_at) WHERE delivered_at IS NULL;

-- Retries are counted from this attempt number: an operator's resume gives
-- a step a new round of retries.
ALTER TABLE attempts ADD COLUMN retry_base INTEGER NOT NULL DEFAULT 0;
