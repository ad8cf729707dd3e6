-- Capsules: the hand-off notes one agent or session leaves for the next.
-- A capsule is deleted softly (deleted_at set), so a search can still
-- find what was deleted; ids are never reused, as rows are never removed,
-- and the newest capsules are the highest ids. version counts the
-- capsule's writes, for optimistic updates.
CREATE TABLE capsules (
    id         INTEGER PRIMARY KEY,
    workspace  TEXT NOT NULL,
    name       TEXT NOT NULL CHECK (name <> ''),
    run_id     TEXT NOT NULL DEFAULT '',
    phase      TEXT NOT NULL DEFAULT '',
    role       TEXT NOT NULL DEFAULT '',
    -- A JSON array of strings, read with json_each by the tag filter.
    tags       TEXT NOT NULL DEFAULT '[]' CHECK (json_valid(tags) AND json_type(tags) = 'array'),
    text       TEXT NOT NULL,
    version    INTEGER NOT NULL CHECK (version >= 1),
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    deleted_at TEXT
);
-- A name is unique among the live capsules of a workspace only: a
-- deleted capsule frees its name. Also the lookup by name.
CREATE UNIQUE INDEX capsules_live_name ON capsules (workspace, name) WHERE deleted_at IS NULL;
-- The lists, newest first, of a workspace and of a run.
CREATE INDEX capsules_workspace ON capsules (workspace, id);
CREATE INDEX capsules_run ON capsules (run_id, id);
-- The inventory counts the live capsules from this index alone; it also
-- serves a list of live capsules by workspace, phase and role. deleted_at,
-- always NULL here, is in it only so that SQLite takes the index as
-- covering the condition it is partial on.
CREATE INDEX capsules_live_kind ON capsules (workspace, phase, role, deleted_at) WHERE deleted_at IS NULL;

-- The full-text index of names, tags and texts. Its content is the
-- capsules table itself (external content), so texts are stored once
-- and snippet() reads them from there; the triggers keep the index in
-- step. Deleted capsules stay indexed: a search may include them.
CREATE VIRTUAL TABLE capsules_fts USING fts5 (
    name, tags, text,
    content = 'capsules', content_rowid = 'id',
    tokenize = 'porter unicode61'
);
CREATE TRIGGER capsules_fts_insert AFTER INSERT ON capsules BEGIN
    INSERT INTO capsules_fts (rowid, name, tags, text) VALUES (new.id, new.name, new.tags, new.text);
END;
CREATE TRIGGER capsules_fts_delete AFTER DELETE ON capsules BEGIN
    INSERT INTO capsules_fts (capsules_fts, rowid, name, tags, text) VALUES ('delete', old.id, old.name, old.tags, old.text);
END;
-- Only a change of what is indexed touches the index: not a phase, a
-- version or a deletion, nor a write of the same text again.
CREATE TRIGGER capsules_fts_update AFTER UPDATE OF name, tags, text ON capsules
WHEN old.name IS NOT new.name OR old.tags IS NOT new.tags OR old.text IS NOT new.text BEGIN
    INSERT INTO capsules_fts (capsules_fts, rowid, name, tags, text) VALUES ('delete', old.id, old.name, old.tags, old.text);
    INSERT INTO capsules_fts (rowid, name, tags, text) VALUES (new.id, new.name, new.tags, new.text);
END;
