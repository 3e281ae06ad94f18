-- Quotas (issue 12): a rule or plan has a kind, "rate" (a token bucket,
-- what every existing row is) or "quota" (a calendar window); a quota rule
-- may have an anchor its windows repeat from; any rule may have an
-- admission floor, min_remaining. A rate rule and a quota rule may claim
-- one scope, so the scope becomes (api, route, subject, kind).
--
-- As in 00001, the CHECKs mirror internal/rules validation and are named
-- <table>_<field>_check so the store can name the field.

-- +goose Up
ALTER TABLE plans
    ADD COLUMN kind text NOT NULL DEFAULT 'rate',
    ADD CONSTRAINT plans_kind_check CHECK (kind IN ('rate', 'quota')),
    -- A quota's period is a calendar window: 1d, 1w, 1mo (stored as the
    -- mean Gregorian month, 2629746 s) or 1y; it has no burst.
    ADD CONSTRAINT plans_period_kind_check CHECK (
        kind = 'rate' OR (period_ms IN (86400000, 604800000, 2629746000, 31536000000) AND burst IS NULL));

ALTER TABLE rules
    ADD COLUMN kind          text NOT NULL DEFAULT 'rate',
    ADD COLUMN anchor        timestamptz,
    ADD COLUMN min_remaining bigint,
    ADD CONSTRAINT rules_kind_check CHECK (kind IN ('rate', 'quota')),
    ADD CONSTRAINT rules_anchor_check CHECK (
        anchor IS NULL OR (kind = 'quota' AND anchor >= '1970-01-01T00:00:00Z' AND anchor < '2100-01-01T00:00:00Z')),
    ADD CONSTRAINT rules_min_remaining_check CHECK (min_remaining BETWEEN 0 AND 999999999),
    ADD CONSTRAINT rules_period_kind_check CHECK (
        kind = 'rate' OR plan IS NOT NULL
        OR (period_ms IN (86400000, 604800000, 2629746000, 31536000000) AND burst IS NULL));

-- The scope now includes the kind; the new key also serves the api filter.
ALTER TABLE rules DROP CONSTRAINT rules_scope_key;
ALTER TABLE rules ADD CONSTRAINT rules_scope_key UNIQUE (api, route, subject, kind);

-- +goose Down
ALTER TABLE rules DROP CONSTRAINT rules_scope_key;
DELETE FROM rules WHERE kind = 'quota';
ALTER TABLE rules ADD CONSTRAINT rules_scope_key UNIQUE (api, route, subject);
ALTER TABLE rules
    DROP CONSTRAINT rules_period_kind_check,
    DROP CONSTRAINT rules_min_remaining_check,
    DROP CONSTRAINT rules_anchor_check,
    DROP CONSTRAINT rules_kind_check,
    DROP COLUMN min_remaining,
    DROP COLUMN anchor,
    DROP COLUMN kind;
DELETE FROM plans WHERE kind = 'quota';
ALTER TABLE plans
    DROP CONSTRAINT plans_period_kind_check,
    DROP CONSTRAINT plans_kind_check,
    DROP COLUMN kind;
