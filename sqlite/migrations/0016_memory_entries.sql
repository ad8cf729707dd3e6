-- The agents' memory entries (FR-041..043): what memory_append stores,
-- indexed for memory_search. The memory file, <agent>/memory.md, is a view
-- that shows each entry after a marker with its id, so a crash between
-- the commit and the file write is put right by appending what the file
-- lacks.
CREATE TABLE memory_entries (
    id         INTEGER PRIMARY KEY,
    agent      TEXT NOT NULL CHECK (agent <> ''),
    run_id     TEXT NOT NULL DEFAULT '',
    step       TEXT NOT NULL DEFAULT '',
    attempt    INTEGER NOT NULL DEFAULT 0,
    text       TEXT NOT NULL,
    created_at TEXT NOT NULL
);
-- An agent's entries in order, for its file.
CREATE INDEX memory_entries_agent ON memory_entries (agent, id);

-- The full-text index of the texts, over the table itself (external
-- content); entries are only ever added, so one trigger keeps it.
CREATE VIRTUAL TABLE memory_fts USING fts5 (
    text,
    content = 'memory_entries', content_rowid = 'id',
    tokenize = 'porter unicode61'
);
CREATE TRIGGER memory_fts_insert AFTER INSERT ON memory_entries BEGIN
    INSERT INTO memory_fts (rowid, text) VALUES (new.id, new.text);
END;
