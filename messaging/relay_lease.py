"""A relay's lease: one process publishes the relay's batches at a time, and keeps the
lease for as long as a batch takes.

The lease is the relay's checkpoint row's (`owner` and `lease_until`, in the
projections' table): taken or renewed before a batch, renewed as the
checkpoint moves past it, given up when the relay stops; another process
takes it once it lapses.

A batch is one `publish` call, which returns once the broker confirmed every
message, and a slow broker may take longer than the lease (a publisher waits
up to twice its timeout of 10 s; the lease is 10 s). Were the lease left to
lapse meanwhile, another process would take over and publish the same events
at the same time. So while the call runs, a thread beside it renews the lease
each time half of it has passed, as a subscriber's runner keeps its lease
while its handler runs (`Projector._lease_kept`). The renewal is fenced as the batch's commit
is: it extends the lease only while the row is ours and the checkpoint still
where the batch began. Once it is not, another process has the batch in hand;
the keeper stops, and the commit finds the row moved and follows it.

The lease's end is kept in the database's time, its renewals reckoned on this
process's monotonic clock (`eventcraft.projections.lease_deadline`): a process
whose clock runs ahead does not take a lease that another keeps.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext

from eventcraft.projections import Checkpoint, CheckpointTable, Database, kept_alive, lease_deadline

log = logging.getLogger("eventcraft.messaging")


class RelayLease:
    """The lease of the relay `name`, held by `owner` for `ttl` seconds at a time; with
    `ttl` None there is none (every process publishes; the checkpoint still fences)."""

    def __init__(
        self,
        database: Database,
        name: str,
        owner: str,
        ttl: float | None,
        renewed: Callable[[], None] = lambda: None,
    ) -> None:
        self.database = database
        self.name = name
        self.owner = owner
        self.ttl = ttl
        self.renewed = renewed
        """Called, from the keeping thread, each time a batch renewed the lease half-way."""
        self.held_until = 0.0
        """When the lease lapses, on this process's monotonic clock; 0 when not held."""

    def acquire(self) -> tuple[bool, int | None]:
        """Take or renew the lease: whether this process holds it, and the checkpoint as
        the row says (None when it was not read)."""
        if self.ttl is None:
            return True, None
        if self.held_until - time.monotonic() > self.ttl / 2:
            return True, None  # renewed by a recent batch
        deadline = lease_deadline(self.ttl)
        with self.database.transaction() as connection:
            table = CheckpointTable(connection)
            held = table.acquire_lease(self.name, self.owner, self.ttl)
            row = table.read(self.name)
        self.held_until = deadline if held else 0.0
        return held, None if row is None else row.position

    def ours(self, row: Checkpoint) -> bool:
        return self.ttl is None or row.owner == self.owner

    def renewing_ttl(self) -> float | None:
        """The lease's length, for the checkpoint's commit to renew it with (`advance`'s
        `lease_ttl`); None without a lease."""
        if self.ttl is None:
            return None
        self.held_until = lease_deadline(self.ttl)
        return self.ttl

    def lost(self) -> None:
        """Another process holds it now: the row is asked next time."""
        self.held_until = 0.0

    def release(self) -> None:
        self.held_until = 0.0
        if self.ttl is None:
            return
        with self.database.transaction() as connection:
            CheckpointTable(connection).release_lease(self.name, self.owner)

    def kept(self, position: int) -> AbstractContextManager[None]:
        """Keep the lease while the body publishes the batch that begins after `position`.

        The keeper is joined before the body's caller goes on: no renewal comes after
        the batch's commit, which moves the checkpoint the renewal is fenced by.
        """
        ttl = self.ttl
        if ttl is None:
            return nullcontext()

        def renew() -> bool:
            if self._renew(position):
                return True
            log.warning("relay %r: another process took its lease during a batch", self.name)
            return False

        return kept_alive(
            renew,
            lambda: self.held_until - ttl / 2 - time.monotonic(),
            ttl / 10,
            f"the lease of relay {self.name!r}",
        )

    def _renew(self, position: int) -> bool:
        """Extend the lease if the row is still ours and at `position`; False once not."""
        with self.database.transaction() as connection:
            table = CheckpointTable(connection)
            row = table.read(self.name, lock=True)
            if row is None or row.position != position or not self.ours(row):
                self.lost()
                return False
            table.advance(self.name, position, lease_ttl=self.renewing_ttl())
        self.renewed()
        return True
