-- The rules version: one row that every write to rules or plans moves,
-- first thing in its own transaction, and that LoadAll reads in the same
-- snapshot as the rules (internal/store/postgres). It is the time of the
-- last write in microseconds since 1970, and at least one more than the
-- version before, so that it orders the sets the admin path publishes to
-- Redis: across concurrent writes (its row lock serializes them in commit
-- order), and across a database restored to an earlier point, whose next
-- write is still newer than anything published before.

-- +goose Up
CREATE TABLE rules_version (
    id      boolean PRIMARY KEY DEFAULT true,
    version bigint  NOT NULL,
    CONSTRAINT rules_version_one_row  CHECK (id),
    CONSTRAINT rules_version_positive CHECK (version >= 1)
);
INSERT INTO rules_version (version) VALUES ((extract(epoch FROM clock_timestamp()) * 1000000)::bigint);

-- +goose Down
DROP TABLE rules_version;
