-- Rules, plans and the audit log of every write to them.
--
-- The CHECK constraints mirror the bounds of internal/rules validation
-- (rules.MaxLimit, MaxAPILen, ...): they are the last line of defence against
-- a bug or a hand-written INSERT, not the place users learn what is wrong
-- (the admin API validates first, with better reasons). Their names
-- (<table>_<field>_check) let the store name the offending field.

-- +goose Up
CREATE TABLE plans (
    name        text        PRIMARY KEY,
    limit_count bigint      NOT NULL,
    period_ms   bigint      NOT NULL,
    burst       bigint,
    description text        NOT NULL DEFAULT '',
    version     bigint      NOT NULL DEFAULT 1,
    created_at  timestamptz NOT NULL DEFAULT now(),
    updated_at  timestamptz NOT NULL DEFAULT now(),
    CONSTRAINT plans_name_check        CHECK (name ~ '^[a-z][a-z0-9_-]{0,63}$'),
    CONSTRAINT plans_limit_check       CHECK (limit_count BETWEEN 0 AND 1000000000),
    CONSTRAINT plans_period_check      CHECK (period_ms BETWEEN 1000 AND 31536000000 AND period_ms % 1000 = 0),
    CONSTRAINT plans_burst_check       CHECK (burst BETWEEN 0 AND 1000000000),
    CONSTRAINT plans_description_check CHECK (octet_length(description) <= 1024),
    CONSTRAINT plans_version_check     CHECK (version >= 1)
);

CREATE TABLE rules (
    id           uuid        PRIMARY KEY DEFAULT gen_random_uuid(),
    api          text        NOT NULL,
    route        text        NOT NULL,
    subject      text        NOT NULL,
    -- A plan name instead of inline numbers. Renaming a plan follows it;
    -- deleting a plan still named by a rule is refused.
    plan         text        REFERENCES plans (name) ON UPDATE CASCADE ON DELETE RESTRICT,
    limit_count  bigint,
    period_ms    bigint,
    burst        bigint,
    cost         bigint,
    failure_mode text        NOT NULL DEFAULT 'open',
    mode         text        NOT NULL DEFAULT 'enforce',
    enabled      boolean     NOT NULL DEFAULT true,
    description  text        NOT NULL DEFAULT '',
    version      bigint      NOT NULL DEFAULT 1,
    created_at   timestamptz NOT NULL DEFAULT now(),
    updated_at   timestamptz NOT NULL DEFAULT now(),
    -- Two rules cannot claim one scope. Also serves the api filter.
    CONSTRAINT rules_scope_key UNIQUE (api, route, subject),
    CONSTRAINT rules_api_check          CHECK (octet_length(api) BETWEEN 1 AND 128),
    CONSTRAINT rules_route_check        CHECK (octet_length(route) BETWEEN 1 AND 1024),
    CONSTRAINT rules_subject_check      CHECK (octet_length(subject) BETWEEN 1 AND 256),
    -- Either a plan or inline limit and period, never both.
    CONSTRAINT rules_plan_check         CHECK (
        (plan IS NOT NULL AND limit_count IS NULL AND period_ms IS NULL AND burst IS NULL)
        OR (plan IS NULL AND limit_count IS NOT NULL AND period_ms IS NOT NULL)),
    CONSTRAINT rules_limit_check        CHECK (limit_count BETWEEN 0 AND 1000000000),
    CONSTRAINT rules_period_check       CHECK (period_ms BETWEEN 1000 AND 31536000000 AND period_ms % 1000 = 0),
    CONSTRAINT rules_burst_check        CHECK (burst BETWEEN 0 AND 1000000000),
    CONSTRAINT rules_cost_check         CHECK (cost BETWEEN 1 AND 1000000),
    CONSTRAINT rules_failure_mode_check CHECK (failure_mode IN ('open', 'closed')),
    CONSTRAINT rules_mode_check         CHECK (mode IN ('enforce', 'shadow')),
    CONSTRAINT rules_description_check  CHECK (octet_length(description) <= 1024),
    CONSTRAINT rules_version_check      CHECK (version >= 1)
);

-- List filters page by id (keyset), so each filter column leads an index
-- that ends in id. The api filter uses rules_scope_key's prefix.
CREATE INDEX rules_subject_id_idx ON rules (subject, id);
CREATE INDEX rules_route_id_idx   ON rules (route, id);
-- Also serves the foreign key check when a plan is deleted or renamed.
CREATE INDEX rules_plan_id_idx    ON rules (plan, id) WHERE plan IS NOT NULL;

CREATE TABLE audit_log (
    id        bigserial   PRIMARY KEY,
    kind      text        NOT NULL,
    -- A rule id or a plan name; text, and no foreign key, so history
    -- outlives what it describes.
    target_id text        NOT NULL,
    action    text        NOT NULL,
    actor     text        NOT NULL,
    at        timestamptz NOT NULL DEFAULT now(),
    before    jsonb,
    after     jsonb,
    CONSTRAINT audit_log_kind_check   CHECK (kind IN ('rule', 'plan')),
    CONSTRAINT audit_log_action_check CHECK (action IN ('create', 'update', 'delete'))
);

CREATE INDEX audit_log_target_idx ON audit_log (kind, target_id, id);

-- +goose Down
DROP TABLE audit_log;
DROP TABLE rules;
DROP TABLE plans;
