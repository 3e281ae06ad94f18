-- Rules name the dimension they limit (internal/rules Rule.Dimension): ''
-- is the default dimension, the subject SUBJECT_SOURCES finds; another
-- name is one of the authorizer's DIMENSIONS, such as 'ip' or 'tenant'.
-- A scope is now (api, route, subject, kind, dimension): a per-IP floor
-- and a per-key limit may both cover every subject of one route.

-- +goose Up
ALTER TABLE rules ADD COLUMN dimension text NOT NULL DEFAULT '';
ALTER TABLE rules ADD CONSTRAINT rules_dimension_check CHECK (dimension ~ '^([a-z][a-z0-9_-]{0,31})?$');
ALTER TABLE rules DROP CONSTRAINT rules_scope_key;
ALTER TABLE rules ADD CONSTRAINT rules_scope_key UNIQUE (api, route, subject, kind, dimension);

-- +goose Down
-- Other dimensions' rules have no place in the old scope: they go, with
-- their audit trail kept (the audit rows hold the rule as it was).
DELETE FROM rules WHERE dimension <> '';
ALTER TABLE rules DROP CONSTRAINT rules_scope_key;
ALTER TABLE rules ADD CONSTRAINT rules_scope_key UNIQUE (api, route, subject, kind);
ALTER TABLE rules DROP CONSTRAINT rules_dimension_check;
ALTER TABLE rules DROP COLUMN dimension;
