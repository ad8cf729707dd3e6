-- foreign_keys: off
-- A cycle is a run: every run of every pipeline lives in runs, with its
-- inputs, the run that started it and whether its pipeline is serial (at
-- most one unfinished run at a time, as the learning loop's cycles, which
-- are all serial). A step run is one visit of one step in one run.
--
-- Renaming cycles first makes SQLite point the attempts' foreign key at
-- runs; the table is then rebuilt as in 0003 for its new CHECK, with
-- foreign keys off for the rebuild and checked before the commit.
ALTER TABLE cycles RENAME TO runs;

CREATE TABLE runs_new (
    id                  TEXT PRIMARY KEY,
    pipeline            TEXT NOT NULL,
    status              TEXT NOT NULL CHECK (status = 'queued' OR status = 'running' OR status = 'halted'
                                             OR status = 'completed' OR status = 'failed' OR status = 'aborted'),
    step                TEXT NOT NULL DEFAULT '',
    last_completed_step TEXT NOT NULL DEFAULT '',
    dir                 TEXT NOT NULL,
    started_at          TEXT NOT NULL,
    ended_at            TEXT,
    error               TEXT NOT NULL DEFAULT '',
    inputs              TEXT NOT NULL DEFAULT '{}' CHECK (json_valid(inputs)),
    parent              TEXT NOT NULL DEFAULT '',
    serial              INTEGER NOT NULL DEFAULT 0 CHECK (serial = 0 OR serial = 1)
) WITHOUT ROWID;
INSERT INTO runs_new (id, pipeline, status, step, last_completed_step, dir, started_at, ended_at, error, serial)
    SELECT id, pipeline, status, step, last_completed_step, dir, started_at, ended_at, error, 1 FROM runs;
DROP TABLE runs;
ALTER TABLE runs_new RENAME TO runs;

-- At most one unfinished (running or halted) run of a serial pipeline;
-- other pipelines have many runs in flight.
CREATE UNIQUE INDEX runs_one_unfinished_serial ON runs (pipeline)
    WHERE serial = 1 AND status IN ('running', 'halted');
-- GET /api/cycles?status=: the runs of one status, newest first.
CREATE INDEX runs_status ON runs (status, id);
-- The runs of one pipeline, newest first, of any status or of one.
CREATE INDEX runs_pipeline ON runs (pipeline, id);
CREATE INDEX runs_pipeline_status ON runs (pipeline, status, id);
-- The runs a restart picks up (queued, running, halted). The condition is
-- repeated, word for word, in the queries that use the index
-- (sqlUnfinishedRun).
CREATE INDEX runs_unfinished ON runs (id) WHERE status = 'queued' OR status = 'running' OR status = 'halted';

-- The step run an attempt belongs to: the how-manieth visit of its step.
ALTER TABLE attempts ADD COLUMN visit INTEGER NOT NULL DEFAULT 1 CHECK (visit >= 1);

CREATE TABLE step_runs (
    run_id    TEXT NOT NULL REFERENCES runs (id),
    step      TEXT NOT NULL,
    visit     INTEGER NOT NULL CHECK (visit >= 1),
    status    TEXT NOT NULL CHECK (status = 'joining' OR status = 'open' OR status = 'waiting'
                                   OR status = 'succeeded' OR status = 'failed' OR status = 'canceled'),
    -- The step run that opened this one, "step#visit".
    from_key  TEXT NOT NULL DEFAULT '',
    -- The steps whose branches reached a join so far, a JSON array.
    arrived   TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(arrived)),
    label     TEXT NOT NULL DEFAULT '',
    output    TEXT NOT NULL DEFAULT '',
    opened_at TEXT,
    ended_at  TEXT,
    error     TEXT NOT NULL DEFAULT '',
    -- A gate's decision, a JSON object, once made.
    decision  TEXT CHECK (decision IS NULL OR json_valid(decision)),
    PRIMARY KEY (run_id, step, visit)
);
-- The step runs of one status in the order they were opened: the open,
-- waiting and joining ones a restart picks up.
CREATE INDEX step_runs_status ON step_runs (status);

-- What a one-decision command decides ("run/step#visit" of a gate): a
-- second decision on one gate is refused.
ALTER TABLE commands ADD COLUMN target TEXT NOT NULL DEFAULT '';
CREATE UNIQUE INDEX commands_one_decision ON commands (kind, target) WHERE target <> '';
