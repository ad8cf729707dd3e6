-- The durable state of one workspace. Times are UTC text in a fixed-width
-- RFC 3339 form, so they sort as they read.

CREATE TABLE cycles (
    id                  TEXT PRIMARY KEY,
    pipeline            TEXT NOT NULL,
    status              TEXT NOT NULL CHECK (status IN ('running', 'completed', 'failed')),
    step                TEXT NOT NULL DEFAULT '',
    last_completed_step TEXT NOT NULL DEFAULT '',
    dir                 TEXT NOT NULL,
    started_at          TEXT NOT NULL,
    ended_at            TEXT,
    error               TEXT NOT NULL DEFAULT ''
) WITHOUT ROWID;

-- At most one cycle runs at a time in a workspace.
CREATE UNIQUE INDEX cycles_one_running ON cycles (status) WHERE status = 'running';

CREATE TABLE attempts (
    cycle_id    TEXT NOT NULL REFERENCES cycles (id),
    step        TEXT NOT NULL,
    number      INTEGER NOT NULL CHECK (number >= 1),
    agent       TEXT NOT NULL DEFAULT '',
    status      TEXT NOT NULL CHECK (status IN ('pending', 'running', 'succeeded', 'failed')),
    error_class TEXT NOT NULL DEFAULT '',
    error       TEXT NOT NULL DEFAULT '',
    not_before  TEXT,
    started_at  TEXT,
    ended_at    TEXT,
    exit_code   INTEGER,
    output_path TEXT NOT NULL DEFAULT '',
    dir         TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (cycle_id, step, number)
);

-- The event log of FR-057. Ids only grow: events are pruned from the
-- oldest, so the newest id is never freed for reuse (and no AUTOINCREMENT
-- bookkeeping is written on every commit).
CREATE TABLE events (
    id         INTEGER PRIMARY KEY,
    timestamp  TEXT NOT NULL,
    event_type TEXT NOT NULL,
    agent      TEXT NOT NULL DEFAULT '',
    step       TEXT NOT NULL DEFAULT '',
    cycle_id   TEXT NOT NULL DEFAULT '',
    level      TEXT NOT NULL CHECK (level IN ('debug', 'info', 'warn', 'error')),
    details    TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(details))
);

CREATE INDEX events_cycle ON events (cycle_id, id);

-- Side effects outside the process, committed with the change that causes
-- them and delivered afterwards with key as idempotency key.
CREATE TABLE outbox (
    key          TEXT PRIMARY KEY,
    kind         TEXT NOT NULL,
    cycle_id     TEXT NOT NULL DEFAULT '',
    payload      BLOB NOT NULL,
    created_at   TEXT NOT NULL,
    delivered_at TEXT,
    response     BLOB,
    attempts     INTEGER NOT NULL DEFAULT 0,
    last_error   TEXT NOT NULL DEFAULT ''
);
