-- The dashboard's sessions signed out before they expired: a copy of the
-- cookie of one is refused too. A row goes once its session would have
-- expired anyway.
CREATE TABLE ended_sessions (
    id      TEXT PRIMARY KEY,
    expires TEXT NOT NULL
) WITHOUT ROWID;
