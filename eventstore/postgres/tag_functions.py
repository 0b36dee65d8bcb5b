"""Tags, queries and conditional appends in SQL (PostgreSQL), and why they are correct.

An event's tags are kept twice: in its row (`tags`, for reading it) and as
rows of `eventcraft_tags`, (tag, position, type), whose primary key walks one
tag's events in position order. A query item with tags reads the rows of one
of its tags (filtered by the item's types, and by the other tags through the
events' `tags`); an item of types alone walks the type index; the empty
item, the log.

The conditional append (PostgreSQL)
-----------------------------------
An append with the condition (Q, P) must fail if an event matching Q has a
position above P, and must not let one in afterwards below its own positions:
otherwise the log would show a matching event between the decision's read and
its append. Writers of events that match nobody's condition must not wait.

Locks. Every tag has an advisory lock (`postgres/tag_locks.py`, 64 bits of a hash).
An append that writes tagged events takes each of their tags' locks in
*shared* mode; an append with a condition takes, for each item of Q, the
lock of one of the item's tags (the first: any serves) in *exclusive* mode.
An item without tags matches untagged events too, which take no tag lock: a
condition holding such an item takes the store's append lock (schema.py) in
exclusive mode instead, waiting for every append in flight and holding off
new ones. All of an append's, or a group's, tag locks are taken at once in
key order, first of all (`eventcraft_lock_for`), then the append lock, then
the xid; the condition is checked after, in a statement of its own (READ
COMMITTED: a snapshot taken once the locks are held).

Why this is correct. Let C append with condition (Q, P), and W append an
event e matching item I of Q, at position w > P. If I has tags, e carries
all of them (it matches I), so W holds in shared mode the lock of the tag C
holds exclusively; if I has none, C holds the append lock exclusively, which
W takes too. Either way one waits for the other to end. If C took the lock
first, W takes its positions after C ended: w is above C's positions, after
C's decision, which is what a serial log would show. If W took it first, C's
check ran after W ended: W committed, and the check's snapshot shows e (w > P
refuses C), or W rolled back and e does not exist. Group members share one
transaction: a member's check sees the members before it (their rows are the
transaction's own) and the members after it draw higher positions.

Why unrelated writers run in parallel. Two appends wait for each other on a
tag lock only if one checks a tag the other writes or checks, and on the
append lock only for a condition holding an item without tags. Appends
without tags and conditions take no tag lock at all: their cost is unchanged.

No deadlock among these locks: every transaction takes all of its tag locks
first, in one global order, and holds no row or other lock while it waits for
them. The append lock comes after them for the same reason: a transaction
waiting for a tag lock holds no positions and is no writer to readers
(schema.py), so a decision waiting for another does not hold the log back.

A read by query (`read_query`) must return a head H such that every event
matching Q at or below H is in the read, and none can come later: a decision
that appends with P = H has then seen all it decides on, and its condition
covers the rest. When every item of Q has tags, the read takes the condition's
exclusive tag locks (`eventcraft_read_locked`) and reads in the next statement:
no writer of a matching event is in flight, so every matching event is
committed and in the statement's snapshot, and writers after it draw positions
above the largest one there, which is H. One statement, and a head at the top
of the log whatever other writers are doing. A query with an item without
tags reads up to the high-water mark (below which no position can still
fill), as `read_all` does, without locks: its writers take no tag lock.
"""

from __future__ import annotations

from ..encoding import MAX_INT
from ..sql.schema import EVENTS, LOG_LOCK_KEY, TAGS
from .keyed_indexes import matches

LATERAL_MARK = "one statement for the items with tags"
"""In `eventcraft_query_positions`'s body since it reads them so (`schema.QUERY_IN_ONE`)."""

QUERY_POSITIONS = f"""
CREATE OR REPLACE FUNCTION eventcraft_query_positions(
    p_query jsonb, p_after bigint, p_until bigint, p_limit bigint
) RETURNS SETOF bigint LANGUAGE plpgsql STABLE ROWS 10 AS $$
-- ROWS 10: a page of a query is a few positions, each looked up in the primary key;
-- planned for PostgreSQL's default of 1000, a read hashed a scan of the whole log.
-- Positions in (p_after, p_until] of events matching p_query, a JSON array of
-- items [[types], [tags]] (tags sorted, the first walked) or [] for every event:
-- for each item its first p_limit, in position order; an event may come from
-- several items.
-- Read in {LATERAL_MARK}, as every decision's query is: taken apart
-- in a loop, each item cost three statements more, and this function a third of a
-- decision's time on the server.
DECLARE
    item jsonb;
    one_type text;
BEGIN
    IF jsonb_array_length(p_query) = 0 THEN
        RETURN QUERY SELECT e.position FROM {EVENTS} e
            WHERE e.position > p_after AND e.position <= p_until
            ORDER BY e.position LIMIT p_limit;
        RETURN;
    END IF;
    RETURN QUERY SELECT found.position FROM jsonb_array_elements(p_query) AS i(item)
        CROSS JOIN LATERAL (
            SELECT t.position FROM {TAGS} t
            WHERE t.tag = i.item->1->>0 AND t.position > p_after AND t.position <= p_until
                AND (i.item->0 = '[]' OR i.item->0 ? t.type)
                AND (jsonb_array_length(i.item->1) = 1 OR EXISTS (
                    SELECT FROM {EVENTS} e WHERE e.position = t.position
                        AND e.tags @> ARRAY(SELECT jsonb_array_elements_text(i.item->1))))
            ORDER BY t.position LIMIT p_limit) AS found
        WHERE i.item->1 <> '[]';
    FOR item IN SELECT value FROM jsonb_array_elements(p_query) WHERE value->1 = '[]' LOOP
        -- One walk of the type index per type: with = ANY the planner may walk
        -- the primary key instead and filter most of the log.
        FOR one_type IN SELECT jsonb_array_elements_text(item->0) LOOP
            RETURN QUERY SELECT e.position FROM {EVENTS} e
                WHERE {matches("e.type", "one_type")}
                    AND e.position > p_after AND e.position <= p_until
                ORDER BY e.position LIMIT p_limit;
        END LOOP;
    END LOOP;
END
$$"""

FIRST_MATCH = f"""
CREATE OR REPLACE FUNCTION eventcraft_first_match(p_query jsonb, p_after bigint)
RETURNS bigint LANGUAGE plpgsql STABLE AS $$
-- plpgsql for its kept plan, as eventcraft_stream_version (schema.py).
BEGIN
    RETURN (SELECT min(p) FROM eventcraft_query_positions(
        p_query, coalesce(p_after, 0), {MAX_INT}, 1) AS p);
END
$$"""

LOCK_FOR = f"""
CREATE OR REPLACE FUNCTION eventcraft_lock_for(p_locks jsonb) RETURNS void
LANGUAGE plpgsql AS $$
-- p_locks: {{"k": [[key, exclusive], ...] in key order, "log": true when a condition
-- holds an item without tags}} (postgres/tag_locks.py, group_locks). Why: above.
DECLARE
    one jsonb;
BEGIN
    IF (p_locks->>'c')::boolean
        AND current_setting('transaction_isolation') <> 'read committed' THEN
        -- A snapshot taken before the locks were held would miss what they waited for.
        RAISE EXCEPTION 'eventcraft: a conditional append needs READ COMMITTED, not %',
            current_setting('transaction_isolation');
    END IF;
    FOR one IN SELECT value FROM jsonb_array_elements(p_locks->'k') LOOP
        IF (one->>1)::boolean THEN
            PERFORM pg_advisory_xact_lock((one->>0)::bigint);
        ELSE
            PERFORM pg_advisory_xact_lock_shared((one->>0)::bigint);
        END IF;
    END LOOP;
    IF (p_locks->>'log')::boolean THEN
        PERFORM pg_advisory_xact_lock({LOG_LOCK_KEY});
    END IF;
END
$$"""

READ_LOCKED = f"""
CREATE OR REPLACE FUNCTION eventcraft_read_locked(
    p_query jsonb, p_keys bigint[], p_after bigint, p_limit bigint
) RETURNS TABLE (
    id uuid, stream_id text, version bigint, "position" bigint, type text, data text,
    metadata text, recorded_at timestamptz, tags text[], head bigint
) LANGUAGE plpgsql VOLATILE AS $$
-- A read by a query whose items all have tags: p_keys holds one tag lock of each item,
-- taken exclusive, as a condition takes them (why: the module's docstring). The first
-- p_limit events matching p_query after p_after, each with the head; no event: one row
-- of nulls but the head.
#variable_conflict use_column
DECLARE
    one bigint;
    v_head bigint;
BEGIN
    IF current_setting('transaction_isolation') <> 'read committed' THEN
        RAISE EXCEPTION 'eventcraft: a read by query needs READ COMMITTED, not %',
            current_setting('transaction_isolation');
    END IF;
    FOREACH one IN ARRAY p_keys LOOP
        PERFORM pg_advisory_xact_lock(one);
    END LOOP;
    SELECT greatest(coalesce(max(e.position), 0), p_after) INTO v_head FROM {EVENTS} e;
    RETURN QUERY
        SELECT e.id, e.stream_id::text, e.version::bigint, e.position, e.type, e.data::text,
               e.metadata::text, e.recorded_at, e.tags, v_head
        FROM (SELECT DISTINCT p FROM eventcraft_query_positions(p_query, p_after, v_head, p_limit)
              AS p ORDER BY p LIMIT p_limit) AS q
        JOIN {EVENTS} e ON e.position = q.p ORDER BY e.position;
    IF NOT FOUND THEN
        RETURN QUERY SELECT NULL::uuid, NULL::text, NULL::bigint, NULL::bigint, NULL::text,
            NULL::text, NULL::text, NULL::timestamptz, NULL::text[], v_head;
    END IF;
END
$$"""

FUNCTIONS = (QUERY_POSITIONS, FIRST_MATCH, LOCK_FOR, READ_LOCKED)
"""Created before the group function, which calls them."""
