"""The PostgreSQL functions that append: a stream's version, one append, the insert they
share, and a group of appends in one call.

Why the way they take positions keeps the global log gap-free for readers is
the schema's to say (`schema.py`); the conditions they check, `postgres/tag_functions.py`;
the deletions they respect, `postgres/deletion.py`. `schema.ddl` creates them,
and replaces those of a store made by an earlier release.
"""

from __future__ import annotations

from ..events import MAX_STREAM_VERSION
from ..sql.deletion import STREAM_TOMBSTONED_SQLSTATE
from ..sql.schema import (
    APPEND_GROUP,
    CONDITION_FAILED_SQLSTATE,
    EVENTS,
    LOG_LOCK_KEY,
    POSITION_SEQUENCE,
    STREAM_FULL_SQLSTATE,
    STREAMS,
    TAGS,
    WRONG_EXPECTED_VERSION_SQLSTATE,
)

STREAM_VERSION = f"""
CREATE OR REPLACE FUNCTION eventcraft_stream_version(p_stream text) RETURNS bigint
LANGUAGE plpgsql STABLE AS $$
-- plpgsql, not sql: PostgreSQL plans a sql function's query again in every
-- transaction that calls it from plpgsql (80 us of an append at any version),
-- where plpgsql keeps the plan for the session.
BEGIN
    RETURN (SELECT coalesce(max(version), 0) FROM {EVENTS} WHERE stream_id = p_stream);
END
$$"""

APPEND = f"""
CREATE OR REPLACE FUNCTION eventcraft_append(
    p_stream text, p_category text, p_expected bigint, p_events text
) RETURNS text LANGUAGE plpgsql AS $$
-- p_expected: -1 for ANY (APPEND_AT_ANY), 0 for no stream, n for exactly version n.
-- p_events: a JSON array of {{"id", "type", "data", "metadata"}} objects, one
-- parameter where arrays of each field cost the client far more to send; an
-- object may add "recorded_at" (an import keeps the original time), else now().
-- Returns the stream's new version and the events' positions, in a line
-- of numbers separated by spaces.
--
-- No row is locked or updated to check the version: the stream is at n when
-- its event n exists (n = 0: always) and n + 1 does not, which the unique
-- (stream_id, version) index decides as the rows go in; of two appends at the
-- same version the second waits for the first and fails on that index.
DECLARE
    violated text;
BEGIN
    -- The append lock, then the xid, before any position: the ordering rule in
    -- eventstore/schema.py. Shared: appends never wait for each other on it.
    PERFORM pg_advisory_xact_lock_shared({LOG_LOCK_KEY});
    PERFORM pg_current_xact_id();
    -- The EXCEPTION clause makes this block a subtransaction, which writes nothing
    -- before eventcraft_insert_events draws the positions: the rows' xmin is an
    -- xid drawn after every position they hold (the ordering rule).
    BEGIN
        RETURN eventcraft_insert_events(p_stream, p_category, p_expected, p_events::jsonb);
    EXCEPTION WHEN unique_violation THEN
        GET STACKED DIAGNOSTICS violated = CONSTRAINT_NAME;
        IF violated = '{EVENTS}_stream_version' THEN
            RAISE EXCEPTION USING
                ERRCODE = '{WRONG_EXPECTED_VERSION_SQLSTATE}',
                MESSAGE = 'wrong expected version',
                DETAIL = eventcraft_stream_version(p_stream);
        END IF;
        RAISE;
    END;
END
$$"""

_INSERT_HEAD = """
CREATE OR REPLACE FUNCTION eventcraft_insert_events(
    p_stream text, p_category text, p_expected bigint, p_batch jsonb
) RETURNS text LANGUAGE plpgsql AS $$
-- One append: its version check and its rows. It takes no lock and opens no
-- subtransaction: its callers (eventcraft_append, the group function below)
-- hold the append lock and the transaction's xid, and call this in a
-- subtransaction that has written nothing yet, so the xid the rows carry is
-- drawn by their insert, after their positions (the ordering rule). Hence the
-- stream's row goes in last.
DECLARE
    n int := jsonb_array_length(p_batch);
    base bigint := p_expected;
    positions bigint[];
BEGIN
"""

_VERSION_CHECK = f"""\
    base := eventcraft_deletion_base(p_stream, base);  -- deleted streams: postgres/deletion.py
    IF base < 0 THEN
        base := eventcraft_stream_version(p_stream);
    ELSIF base > 0
        AND NOT EXISTS (SELECT FROM {{versions}} WHERE stream_id = p_stream AND version = base) THEN
        RAISE EXCEPTION USING
            ERRCODE = '{WRONG_EXPECTED_VERSION_SQLSTATE}',
            MESSAGE = 'wrong expected version',
            DETAIL = eventcraft_stream_version(p_stream);
    ELSIF base = 0 AND EXISTS (SELECT FROM {STREAMS} WHERE stream_id = p_stream) THEN
        -- Not new: the unique index alone would take version 1 again once retention
        -- removed it (a stream's newest event stays, and with it its row here).
        RAISE EXCEPTION USING
            ERRCODE = '{WRONG_EXPECTED_VERSION_SQLSTATE}',
            MESSAGE = 'wrong expected version',
            DETAIL = eventcraft_stream_version(p_stream);
    END IF;
    IF base + n > {MAX_STREAM_VERSION} THEN
        -- A refusal of this append alone, where the 4-byte column's overflow would fail
        -- every append of its group (stores made before have 8 bytes: the same bound).
        RAISE EXCEPTION USING
            ERRCODE = '{STREAM_FULL_SQLSTATE}',
            MESSAGE = 'stream full',
            DETAIL = {MAX_STREAM_VERSION};
    END IF;
"""

_ONE_EVENT = f"""        INSERT INTO {EVENTS}
            (position, stream_id, version, id, type, data, metadata, recorded_at, category, tags)
        VALUES (nextval('{POSITION_SEQUENCE}'), p_stream, base + 1, (p_batch->0->>'id')::uuid,
                p_batch->0->>'type', p_batch->0->'data', p_batch->0->'metadata',
                coalesce((p_batch->0->>'recorded_at')::timestamptz, now()), p_category,
                CASE WHEN p_batch->0 ? 'tags'
                    THEN ARRAY(SELECT jsonb_array_elements_text(p_batch->0->'tags')) END)
        RETURNING ARRAY[position] INTO positions;
"""

_DRAW_POSITIONS = f"""\
        positions := ARRAY(SELECT nextval('{POSITION_SEQUENCE}') FROM generate_series(1, n));
"""

_EVENT_ROWS = f"""        INSERT INTO {EVENTS}
            (position, stream_id, version, id, type, data, metadata, recorded_at, category, tags)
        SELECT positions[e.i], p_stream, base + e.i, (e.event->>'id')::uuid,
               e.event->>'type', e.event->'data', e.event->'metadata',
               coalesce((e.event->>'recorded_at')::timestamptz, now()), p_category,
               CASE WHEN e.event ? 'tags'
                   THEN ARRAY(SELECT jsonb_array_elements_text(e.event->'tags')) END
        FROM jsonb_array_elements(p_batch) WITH ORDINALITY AS e(event, i);
"""

_INSERT_TAIL = f"""    -- Only tagged events carry the key (postgres/statements.py, batch_json).
    IF p_batch @? '$[*].tags' THEN
        INSERT INTO {TAGS} (tag, position, type)
        SELECT t.tag, positions[e.i], e.event->>'type'
        FROM jsonb_array_elements(p_batch) WITH ORDINALITY AS e(event, i),
             jsonb_array_elements_text(e.event->'tags') AS t(tag);
    END IF;
    IF base = 0 THEN
        INSERT INTO {STREAMS} (stream_id, category) VALUES (p_stream, p_category)
        ON CONFLICT (stream_id) DO NOTHING;
    END IF;
    RETURN array_to_string((base + n) || positions, ' ');
END
$$"""


def insert_events(versions: str = EVENTS, step: str | None = None) -> str:
    """The function `eventcraft_insert_events`, made of the parts every store's shares: the
    version check against the rows of `versions` (the table that holds one row per stored
    event, unique by (stream_id, version)), the rows, the tags and the stream's row.

    `step`: statements (plpgsql, indented as the rows) run once the append's positions are
    drawn and before its event rows go in, in `positions`; with a step an append of one
    event draws its position first too. A partitioned store adds its partitions and key
    rows so (`partitions.py`): whatever changes here changes in its function as well.
    """
    if step is None:
        rows = (
            "    IF n = 1 THEN\n"
            + _ONE_EVENT
            + "    ELSE\n"
            + _DRAW_POSITIONS
            + _EVENT_ROWS
            + "    END IF;\n"
        )
    else:
        rows = _DRAW_POSITIONS + step + _EVENT_ROWS
    return _INSERT_HEAD + _VERSION_CHECK.format(versions=versions) + rows + _INSERT_TAIL


INSERT_EVENTS = insert_events()
"""An unpartitioned store's `eventcraft_insert_events`."""

APPEND_GROUP_FUNCTION = f"""
CREATE OR REPLACE FUNCTION {APPEND_GROUP}(p_members text, p_locks text) RETURNS text
LANGUAGE plpgsql AS $$
-- Several appends in one transaction, one commit (eventstore/grouping.py).
-- p_members: a JSON array of members, each an array of appends, each append
-- [stream, category, expected, events] as eventcraft_append takes them, and
-- for a conditional append a fifth element, its condition {{"q": query,
-- "a": after}} (postgres/tag_functions.py). Each member commits or fails alone: it runs
-- in a subtransaction of its own, rolled back when one of its appends is
-- refused. Returns a line per member: its appends' results (eventcraft_append's)
-- separated by commas, or, when refused, "!", the error's SQLSTATE, the index
-- of the append refused, and the stream's actual version, the position that
-- failed its condition, or the constraint violated. Any other error fails the
-- whole group, as it would a lone append.
--
-- p_locks (NULL when no member writes tags or has a condition): the tag locks,
-- taken before anything else (eventcraft_lock_for): a condition is checked
-- once they are held, and every writer of an event it could match waits.
--
-- The ordering rule (eventstore/schema.py): the append lock and the xid come
-- first; then every append's rows carry the xid of a subtransaction that
-- wrote nothing before drawing their positions: the member's own for a
-- member of one append, one each for the appends of a member of several.
DECLARE
    member jsonb;
    one jsonb;
    answers text[] := '{{}}';
    results text[];
    which int;
    found bigint;
    code text;
    detail text;
    violated text;
BEGIN
    IF p_locks IS NOT NULL THEN
        PERFORM eventcraft_lock_for(p_locks::jsonb);
    END IF;
    PERFORM pg_advisory_xact_lock_shared({LOG_LOCK_KEY});
    PERFORM pg_current_xact_id();
    FOR member IN SELECT value FROM jsonb_array_elements(p_members::jsonb) LOOP
        results := '{{}}';
        which := 0;
        BEGIN
            IF p_locks IS NOT NULL THEN
                -- Every condition of a member first: each reads the store as it
                -- was before the member, whose own events do not refuse it.
                FOR one IN SELECT value FROM jsonb_array_elements(member) LOOP
                    IF jsonb_array_length(one) > 4 THEN
                        found := eventcraft_first_match(one->4->'q', (one->4->>'a')::bigint);
                        IF found IS NOT NULL THEN
                            RAISE EXCEPTION USING
                                ERRCODE = '{CONDITION_FAILED_SQLSTATE}',
                                MESSAGE = 'append condition failed',
                                DETAIL = found;
                        END IF;
                    END IF;
                    which := which + 1;
                END LOOP;
                which := 0;
            END IF;
            IF jsonb_array_length(member) = 1 THEN
                one := member->0;
                results := ARRAY[eventcraft_insert_events(
                    one->>0, one->>1, (one->>2)::bigint, one->3)];
            ELSE
                FOR one IN SELECT value FROM jsonb_array_elements(member) LOOP
                    BEGIN
                        results := results || eventcraft_insert_events(
                            one->>0, one->>1, (one->>2)::bigint, one->3);
                    EXCEPTION WHEN OTHERS THEN
                        RAISE;  -- the block is there for its subtransaction
                    END;
                    which := which + 1;
                END LOOP;
            END IF;
            answers := answers || array_to_string(results, ',');
        EXCEPTION WHEN SQLSTATE '{WRONG_EXPECTED_VERSION_SQLSTATE}'
            OR SQLSTATE '{CONDITION_FAILED_SQLSTATE}' OR SQLSTATE '{STREAM_TOMBSTONED_SQLSTATE}'
            OR SQLSTATE '{STREAM_FULL_SQLSTATE}' OR unique_violation THEN
            GET STACKED DIAGNOSTICS
                code = RETURNED_SQLSTATE, detail = PG_EXCEPTION_DETAIL, violated = CONSTRAINT_NAME;
            IF violated = '{EVENTS}_stream_version' THEN
                -- Another append took the version first: a version conflict.
                code := '{WRONG_EXPECTED_VERSION_SQLSTATE}';
                detail := eventcraft_stream_version(member->which->>0);
                violated := '';
            END IF;
            answers := answers || format(
                '!%s %s %s', code, which, coalesce(nullif(violated, ''), detail));
        END;
    END LOOP;
    RETURN array_to_string(answers, E'\\n');
END
$$"""
