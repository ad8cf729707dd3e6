-- The lead agents' to-do lists (spec 4's todo_list_read and
-- todo_list_write): one row per version of a run's list. The agent writes
-- the whole list each time, so a version holds every to-do, as a JSON
-- array; earlier versions stay, the history of the plan. The versions of
-- a run count from 1, and a write takes the next one in the transaction
-- that checks the version its writer read.
CREATE TABLE todo_lists (
    run_id     TEXT NOT NULL CHECK (run_id <> ''),
    version    INTEGER NOT NULL CHECK (version >= 1),
    -- [{"id", "title", "status", "note"}, ...]
    todos      TEXT NOT NULL CHECK (json_valid(todos) AND json_type(todos) = 'array'),
    written_at TEXT NOT NULL,
    agent      TEXT NOT NULL DEFAULT '',
    step       TEXT NOT NULL DEFAULT '',
    PRIMARY KEY (run_id, version)
);
