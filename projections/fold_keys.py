"""Keys a fold can declare instead of computing: the same answer, readable by Spark.

A fold's `key` may be any function of the event. Most folds key by the
stream, and saying so with `StreamKey` lets a Spark replay compute the key
in the JVM from the `stream_id` column, sparing every event a trip through
Python before the shuffle. In process it is just the function it states.
"""

from __future__ import annotations

from eventcraft.eventstore import RecordedEvent

from .errors import DefinitionError


class StreamKey:
    """The event's stream id, without `prefix` where it starts with it.

    ``StreamKey("account-")`` keys `account-42`'s events by `"42"`;
    ``StreamKey()`` keys them by `"account-42"`.

    Example::

        from eventcraft.eventstore import EventStore, NewEvent
        from eventcraft.projections import StreamKey

        with EventStore.open("memory://") as store:
            store.append("account-42", [NewEvent("Deposited", {"cents": 500})])
            (event,) = store.read_all()
        assert StreamKey("account-")(event) == "42"  # a Fold's key: key=StreamKey("account-")
        assert StreamKey()(event) == "account-42"
        assert StreamKey("order-")(event) == "account-42"  # no such prefix: the whole id
    """

    __slots__ = ("prefix",)

    def __init__(self, prefix: str = "") -> None:
        if not isinstance(prefix, str):
            raise DefinitionError(f"a StreamKey prefix is a str, not {prefix!r}")
        self.prefix = prefix

    def __call__(self, event: RecordedEvent) -> str:
        return event.stream_id.removeprefix(self.prefix)

    def __repr__(self) -> str:
        return f"StreamKey({self.prefix!r})"
