-- The model agents' conversations (spec 4: the lead's conversation is
-- checkpointed after every turn): one row per run, step and visit,
-- replaced at each completed turn, so an attempt that dies is resumed by
-- the next from its last completed turn.
CREATE TABLE conversations (
    run_id   TEXT NOT NULL CHECK (run_id <> ''),
    step     TEXT NOT NULL CHECK (step <> ''),
    visit    INTEGER NOT NULL CHECK (visit >= 0),
    attempt  INTEGER NOT NULL CHECK (attempt >= 0),
    turns    INTEGER NOT NULL CHECK (turns >= 0),
    -- the messages, as a JSON array
    messages TEXT NOT NULL CHECK (json_valid(messages) AND json_type(messages) = 'array'),
    saved_at TEXT NOT NULL,
    PRIMARY KEY (run_id, step, visit)
);
