"""The end-to-end example on an embedded SQLite file: `make demo`.

Appends a few order and account streams, shows optimistic concurrency and a
safe retry, and reads the log back by stream, by category and as a whole.
"""

from __future__ import annotations

import sys
import uuid
from pathlib import Path

from eventstore import NO_STREAM, EventStore, NewEvent, WrongExpectedVersion

DEFAULT_DB = Path("var/demo/events.db")


def main(db: Path = DEFAULT_DB) -> None:
    for stale in db.parent.glob(f"{db.name}*"):
        stale.unlink()  # each run starts from an empty log
    correlation = str(uuid.uuid4())

    def meta(causation: str | None = None) -> dict[str, str]:
        return {"correlation_id": correlation, "causation_id": causation or correlation}

    with EventStore.open(f"sqlite:///{db}") as store:
        placed = NewEvent("OrderPlaced", {"customer": "ann", "lines": 2}, meta())
        store.append("order-42", [placed], expected_version=NO_STREAM)
        store.append(
            "order-42",
            [NewEvent("OrderPaid", {"amount_cents": 4200}, meta(str(placed.id)))],
            expected_version=1,
        )
        store.append("account-ann", [NewEvent("AccountOpened", {"owner": "ann"}, meta())])
        store.append("order-43", [NewEvent("OrderPlaced", {"customer": "bob", "lines": 1})])

        try:
            store.append("order-42", [NewEvent("OrderCancelled", {})], expected_version=1)
        except WrongExpectedVersion as error:
            print(f"refused as it should be: {error}")

        shipped = [NewEvent("OrderShipped", {"carrier": "post"}, meta())]
        first = store.append("order-42", shipped, expected_version=2)
        again = store.append("order-42", shipped, expected_version=2)  # a client's retry
        print(f"retry answered with the first result: {again == first} ({first})")

        print("\norder-42, by version:")
        for event in store.read_stream("order-42"):
            print(f"  v{event.version} {event.type:<15} {event.data}")
        print("\nthe order category:")
        for event in store.read_all(categories=["order"]):
            print(f"  @{event.position} {event.stream_id:<10} {event.type}")
        print("\nthe whole log:")
        for event in store.read_all():
            print(f"  @{event.position} {event.stream_id:<12} v{event.version} {event.type}")
        streams = ", ".join(f"{s.stream_id} (v{s.version})" for s in store.list_streams())
        print(f"\nstreams: {streams}")
        print(f"high-water mark: {store.high_water_mark()}  (stored in {db})")


if __name__ == "__main__":
    main(Path(sys.argv[1]) if len(sys.argv) > 1 else DEFAULT_DB)
