-- The roles of a PostgreSQL event store, least privilege (docs/reference/manual/event-store.md, "Roles and privileges").
-- Run as a superuser or the database's owner, once the three roles exist:
--
--   psql -v schema=app -v migrator=app_migrator -v writer=app_writer -v reader=app_reader \
--        -f examples/postgres_roles.sql
--
-- first before the store's first open (part 1 alone is enough then), and again after it,
-- and after each upgrade. tests/eventstore/test_privileges.py runs this file as it is.

-- Part 1. The migration role owns the store's schema. Its first open creates the store's
-- tables there, the key table of personal data (eventcraft_keys) with them; a later
-- release's first open brings them up to date. Run the deployment's migration step (any
-- open of the store, e.g. `eventcraft --store URL stats`) as it, and `forget`.
CREATE SCHEMA IF NOT EXISTS :"schema" AUTHORIZATION :"migrator";
GRANT USAGE ON SCHEMA :"schema" TO :"writer", :"reader";
-- Reading: every table the migration role makes, now or in a later release.
ALTER DEFAULT PRIVILEGES FOR ROLE :"migrator" IN SCHEMA :"schema"
    GRANT SELECT ON TABLES TO :"writer", :"reader";

-- Part 2, once the store's tables exist (after the migration role's open).
GRANT SELECT ON ALL TABLES IN SCHEMA :"schema" TO :"writer", :"reader";
-- The application's role: appends, snapshots, stream deletions; its open creates nothing.
GRANT INSERT ON :"schema".eventcraft_events, :"schema".eventcraft_tags,
    :"schema".eventcraft_streams TO :"writer";
GRANT USAGE ON SEQUENCE :"schema".eventcraft_position_seq TO :"writer";
GRANT INSERT, UPDATE ON :"schema".eventcraft_snapshots, :"schema".eventcraft_deleted_streams
    TO :"writer";
-- Personal data: sealing adds a subject's key (INSERT); reading opens it (SELECT, above).
-- No UPDATE: a forget rewrites the key table, which only its owner, the migration role, may.
GRANT INSERT ON :"schema".eventcraft_keys TO :"writer";
-- A partitioned store (?partition_events=N) keeps each event's id and stream version unique in
-- eventcraft_event_keys, which an append writes (INSERT); a store made without the option has
-- no such table, so the grant is made only where it is. psql does not put variables into the
-- block's text: it reads them from two settings of this session.
SET eventcraft.roles_schema = :"schema";
SET eventcraft.roles_writer = :"writer";
DO $$
DECLARE
    store text := current_setting('eventcraft.roles_schema');
BEGIN
    IF to_regclass(format('%I.eventcraft_event_keys', store)) IS NOT NULL THEN
        EXECUTE format('GRANT INSERT ON %I.eventcraft_event_keys TO %I',
            store, current_setting('eventcraft.roles_writer'));
    END IF;
END
$$;
RESET eventcraft.roles_schema;
RESET eventcraft.roles_writer;
-- The reader has no more: the console and the command line's read commands (log, show,
-- event, streams, stats, trace, export, verify) work with it, and an append is refused
-- as StorePermissionDenied naming the privilege it lacks. Its SELECT on eventcraft_keys
-- opens personal fields, as the console shows them; to keep them from it, revoke that
-- (its reads of events holding personal fields are then refused, naming it).
