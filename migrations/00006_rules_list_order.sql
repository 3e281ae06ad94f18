-- The order of a rules list (internal/store ListRules): api, then route,
-- then subject, then id, compared byte by byte (COLLATE "C", as the memory
-- store compares), whatever the database's locale. This index serves each
-- page of that keyset, filtered by api or not, without sorting every rule.

-- +goose Up
CREATE INDEX rules_list_order_idx ON rules (api COLLATE "C", route COLLATE "C", subject COLLATE "C", id);

-- +goose Down
DROP INDEX rules_list_order_idx;
