-- The events of every step (attempt started and succeeded, artifact
-- accepted, transition) left the type index: each had its own part of it,
-- so a step's commit wrote up to four more index pages, about a tenth of a
-- step's cost. A filter by one of them walks the ids instead, and finds a
-- match within the events of a step. The condition is repeated, word for
-- word, in the queries that use the index (sqlNotStepEvent).
DROP INDEX events_type;
CREATE INDEX events_type ON events (event_type, id)
    WHERE event_type NOT IN ('attempt.started', 'attempt.succeeded', 'artifact.accepted', 'state.transition');
