-- Reads that stay fast as history grows: every list the API serves walks
-- an index from its cursor, and tool usage is read from a summary instead
-- of a scan of the events.

-- GET /api/events?type=: the events of one type, in id order.
CREATE INDEX events_type ON events (event_type, id);
-- GET /api/events?since=<time>: where in the log a time starts.
CREATE INDEX events_time ON events (timestamp);
-- GET /api/events?level=error (level=warn has events_problems).
CREATE INDEX events_errors ON events (id) WHERE level = 'error';
-- GET /api/cycles?status=: the cycles of one status, newest first.
CREATE INDEX cycles_status ON cycles (status, id);
-- The latest delivered strategy, which the engine reads every cycle.
CREATE INDEX outbox_delivered ON outbox (kind, delivered_at) WHERE delivered_at IS NOT NULL;

-- The summary of tool.call events, kept in the transaction that writes
-- them: per tool and UTC hour (hour is the timestamp's first 13
-- characters, 2026-11-22T14), and per tool over all time. It is the
-- history of the calls: pruning events leaves it as it is.
CREATE TABLE tool_usage_hours (
    hour        TEXT NOT NULL,
    tool        TEXT NOT NULL,
    calls       INTEGER NOT NULL,
    errors      INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL,
    last_call   TEXT NOT NULL,
    PRIMARY KEY (hour, tool)
) WITHOUT ROWID;

CREATE TABLE tool_usage_totals (
    tool        TEXT PRIMARY KEY,
    calls       INTEGER NOT NULL,
    errors      INTEGER NOT NULL,
    duration_ms INTEGER NOT NULL,
    last_call   TEXT NOT NULL
) WITHOUT ROWID;

-- Backfill from the events still retained, by the rule Store.Apply uses
-- (agentrunner.ToolCallOf): the tool is a string, is_error is true, the
-- duration is a number of milliseconds.
INSERT INTO tool_usage_hours (hour, tool, calls, errors, duration_ms, last_call)
    SELECT substr(timestamp, 1, 13), json_extract(details, '$.tool'), COUNT(*),
        SUM(json_type(details, '$.is_error') = 'true'),
        SUM(CASE WHEN json_type(details, '$.duration_ms') IN ('integer', 'real')
            THEN CAST(json_extract(details, '$.duration_ms') AS INTEGER) ELSE 0 END),
        MAX(timestamp)
    FROM events
    WHERE event_type = 'tool.call' AND json_type(details, '$.tool') = 'text'
    GROUP BY 1, 2;

INSERT INTO tool_usage_totals (tool, calls, errors, duration_ms, last_call)
    SELECT tool, SUM(calls), SUM(errors), SUM(duration_ms), MAX(last_call)
    FROM tool_usage_hours GROUP BY tool;
