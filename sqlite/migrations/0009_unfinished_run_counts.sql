-- GET /api/status counts the unfinished runs by pipeline and status: this
-- index holds just those two columns of the runs in flight, so the count
-- reads neither the runs nor the finished ones. The condition is
-- sqlUnfinishedRun's, word for word.
CREATE INDEX runs_unfinished_counts ON runs (pipeline, status) WHERE status = 'queued' OR status = 'running' OR status = 'halted';
