-- Global rules and plans (issue 39): a global rule's budget is shared by
-- every Region of a deployment family through a ledger; a rule naming a
-- global plan is global too.
--
-- As in 00001, the CHECKs mirror internal/rules validation (global.go)
-- and are named <table>_<field>_check so the store can name the field. A
-- rule made global by its plan is checked against the plan in the store's
-- transaction (rules.Rule.ValidateWithPlan), which no CHECK can see.

-- +goose Up
ALTER TABLE rules
    ADD COLUMN global boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT rules_global_check CHECK (
        NOT global OR (mode <> 'shadow' AND coalesce(min_remaining, 0) = 0 AND NOT durable)),
    ADD CONSTRAINT rules_global_period_check CHECK (
        NOT global OR kind = 'quota' OR period_ms IS NULL OR period_ms >= 60000);
ALTER TABLE plans
    ADD COLUMN global boolean NOT NULL DEFAULT false,
    ADD CONSTRAINT plans_global_period_check CHECK (NOT global OR kind = 'quota' OR period_ms >= 60000);

-- +goose Down
ALTER TABLE plans DROP CONSTRAINT plans_global_period_check, DROP COLUMN global;
ALTER TABLE rules DROP CONSTRAINT rules_global_period_check, DROP CONSTRAINT rules_global_check,
    DROP COLUMN global;
