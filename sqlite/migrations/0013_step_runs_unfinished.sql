-- The index of step runs by status left out the succeeded ones: each
-- step's commit moved its step run from open to succeeded, which wrote a
-- page of the index's open entries and another of its ever-growing
-- succeeded ones. The index now holds the step runs that are not
-- succeeded (open, waiting, joining, failed, canceled): a step's commit
-- writes one small page of it. A filter by one of those statuses states
-- the condition word for word (sqlNotSucceeded), which is what lets SQLite
-- use it; a filter by succeeded walks the table.
DROP INDEX step_runs_status;
CREATE INDEX step_runs_unfinished ON step_runs (status) WHERE status <> 'succeeded';

