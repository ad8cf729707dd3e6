-- What a model agent spent in an attempt.
ALTER TABLE attempts ADD COLUMN input_tokens  INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN output_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN cached_tokens INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN turns         INTEGER NOT NULL DEFAULT 0;
ALTER TABLE attempts ADD COLUMN tool_calls    INTEGER NOT NULL DEFAULT 0;
