-- foreign_keys: off
-- A run may end incomplete: a loop reached its cap with on_cap end before
-- the run reached its end (spec 2's iteration cap). SQLite cannot change a
-- CHECK in place, so the table is rebuilt as in 0008, with every index it
-- had, and foreign keys checked before the commit.
CREATE TABLE runs_new (
    id                  TEXT PRIMARY KEY,
    pipeline            TEXT NOT NULL,
    status              TEXT NOT NULL CHECK (status = 'queued' OR status = 'running' OR status = 'halted'
                                             OR status = 'completed' OR status = 'failed' OR status = 'aborted'
                                             OR status = 'incomplete'),
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
INSERT INTO runs_new SELECT id, pipeline, status, step, last_completed_step, dir, started_at, ended_at, error, inputs, parent, serial FROM runs;
DROP TABLE runs;
ALTER TABLE runs_new RENAME TO runs;

CREATE UNIQUE INDEX runs_one_unfinished_serial ON runs (pipeline)
    WHERE serial = 1 AND status IN ('running', 'halted');
CREATE INDEX runs_status ON runs (status, id);
CREATE INDEX runs_pipeline ON runs (pipeline, id);
CREATE INDEX runs_pipeline_status ON runs (pipeline, status, id);
CREATE INDEX runs_unfinished ON runs (id) WHERE status = 'queued' OR status = 'running' OR status = 'halted';
CREATE INDEX runs_unfinished_counts ON runs (pipeline, status) WHERE status = 'queued' OR status = 'running' OR status = 'halted';
CREATE INDEX runs_ended ON runs (ended_at) WHERE ended_at IS NOT NULL;
