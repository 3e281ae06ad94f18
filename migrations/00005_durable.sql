-- Durable quotas (internal/rules Rule.Durable): a charge is acknowledged
-- only once a Redis replica has it (WAIT 1 after the script), so a
-- failover cannot lose it. Only a quota may be durable.

-- +goose Up
ALTER TABLE rules ADD COLUMN durable boolean NOT NULL DEFAULT false;
ALTER TABLE rules ADD CONSTRAINT rules_durable_check CHECK (NOT durable OR kind = 'quota');

-- +goose Down
ALTER TABLE rules DROP CONSTRAINT rules_durable_check;
ALTER TABLE rules DROP COLUMN durable;
