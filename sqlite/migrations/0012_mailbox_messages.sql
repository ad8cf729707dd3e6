-- The agents' mailboxes: each message is a row, deposited in the
-- transaction of the change that sends it (a step's outcome, an
-- operator's inject command). The mailbox files agents read are views of
-- these rows, rendered after the commit without an fsync and rewritten
-- from them when a crash left them stale. seq orders an agent's messages;
-- a message deposited again under its id keeps its seq (its place), and
-- only the newest messages of an agent are kept.
CREATE TABLE mailbox_messages (
    agent TEXT NOT NULL CHECK (agent <> ''),
    id    TEXT NOT NULL CHECK (id <> ''),
    seq   INTEGER NOT NULL,
    line  BLOB NOT NULL,
    PRIMARY KEY (agent, id)
) WITHOUT ROWID;
CREATE UNIQUE INDEX mailbox_messages_by_seq ON mailbox_messages (agent, seq);
