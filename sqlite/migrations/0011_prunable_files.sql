-- Retention prunes the stored prompts and validation reports by age
-- (PruneFiles): this index holds the time of just those rows, so a prune
-- finds them without scanning the table, whose artifacts may be megabytes
-- each. Stored artifacts are
-- never pruned and are not in it. The condition is sqlPruneFiles's, word
-- for word, which is what lets SQLite use it.
CREATE INDEX files_prunable ON files (created_at) WHERE kind <> 'artifact';
