-- Rules as code (issue 38): a rule or plan may be owned by a set, the name
-- `sluice apply` converges (an apply of set S touches only rows of S; ''
-- is owned by no set), and a rule may expire: from expires_at on every
-- authorizer passes over it, with no write at that instant.
--
-- As in 00001, the CHECKs mirror internal/rules validation and are named
-- <table>_<field>_check so the store can name the field.

-- +goose Up
ALTER TABLE rules
    ADD COLUMN set_name   text NOT NULL DEFAULT '',
    ADD COLUMN expires_at timestamptz,
    ADD CONSTRAINT rules_set_check CHECK (set_name ~ '^([a-z][a-z0-9_-]{0,63})?$'),
    ADD CONSTRAINT rules_expires_at_check CHECK (
        expires_at IS NULL OR (expires_at >= '1970-01-01T00:00:00Z' AND expires_at < '2100-01-01T00:00:00Z'));
ALTER TABLE plans
    ADD COLUMN set_name text NOT NULL DEFAULT '',
    ADD CONSTRAINT plans_set_check CHECK (set_name ~ '^([a-z][a-z0-9_-]{0,63})?$');

-- `sluice export` and every apply read one set.
CREATE INDEX rules_set_idx ON rules (set_name) WHERE set_name <> '';

-- +goose Down
DROP INDEX rules_set_idx;
ALTER TABLE plans DROP CONSTRAINT plans_set_check, DROP COLUMN set_name;
ALTER TABLE rules DROP CONSTRAINT rules_expires_at_check, DROP CONSTRAINT rules_set_check,
    DROP COLUMN expires_at, DROP COLUMN set_name;
