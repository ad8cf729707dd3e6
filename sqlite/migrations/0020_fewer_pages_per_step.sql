-- Three indexes written by every step's commit, each a page of its
-- write-ahead log, served reads that are rare (an hourly prune, a filter
-- by time, a count of gates). They go; each read keeps an index of its own
-- that a step does not write.

-- A filter of events by time: the first id of each minute's events, one
-- row a minute, where events_time held a row per event. Ids follow
-- commits: every event at or after a time has an id at or above the
-- first id of some minute at or after the time's minute (its own), so a
-- walk by id from the smallest of those finds them all.
DROP INDEX events_time;
CREATE TABLE event_minutes (
    minute   TEXT PRIMARY KEY, -- "2006-01-02T15:04", UTC
    first_id INTEGER NOT NULL
) WITHOUT ROWID;
INSERT INTO event_minutes (minute, first_id)
    SELECT substr(timestamp, 1, 16), MIN(id) FROM events GROUP BY substr(timestamp, 1, 16);

-- The prune of stored prompts and validation reports walks the files by
-- id from where its last pass stopped, for each kind, instead of an index
-- of every prompt's time.
DROP INDEX files_prunable;
CREATE TABLE file_prune_marks (
    kind    TEXT PRIMARY KEY CHECK (kind = 'prompt' OR kind = 'validation'),
    next_id INTEGER NOT NULL
) WITHOUT ROWID;

-- Step runs are found by their run (the primary key), the runs in flight
-- by runs_unfinished; only the waiting ones (the gates) are listed across
-- runs. A step's commit moves a step run from open to succeeded and opens
-- the next: neither touches this index.
DROP INDEX step_runs_unfinished;
CREATE INDEX step_runs_waiting ON step_runs (status) WHERE status = 'waiting';
