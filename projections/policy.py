"""What a projection does when a handler keeps failing."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from .errors import DefinitionError


@dataclass(frozen=True)
class ErrorPolicy:
    """Retry a failing event with back-off, then park it and stop or skip.

    Either way the event is parked in the error store with its exception;
    `then="stop"` leaves the checkpoint just before it (nothing after it is
    applied until it is retried or discarded), `then="skip"` moves on.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import ErrorPolicy, ProjectionRunner, Subscription

        def send_receipt(event):
            if not event.data.get("email"):
                raise ValueError("no address to mail the receipt to")

        receipts = Subscription("receipts", send_receipt,
                                on_error=ErrorPolicy(attempts=2, backoff=0.01, then="skip"))
        store = EventStore.open("sqlite:///shop.db")
        store.append("order-1", [NewEvent("OrderPaid", {"email": ""})])
        store.append("order-2", [NewEvent("OrderPaid", {"email": "bob@example.com"})])
        with ProjectionRunner(store, [receipts]) as runner:
            runner.catch_up()  # order-1 tried twice, parked and skipped; order-2 mailed
            (parked,) = runner.parked("receipts")
            assert (parked.stream_id, parked.attempts) == ("order-1", 2)
            assert runner.status()[0].position == 2
        store.close()
    """

    attempts: int = 3
    """Tries before the event is parked, the first included."""
    backoff: float = 0.05
    """Seconds before the second try; doubled before each further one."""
    then: Literal["stop", "skip"] = "stop"
    """After the last failed try: stop the projection, or skip the event."""

    def __post_init__(self) -> None:
        if isinstance(self.attempts, bool) or not isinstance(self.attempts, int):
            raise DefinitionError(f"attempts must be an int >= 1, not {self.attempts!r}")
        if self.attempts < 1:
            raise DefinitionError(f"attempts must be an int >= 1, not {self.attempts!r}")
        if not isinstance(self.backoff, int | float) or self.backoff < 0:
            raise DefinitionError(f"backoff must be seconds >= 0, not {self.backoff!r}")
        if self.then not in ("stop", "skip"):
            raise DefinitionError(f'then must be "stop" or "skip", not {self.then!r}')

    def pause_before(self, attempt: int) -> float:
        """The back-off before try number `attempt` (2, 3, ...)."""
        return float(self.backoff * 2 ** (attempt - 2))
