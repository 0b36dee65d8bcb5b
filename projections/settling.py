"""Settling a parked event: retried or discarded, once, whoever asks at the same moment.

A projection's parked event is retried in one transaction with its
checkpoint, as any batch is. A subscriber's cannot be: its handler has
effects outside the read-model database, and may write to it (a process
manager appends to the store, on SQLite the same file), so it runs outside
any transaction. Its entry is therefore claimed first, in one transaction:
marked as retried by this runner until a time a little ahead, which a
thread renews while the handler runs. The entry goes once the handler has
returned, and is given back, as it was, if the handler raises. A process
killed while the handler runs leaves the entry claimed; its claim lapses,
since nobody renews it, and the next retry takes it: the event is not lost,
under "skip" either. While a claim is live, every other retry (or discard)
of that event is refused, so one delivers it at a time.
"""

from __future__ import annotations

import logging
import uuid
from contextlib import AbstractContextManager

import sqlalchemy as sa
from eventcraft.eventstore import RecordedEvent

from . import checkpoint, clock, parking
from .database import Database
from .errors import ParkedEventNotFound
from .keeping import kept_alive
from .parking import ParkedEvent
from .subscription import Subscription

log = logging.getLogger("eventcraft.projections")

CLAIM_TTL = 10.0
"""Seconds a retry's claim lasts unless renewed, when its runner runs without leases."""


def locked(
    connection: sa.Connection, name: str, position: int
) -> tuple[checkpoint.Checkpoint, ParkedEvent]:
    """The locked checkpoint row and the event parked at `position`, unclaimed or its
    claim lapsed.

    Every claim and every settling locks the checkpoint row first: of two that
    settle one event, the second finds it gone, or claimed by the first.
    """
    row = checkpoint.read(connection, name, lock=True)
    assert row is not None, "setup() created the row"
    parked = parking.find(connection, name, position)
    if parked is None:
        raise ParkedEventNotFound(f"projection {name!r} has no event parked at {position}")
    claimer, until = parked.claimed_by, parked.claimed_until
    if claimer is not None and until is not None and until >= clock.read_now(connection):
        raise _claimed(name, position, claimer)
    return row, parked


def redeliver(
    database: Database,
    subscription: Subscription,
    position: int,
    event: RecordedEvent | None,
    *,
    owner: str,
    ttl: float | None,
) -> None:
    """Deliver the event parked at `position` (None: no event has that position, settled
    without delivering it), under a claim that lasts `ttl` seconds unless renewed.

    The claim carries the runner's `owner` name and a tag of this retry's, so
    that two retries of one runner never take each other's.
    """
    name = subscription.name
    claimer = f"{owner}/{uuid.uuid4().hex[:8]}"
    ttl = CLAIM_TTL if ttl is None else ttl
    with database.transaction() as connection:
        locked(connection, name, position)
        if not parking.claim(connection, name, position, claimer, ttl=ttl):
            # A claimer whose own claim had lapsed renewed it meanwhile: it is alive.
            raise _claimed(name, position, "another retry")
    try:
        with _kept_live(database, name, position, claimer, ttl):
            if event is not None:
                subscription.deliver(event)
    except BaseException:
        with database.transaction() as connection:
            parking.unclaim(connection, name, position, claimer)
        raise
    with database.transaction() as connection:
        row = checkpoint.read(connection, name, lock=True)
        parking.remove_claimed(connection, name, position, claimer)
        if row is not None and position > row.position:
            checkpoint.advance(connection, name, position)


def _kept_live(
    database: Database, name: str, position: int, claimer: str, ttl: float
) -> AbstractContextManager[None]:
    """Renew the claim every third of `ttl` until the block ends: a handler that outlasts
    `ttl` keeps its claim, and only a dead process's lapses."""

    def renew() -> bool:
        with database.transaction() as connection:
            held = parking.renew_claim(connection, name, position, claimer, ttl=ttl)
        if not held:
            log.warning(
                "projection %r: the retry of the event at %s lost its claim", name, position
            )
        return held

    return kept_alive(renew, lambda: ttl / 3, ttl / 3, f"the claim of {name!r} at {position}")


def _claimed(name: str, position: int, by: str) -> ParkedEventNotFound:
    return ParkedEventNotFound(
        f"projection {name!r}: the event parked at {position} is being retried by {by}"
    )
