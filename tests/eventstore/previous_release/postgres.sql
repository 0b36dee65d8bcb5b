SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;


CREATE SCHEMA eventcraft_previous_release;



CREATE FUNCTION eventcraft_previous_release.eventcraft_append(p_stream text, p_category text, p_expected bigint, p_events text) RETURNS text
    LANGUAGE plpgsql
    AS $$
DECLARE
    batch jsonb := p_events::jsonb;
    n int := jsonb_array_length(batch);
    base bigint := p_expected;
    positions bigint[];
    violated text;
BEGIN
    -- The append lock, then the xid, before any position: the ordering rule in
    -- eventstore/schema.py. Shared: appends never wait for each other on it.
    PERFORM pg_advisory_xact_lock_shared(((25955::bigint << 32) | 'eventcraft_events'::regclass::oid::bigint));
    PERFORM pg_current_xact_id();
    IF base < 0 THEN
        base := eventcraft_stream_version(p_stream);
    END IF;
    IF base = 0 THEN
        INSERT INTO eventcraft_streams (stream_id, category) VALUES (p_stream, p_category)
        ON CONFLICT (stream_id) DO NOTHING;
    ELSIF NOT EXISTS (SELECT FROM eventcraft_events WHERE stream_id = p_stream AND version = base) THEN
        RAISE EXCEPTION USING
            ERRCODE = 'EC001',
            MESSAGE = 'wrong expected version',
            DETAIL = eventcraft_stream_version(p_stream);
    END IF;
    -- The EXCEPTION clause makes this block a subtransaction: the rows' xmin is
    -- an xid drawn after every position they hold (the ordering rule). nextval
    -- assigns no xid, the first row written does; so one row may take its
    -- position as it goes in, several take theirs before the first goes in.
    BEGIN
        IF n = 1 THEN
            INSERT INTO eventcraft_events
                (position, stream_id, version, id, type, data, metadata, recorded_at, category)
            VALUES (nextval('eventcraft_position_seq'), p_stream, base + 1, (batch->0->>'id')::uuid,
                    batch->0->>'type', batch->0->'data', batch->0->'metadata',
                    coalesce((batch->0->>'recorded_at')::timestamptz, now()), p_category)
            RETURNING ARRAY[position] INTO positions;
        ELSE
            positions := ARRAY(SELECT nextval('eventcraft_position_seq') FROM generate_series(1, n));
            INSERT INTO eventcraft_events
                (position, stream_id, version, id, type, data, metadata, recorded_at, category)
            SELECT positions[e.i], p_stream, base + e.i, (e.event->>'id')::uuid,
                   e.event->>'type', e.event->'data', e.event->'metadata',
                   coalesce((e.event->>'recorded_at')::timestamptz, now()), p_category
            FROM jsonb_array_elements(batch) WITH ORDINALITY AS e(event, i);
        END IF;
    EXCEPTION WHEN unique_violation THEN
        GET STACKED DIAGNOSTICS violated = CONSTRAINT_NAME;
        IF violated = 'eventcraft_events_stream_version' THEN
            RAISE EXCEPTION USING
                ERRCODE = 'EC001',
                MESSAGE = 'wrong expected version',
                DETAIL = eventcraft_stream_version(p_stream);
        END IF;
        RAISE;
    END;
    RETURN array_to_string((base + n) || positions, ' ');
END
$$;



CREATE FUNCTION eventcraft_previous_release.eventcraft_refuse_change() RETURNS trigger
    LANGUAGE plpgsql
    AS $$
BEGIN
    RAISE EXCEPTION USING
        ERRCODE = 'EC002',
        MESSAGE = format('%s is append-only: %s refused', TG_TABLE_NAME, TG_OP);
END
$$;



CREATE FUNCTION eventcraft_previous_release.eventcraft_stream_version(p_stream text) RETURNS bigint
    LANGUAGE sql STABLE
    AS $$
    SELECT coalesce(max(version), 0) FROM eventcraft_events WHERE stream_id = p_stream
$$;


SET default_tablespace = '';

SET default_table_access_method = heap;


CREATE TABLE eventcraft_previous_release.eventcraft_events (
    "position" bigint NOT NULL,
    stream_id text NOT NULL COLLATE pg_catalog."C",
    version bigint NOT NULL,
    id uuid NOT NULL,
    type text NOT NULL,
    data jsonb NOT NULL,
    metadata jsonb NOT NULL,
    recorded_at timestamp with time zone NOT NULL,
    category text NOT NULL COLLATE pg_catalog."C"
);



CREATE SEQUENCE eventcraft_previous_release.eventcraft_position_seq
    START WITH 1
    INCREMENT BY 1
    NO MINVALUE
    NO MAXVALUE
    CACHE 1;



CREATE TABLE eventcraft_previous_release.eventcraft_snapshots (
    stream_id text NOT NULL COLLATE pg_catalog."C",
    version bigint NOT NULL,
    type text NOT NULL,
    schema_version integer NOT NULL,
    data jsonb NOT NULL,
    recorded_at timestamp with time zone NOT NULL
);



CREATE TABLE eventcraft_previous_release.eventcraft_streams (
    stream_id text NOT NULL COLLATE pg_catalog."C",
    category text NOT NULL COLLATE pg_catalog."C"
);



INSERT INTO eventcraft_previous_release.eventcraft_events VALUES (1, 'order-1', 1, '4f1c2a7e-9b3d-4c55-8e21-6a0f7d93b512', 'Placed', '{"total": 10}', '{}', '2026-11-24 01:03:28.497723+00', 'order');
INSERT INTO eventcraft_previous_release.eventcraft_events VALUES (2, 'order-1', 2, '0192f3a4-5b6c-7d8e-9f01-23456789abcd', 'Paid', '{"amount": 10}', '{"user": "ann"}', '2026-11-24 01:03:28.497723+00', 'order');
INSERT INTO eventcraft_previous_release.eventcraft_events VALUES (3, 'order-2', 1, '9d8e7f60-1a2b-4c3d-8e4f-5a6b7c8d9e0f', 'Placed', '{"total": 20}', '{}', '2026-11-24 01:03:28.501265+00', 'order');
INSERT INTO eventcraft_previous_release.eventcraft_events VALUES (4, 'invoice-1', 1, '00000000-0000-4000-8000-000000000001', 'Issued', '{"n": 1}', '{}', '2026-11-24 01:03:28.50192+00', 'invoice');



INSERT INTO eventcraft_previous_release.eventcraft_snapshots VALUES ('order-1', 2, 'Order', 1, '{"paid": true, "total": 10}', '2026-11-24 01:03:28.50303+00');



INSERT INTO eventcraft_previous_release.eventcraft_streams VALUES ('order-1', 'order');
INSERT INTO eventcraft_previous_release.eventcraft_streams VALUES ('order-2', 'order');
INSERT INTO eventcraft_previous_release.eventcraft_streams VALUES ('invoice-1', 'invoice');



SELECT pg_catalog.setval('eventcraft_previous_release.eventcraft_position_seq', 4, true);



ALTER TABLE ONLY eventcraft_previous_release.eventcraft_events
    ADD CONSTRAINT eventcraft_events_id UNIQUE (id);



ALTER TABLE ONLY eventcraft_previous_release.eventcraft_events
    ADD CONSTRAINT eventcraft_events_pkey PRIMARY KEY ("position");



ALTER TABLE ONLY eventcraft_previous_release.eventcraft_events
    ADD CONSTRAINT eventcraft_events_stream_version UNIQUE (stream_id, version);



ALTER TABLE ONLY eventcraft_previous_release.eventcraft_snapshots
    ADD CONSTRAINT eventcraft_snapshots_pkey PRIMARY KEY (stream_id);



ALTER TABLE ONLY eventcraft_previous_release.eventcraft_streams
    ADD CONSTRAINT eventcraft_streams_pkey PRIMARY KEY (stream_id);



CREATE INDEX eventcraft_events_category_position ON eventcraft_previous_release.eventcraft_events USING btree (category, "position");



CREATE INDEX eventcraft_events_type_position ON eventcraft_previous_release.eventcraft_events USING btree (type, "position");



CREATE INDEX eventcraft_streams_category ON eventcraft_previous_release.eventcraft_streams USING btree (category, stream_id);



CREATE TRIGGER eventcraft_events_append_only BEFORE DELETE OR UPDATE ON eventcraft_previous_release.eventcraft_events FOR EACH ROW EXECUTE FUNCTION eventcraft_previous_release.eventcraft_refuse_change();



CREATE TRIGGER eventcraft_events_no_truncate BEFORE TRUNCATE ON eventcraft_previous_release.eventcraft_events FOR EACH STATEMENT EXECUTE FUNCTION eventcraft_previous_release.eventcraft_refuse_change();
