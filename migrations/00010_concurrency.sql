-- Concurrency rules (issue 48): a rule or plan of kind "concurrency" bounds
-- requests in flight; its period is its slots' lease TTL, at most a day,
-- and it has no burst. It is never global. The scope (api, route,
-- subject, kind, dimension) lets it stack on a rate and a quota rule.
--
-- As in 00001, the CHECKs mirror internal/rules validation and are named
-- <table>_<field>_check so the store can name the field.

-- +goose Up
ALTER TABLE plans
    DROP CONSTRAINT plans_kind_check,
    ADD CONSTRAINT plans_kind_check CHECK (kind IN ('rate', 'quota', 'concurrency')),
    DROP CONSTRAINT plans_period_kind_check,
    ADD CONSTRAINT plans_period_kind_check CHECK (
        kind = 'rate'
        OR (kind = 'quota' AND period_ms IN (86400000, 604800000, 2629746000, 31536000000) AND burst IS NULL)
        OR (kind = 'concurrency' AND period_ms <= 86400000 AND burst IS NULL)),
    ADD CONSTRAINT plans_global_kind_check CHECK (NOT global OR kind <> 'concurrency');

ALTER TABLE rules
    DROP CONSTRAINT rules_kind_check,
    ADD CONSTRAINT rules_kind_check CHECK (kind IN ('rate', 'quota', 'concurrency')),
    DROP CONSTRAINT rules_period_kind_check,
    ADD CONSTRAINT rules_period_kind_check CHECK (
        kind = 'rate' OR plan IS NOT NULL
        OR (kind = 'quota' AND period_ms IN (86400000, 604800000, 2629746000, 31536000000) AND burst IS NULL)
        OR (kind = 'concurrency' AND period_ms <= 86400000 AND burst IS NULL)),
    ADD CONSTRAINT rules_global_kind_check CHECK (NOT global OR kind <> 'concurrency');

-- +goose Down
DELETE FROM rules WHERE kind = 'concurrency';
DELETE FROM plans WHERE kind = 'concurrency';
ALTER TABLE rules
    DROP CONSTRAINT rules_global_kind_check,
    DROP CONSTRAINT rules_period_kind_check,
    ADD CONSTRAINT rules_period_kind_check CHECK (
        kind = 'rate' OR plan IS NOT NULL
        OR (period_ms IN (86400000, 604800000, 2629746000, 31536000000) AND burst IS NULL)),
    DROP CONSTRAINT rules_kind_check,
    ADD CONSTRAINT rules_kind_check CHECK (kind IN ('rate', 'quota'));
ALTER TABLE plans
    DROP CONSTRAINT plans_global_kind_check,
    DROP CONSTRAINT plans_period_kind_check,
    ADD CONSTRAINT plans_period_kind_check CHECK (
        kind = 'rate' OR (period_ms IN (86400000, 604800000, 2629746000, 31536000000) AND burst IS NULL)),
    DROP CONSTRAINT plans_kind_check,
    ADD CONSTRAINT plans_kind_check CHECK (kind IN ('rate', 'quota'));
