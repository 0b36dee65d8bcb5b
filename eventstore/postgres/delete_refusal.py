"""The refusal of DELETE on the events table but in a retention run's transaction.

The store's row trigger (`schema.py`) refuses every UPDATE and DELETE of events;
retention's first run (`retention.py`) narrows it to UPDATE and refuses DELETE by a
statement trigger with this function, which lets a statement through only in a
transaction that set `SETTING` to `apply`, as only a run does (`SET LOCAL`). A
partitioned store (`partitions.py`) has the function from the start: statement triggers
fire for the table a statement names, not for its partitions, so each partition carries
one of its own, made with it.
"""

from __future__ import annotations

from ..sql.schema import APPEND_ONLY_SQLSTATE

SETTING = "eventcraft.retention"
"""The setting a retention run's transaction sets to `apply`."""

FUNCTION = f"""CREATE OR REPLACE FUNCTION eventcraft_refuse_delete() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF current_setting('{SETTING}', true) = 'apply' THEN
        RETURN NULL;
    END IF;
    RAISE EXCEPTION USING
        ERRCODE = '{APPEND_ONLY_SQLSTATE}',
        MESSAGE = format('%s is append-only: %s refused', TG_TABLE_NAME, TG_OP);
END
$$"""
"""The trigger function (for each statement, BEFORE DELETE)."""
