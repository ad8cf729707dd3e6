-- The runs a run started (a lead agent's sub-agent runs), found by their
-- parent: subagent_run looks for the child of its lead run that it may
-- have started before a crash. Most runs have no parent, so the index
-- holds only those that have one.
CREATE INDEX runs_parent ON runs (parent, id) WHERE parent <> '';
