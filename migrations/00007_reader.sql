-- The read-only role sluice_reader: the admin functions that only read
-- rules and plans (GET /rules, /plans and their history, the subject
-- limits, usage and reset routes' rule lookups) connect as it, so that
-- none of them can write the rules whatever its code does. It may read
-- every table of this schema, now and later (default privileges), and
-- nothing else.
--
-- A role belongs to the whole server, not to one database: it is created
-- once, NOLOGIN; the migrate function gives it LOGIN and the password of
-- its own secret (DB_READER_SECRET_ARN) after migrating. A user that may
-- not create roles (a database brought along, without CREATEROLE) skips
-- the role, and the read functions then use the main credentials (the
-- stack says so). Concurrent migrations of two databases on one server
-- may both try to create it: the loser's error is ignored.

-- +goose Up
-- +goose StatementBegin
DO $$
BEGIN
	IF NOT EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'sluice_reader')
		AND (SELECT rolcreaterole OR rolsuper FROM pg_roles WHERE rolname = current_user) THEN
		BEGIN
			CREATE ROLE sluice_reader NOLOGIN;
		EXCEPTION WHEN duplicate_object OR unique_violation THEN
			NULL;
		END;
	END IF;
	IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'sluice_reader') THEN
		EXECUTE format('GRANT USAGE ON SCHEMA %I TO sluice_reader', current_schema());
		EXECUTE format('GRANT SELECT ON ALL TABLES IN SCHEMA %I TO sluice_reader', current_schema());
		EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I GRANT SELECT ON TABLES TO sluice_reader', current_schema());
	END IF;
END
$$;
-- +goose StatementEnd

-- +goose Down
-- +goose StatementBegin
DO $$
BEGIN
	IF EXISTS (SELECT 1 FROM pg_roles WHERE rolname = 'sluice_reader') THEN
		EXECUTE format('ALTER DEFAULT PRIVILEGES IN SCHEMA %I REVOKE SELECT ON TABLES FROM sluice_reader', current_schema());
		EXECUTE format('REVOKE SELECT ON ALL TABLES IN SCHEMA %I FROM sluice_reader', current_schema());
		EXECUTE format('REVOKE USAGE ON SCHEMA %I FROM sluice_reader', current_schema());
	END IF;
END
$$;
-- +goose StatementEnd
