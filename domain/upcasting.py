"""Upcasting: old stored events brought to today's schema as they are read.

Stored events never change. Each step turns the data of one event type from
schema version n into n + 1; reading a version-1 event of a type now at
version 3 runs the steps 1→2 and 2→3, in that order.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from eventcraft.eventstore import EncodedEvent, RecordedEvent

from .checks import positive_int
from .errors import NoUpcastPath, RegistrationError

Upcaster = Callable[[dict[str, Any]], dict[str, Any]]
"""One step: the data at version n in (a copy, yours to change), the data at n + 1 out.

Example::

    from eventcraft.domain import DomainEvent, EventRegistry, Upcaster
    from eventcraft.eventstore import EventStore, NewEvent

    bank_events = EventRegistry()

    @bank_events.event("MoneyDeposited", version=3)
    class MoneyDeposited(DomainEvent):
        amount: int
        currency: str

    steps: dict[int, Upcaster] = {  # by the version each starts from
        1: lambda data: {"amount": data["cents"]},  # version 2 renamed cents
        2: lambda data: {**data, "currency": "EUR"},  # version 3 added the currency
    }
    for from_version, step in steps.items():
        bank_events.upcaster("MoneyDeposited", from_version=from_version)(step)

    store = EventStore.open("sqlite:///bank.db")
    store.append("account-7", [NewEvent("MoneyDeposited", {"cents": 500})])  # by version 1
    (stored,) = store.read_stream("account-7")
    assert bank_events.decode(stored) == MoneyDeposited(amount=500, currency="EUR")
    assert stored.data == {"cents": 500}  # stored events never change
    store.close()
"""


class UpcasterChain:
    """The upcasting steps of every event type of a registry."""

    def __init__(self) -> None:
        self._steps: dict[tuple[str, int], Upcaster] = {}

    def add(self, event_type: str, from_version: int, step: Upcaster) -> None:
        positive_int(f"upcaster for {event_type!r}: from_version", from_version)
        if (event_type, from_version) in self._steps:
            raise RegistrationError(
                f"{event_type!r} already has an upcaster from version {from_version}"
            )
        self._steps[(event_type, from_version)] = step

    def of(self, event_type: str) -> dict[int, Upcaster]:
        """`event_type`'s steps by the version each starts from, in order."""
        return {v: step for (t, v), step in sorted(self._steps.items()) if t == event_type}

    def upcast(
        self,
        event: RecordedEvent | EncodedEvent,
        stream_id: str,
        data: dict[str, Any],
        stored: int,
        current: int,
    ) -> dict[str, Any]:
        """`event`'s `data` brought from schema version `stored` to `current`."""
        try:
            return self._upcast(event.type, data, stored, current)
        except _NoPath as missing:
            raise NoUpcastPath(
                stream_id, event.version, event.type, stored, current, missing.why
            ) from missing.__cause__

    def _upcast(
        self, event_type: str, data: dict[str, Any], stored: int, current: int
    ) -> dict[str, Any]:
        # Names no stream or event: the error is built by `upcast` only when one is raised,
        # as this runs for every older event read.
        if isinstance(stored, bool) or not isinstance(stored, int) or stored < 1:
            raise _NoPath(f"the stored event_version {stored!r} is not a positive int")
        if stored > current:
            raise _NoPath("it was written by a newer schema than this code knows")
        steps = self._steps
        for version in range(stored, current):
            step = steps.get((event_type, version))
            if step is None:
                raise _NoPath(f"no upcaster from version {version} to {version + 1}")
            try:
                data = step(dict(data))
            except Exception as error:
                raise _NoPath(f"the upcaster from version {version} failed: {error!r}") from error
            if not isinstance(data, dict):
                raise _NoPath(
                    f"the upcaster from version {version} returned "
                    f"{type(data).__name__}, not a dict"
                )
        return data


class _NoPath(Exception):
    def __init__(self, why: str) -> None:
        super().__init__(why)
        self.why = why
