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

-- A run's stored files by attempt (an operator reading the prompt an
-- attempt saw) are found by files_by_run: the run and the kind, then its
-- prompts, a few per step. A second index of every file cost each step's
-- commit one more page.
DROP INDEX files_by_attempt;
