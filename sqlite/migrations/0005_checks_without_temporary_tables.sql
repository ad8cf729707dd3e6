-- foreign_keys: off
-- The engine writes a cycle, attempts and events on every step. A CHECK
-- of the form x IN (three or more values) builds a temporary b-tree for
-- each row it checks (SQLite turns only lists of up to two values into
-- comparisons), which was a fifth of the store's CPU per step. The checks
-- are now chains of comparisons. SQLite cannot change a CHECK in place, so
-- the three tables are rebuilt as in 0003, keeping every rowid.

CREATE TABLE cycles_new (
    id                  TEXT PRIMARY KEY,
    pipeline            TEXT NOT NULL,
    status              TEXT NOT NULL CHECK (status = 'running' OR status = 'halted' OR status = 'completed'
                                             OR status = 'failed' OR status = 'aborted'),
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
CREATE UNIQUE INDEX cycles_one_unfinished ON cycles (status IN ('running', 'halted'))
    WHERE status IN ('running', 'halted');

CREATE TABLE attempts_new (
    cycle_id      TEXT NOT NULL REFERENCES cycles (id),
    step          TEXT NOT NULL,
    number        INTEGER NOT NULL CHECK (number >= 1),
    agent         TEXT NOT NULL DEFAULT '',
    status        TEXT NOT NULL CHECK (status = 'pending' OR status = 'running' OR status = 'succeeded' OR status = 'failed'),
    error_class   TEXT NOT NULL DEFAULT '',
    error         TEXT NOT NULL DEFAULT '',
    not_before    TEXT,
    started_at    TEXT,
    ended_at      TEXT,
    exit_code     INTEGER,
    output_path   TEXT NOT NULL DEFAULT '',
    dir           TEXT NOT NULL DEFAULT '',
    input_tokens  INTEGER NOT NULL DEFAULT 0,
    output_tokens INTEGER NOT NULL DEFAULT 0,
    cached_tokens INTEGER NOT NULL DEFAULT 0,
    turns         INTEGER NOT NULL DEFAULT 0,
    tool_calls    INTEGER NOT NULL DEFAULT 0,
    retry_base    INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (cycle_id, step, number)
);
INSERT INTO attempts_new (rowid, cycle_id, step, number, agent, status, error_class, error, not_before, started_at,
        ended_at, exit_code, output_path, dir, input_tokens, output_tokens, cached_tokens, turns, tool_calls, retry_base)
    SELECT rowid, cycle_id, step, number, agent, status, error_class, error, not_before, started_at,
        ended_at, exit_code, output_path, dir, input_tokens, output_tokens, cached_tokens, turns, tool_calls, retry_base
    FROM attempts;
DROP TABLE attempts;
ALTER TABLE attempts_new RENAME TO attempts;

CREATE TABLE events_new (
    id         INTEGER PRIMARY KEY,
    timestamp  TEXT NOT NULL,
    event_type TEXT NOT NULL,
    agent      TEXT NOT NULL DEFAULT '',
    step       TEXT NOT NULL DEFAULT '',
    cycle_id   TEXT NOT NULL DEFAULT '',
    level      TEXT NOT NULL CHECK (level = 'debug' OR level = 'info' OR level = 'warn' OR level = 'error'),
    details    TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(details))
);
INSERT INTO events_new (id, timestamp, event_type, agent, step, cycle_id, level, details)
    SELECT id, timestamp, event_type, agent, step, cycle_id, level, details FROM events;
DROP TABLE events;
ALTER TABLE events_new RENAME TO events;
CREATE INDEX events_cycle ON events (cycle_id, id);
CREATE INDEX events_problems ON events (id) WHERE level IN ('warn', 'error');
