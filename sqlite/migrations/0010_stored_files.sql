-- The store's copies of what step runs wrote: artifacts, prompts and
-- validation reports, committed with the step run's outcome in the same
-- transaction. The files in the run and attempt directories are views of
-- these rows, written without an fsync and rewritten from them when a
-- crash left them stale. A step run visited again, or an attempt run
-- again, adds a row: the newest row of a run, kind and name is the
-- current one.
CREATE TABLE files (
    id         INTEGER PRIMARY KEY,
    run_id     TEXT NOT NULL,
    step       TEXT NOT NULL,
    visit      INTEGER NOT NULL CHECK (visit >= 1),
    attempt    INTEGER NOT NULL CHECK (attempt >= 1),
    -- A chain of comparisons, not IN (...): see 0005.
    kind       TEXT NOT NULL CHECK (kind = 'artifact' OR kind = 'prompt' OR kind = 'validation'),
    name       TEXT NOT NULL CHECK (name <> ''),
    sha256     TEXT NOT NULL,
    size       INTEGER NOT NULL,
    created_at TEXT NOT NULL,
    -- Last: a listing reads the columns before it without walking the
    -- overflow pages of a large artifact.
    data       BLOB NOT NULL
);
-- Also the files of an attempt (an operator reading the prompt it saw):
-- the run and the kind, then a few per step. A second index of every
-- file would cost each step's commit one more page.
CREATE INDEX files_by_run ON files (run_id, kind, name, id);

-- At start the runner checks the views of the runs that ended last (a
-- crash may have lost them): found by their end, not by a scan.
CREATE INDEX runs_ended ON runs (ended_at) WHERE ended_at IS NOT NULL;
