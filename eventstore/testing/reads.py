"""The conformance suite's reads: a stream, the log, their encoded and JSON forms, and the
listing of streams, on every backend."""

from __future__ import annotations

import copy
import pickle
import uuid
from dataclasses import FrozenInstanceError, fields, replace
from datetime import timedelta

import orjson
import pytest
from pydantic import BaseModel

from ..errors import InvalidEvent
from ..events import (
    EVENT_VERSION,
    NewEvent,
    RecordedEvent,
    StreamInfo,
    recorded_at_text,
)
from ..query import Query, QueryItem
from ..store import EventStore
from .events import events


class _Placed(BaseModel):
    order_id: str
    amount_cents: int
    tags: list[str]


class ReadConformance:
    """Reads every backend must answer alike. Needs a `store` fixture."""

    def test_a_stream_reads_forwards_backwards_and_in_pieces(self, store: EventStore) -> None:
        store.append("order-1", events(*"ABCDE"))
        assert [e.type for e in store.read_stream("order-1")] == list("ABCDE")
        assert [e.type for e in store.read_stream("order-1", from_version=3)] == list("CDE")
        assert [e.type for e in store.read_stream("order-1", limit=2)] == list("AB")
        assert [e.type for e in store.read_stream("order-1", backwards=True)] == list("EDCBA")
        backwards = store.read_stream("order-1", from_version=2, backwards=True)
        assert [e.type for e in backwards] == list("BA")
        assert list(store.read_stream("order-1", limit=0)) == []
        assert list(store.read_stream("order-404")) == []

    def test_a_stream_reads_encoded_as_it_reads_decoded(self, store: EventStore) -> None:
        payloads = [{"n": n, "note": 'é\\"\t', "nested": {"ok": n % 2 == 0}} for n in range(2500)]
        versions = [3, "3", None, {"major": 2}, True]
        store.append(
            "order-1",
            [NewEvent("A", {"x": 1}, metadata={"user": "ann", EVENT_VERSION: v}) for v in versions],
        )
        # Only the top-level key counts: a nested one is some other thing's version.
        store.append("order-1", [NewEvent("A", {}, metadata={"user": {EVENT_VERSION: 9}})])
        store.append("order-1", [NewEvent(f"T{n % 3}", p) for n, p in enumerate(payloads)])
        store.append("order-2", events("B"))
        encoded = list(store.read_stream_encoded("order-1"))
        decoded = list(store.read_stream("order-1"))
        assert len(encoded) == 2506  # more than one page on every backend
        assert [(e.version, e.type) for e in encoded] == [(d.version, d.type) for d in decoded]
        assert [orjson.loads(e.data) for e in encoded] == [d.data for d in decoded]
        kept = [e.event_version for e in encoded]
        assert kept[:3] + kept[4:8] == ["3", '"3"', "null", "true", None, None, None]
        assert orjson.loads(kept[3] or "") == {"major": 2}  # the spacing is the backend's
        assert [e.version for e in store.read_stream_encoded("order-1", from_version=2505)] == [
            2505,
            2506,
        ]
        assert list(store.read_stream_encoded("order-404")) == []
        with pytest.raises(InvalidEvent, match="from_version"):
            store.read_stream_encoded("order-1", from_version=-1)

    def test_an_event_comes_back_as_it_was_appended(self, store: EventStore) -> None:
        correlation, causation = str(uuid.uuid4()), str(uuid.uuid4())
        event = NewEvent(
            "Placed",
            {"amount": 12.5, "lines": [{"sku": "a", "n": 2}], "note": None, "ok": True},
            metadata={"correlation_id": correlation, "causation_id": causation, "user": "ann"},
        )
        position = store.append("order-1", [event]).positions[0]
        (recorded,) = store.read_stream("order-1")
        assert isinstance(recorded, RecordedEvent)
        assert (recorded.id, recorded.stream_id, recorded.version) == (event.id, "order-1", 1)
        assert (recorded.position, recorded.type) == (position, "Placed")
        assert recorded.data == event.data
        assert recorded.metadata == event.metadata
        assert recorded.category == "order"
        assert recorded.recorded_at.utcoffset() == timedelta(0)

    def test_recorded_events_are_immutable(self, store: EventStore) -> None:
        store.append("order-1", events("Placed"))
        (recorded,) = store.read_stream("order-1")
        with pytest.raises(AttributeError):
            recorded.version = 5  # type: ignore[misc]

    def test_every_read_gives_true_recorded_events(self, store: EventStore) -> None:
        # Backends build events unchecked (events.UnsealedEvent): what comes out must be
        # indistinguishable from a RecordedEvent made by hand.
        store.append("order-1", [NewEvent("Placed", {"n": 1}, tags=["order:1"])])
        reads = [
            *store.read_stream("order-1"),
            *store.read_all(),
            *store.read_query(Query([QueryItem(tags=["order:1"])])).events,
        ]
        for read in reads:
            assert type(read) is RecordedEvent
            same = RecordedEvent(**{f.name: getattr(read, f.name) for f in fields(read)})
            assert read == same and same == read
            assert pickle.loads(pickle.dumps(read)) == read
            assert copy.copy(read) == read
            assert replace(read, version=9).version == 9
            with pytest.raises(FrozenInstanceError):
                read.data = {}  # type: ignore[misc]

    def test_pydantic_payloads_are_stored_as_their_json(self, store: EventStore) -> None:
        store.append(
            "order-1", [NewEvent("Placed", _Placed(order_id="1", amount_cents=5, tags=[]))]
        )
        (recorded,) = store.read_stream("order-1")
        assert _Placed.model_validate(recorded.data) == _Placed(
            order_id="1", amount_cents=5, tags=[]
        )

    def test_read_all_starts_after_a_position_and_stops_at_a_limit(self, store: EventStore) -> None:
        positions = [store.append(f"s-{i}", events("E")).positions[0] for i in range(5)]
        assert [e.position for e in store.read_all(after=positions[1])] == positions[2:]
        assert [e.position for e in store.read_all(after=positions[1], limit=2)] == positions[2:4]
        assert list(store.read_all(after=positions[-1])) == []
        assert store.high_water_mark() == positions[-1]

    def test_read_all_filters_by_category_and_type(self, store: EventStore) -> None:
        store.append("order-1", events("Placed", "Paid"))
        store.append("invoice-1", events("Issued"))
        store.append("order-2", events("Placed"))
        store.append("order", events("Odd"))  # a stream id with no "-" is its own category
        orders = [(e.stream_id, e.type) for e in store.read_all(categories=["order"])]
        assert orders == [
            ("order-1", "Placed"),
            ("order-1", "Paid"),
            ("order-2", "Placed"),
            ("order", "Odd"),
        ]
        placed = [e.stream_id for e in store.read_all(types="Placed")]
        assert placed == ["order-1", "order-2"]
        both = store.read_all(categories=["order", "invoice"], types=["Issued", "Paid"])
        assert [e.type for e in both] == ["Paid", "Issued"]
        assert [e.type for e in store.read_all(categories="order", limit=1)] == ["Placed"]

    def test_a_long_log_reads_completely_in_order(self, store: EventStore) -> None:
        for batch in range(5):
            store.append(f"bulk-{batch}", events(*["E"] * 1000))
        positions = [e.position for e in store.read_all()]
        assert len(positions) == 5000
        assert positions == sorted(set(positions))
        # Copied reads take rows in passes of thousands (postgres/copy_out.py): all of them.
        assert [r.position for r in store.read_all_encoded()] == positions
        lines = "".join(chunk.text for chunk in store.read_all_json()).splitlines()
        assert [orjson.loads(line)["position"] for line in lines] == positions
        assert [e.version for e in store.read_stream("bulk-3", from_version=998)] == [
            998,
            999,
            1000,
        ]

    def test_the_log_reads_encoded_as_it_reads_decoded(self, store: EventStore) -> None:
        tags = ["customer:ann", 'odd:\\"é, {x}']  # what COPY and arrays escape or quote
        store.append(
            "order-1", [NewEvent("Placed", {"b": [1, 2.5, None], "a": 'é\\"\t'}, tags=tags)]
        )
        store.append("invoice-1", [NewEvent("Sent", {}, {"correlation_id": "c-1"})])
        store.append("order-2", events("Placed", "Shipped", total=3))
        decoded = list(store.read_all())
        encoded = list(store.read_all_encoded())
        assert [r.position for r in encoded] == [e.position for e in decoded]
        for record, event in zip(encoded, decoded, strict=True):
            assert record.id == str(event.id)
            assert (record.stream_id, record.version, record.type) == (
                event.stream_id,
                event.version,
                event.type,
            )
            assert orjson.loads(record.data) == event.data
            assert orjson.loads(record.metadata) == event.metadata
            assert record.recorded_at == recorded_at_text(event.recorded_at)
            assert record.tags == event.tags
        last = decoded[-1].position
        assert [r.tags for r in encoded] == [tuple(sorted(tags)), (), (), ()]
        assert [r.position for r in store.read_all_encoded(decoded[0].position, last - 1)] == [
            e.position for e in decoded[1:-1]
        ]
        orders = store.read_all_encoded(categories="order", types=["Placed"])
        assert [r.stream_id for r in orders] == ["order-1", "order-2"]
        assert list(store.read_all_encoded(last)) == []
        with pytest.raises(InvalidEvent, match="until"):
            list(store.read_all_encoded(0, -1))

    def test_the_log_reads_as_json_lines_of_every_field(self, store: EventStore) -> None:
        tags = ["order:1", 'odd "tag"']
        store.append(
            "order-1", [NewEvent("Placed", {"b": [1, 2.5, None], "a": 'é\\"\t'}, tags=tags)]
        )
        store.append('invoice-"1"', [NewEvent("Sent\\", {}, {"correlation_id": "c-1"})])
        store.append("order-2", events("Placed", "Shipped", total=3))
        decoded = list(store.read_all())
        chunks = list(store.read_all_json())
        text = "".join(chunk.text for chunk in chunks)
        assert sum(chunk.events for chunk in chunks) == len(decoded) == len(text.splitlines())
        assert chunks[-1].last_position == decoded[-1].position
        for line, event in zip(text.splitlines(keepends=True), decoded, strict=True):
            assert line.endswith("}\n")
            document = orjson.loads(line)
            assert list(document) == sorted(document)
            assert document == {
                "data": event.data,
                "id": str(event.id),
                "metadata": event.metadata,
                "position": event.position,
                "recorded_at": recorded_at_text(event.recorded_at),
                "stream_id": event.stream_id,
                "tags": list(event.tags),
                "type": event.type,
                "version": event.version,
            }
        assert "".join(c.text for c in store.read_all_json()) == text  # the same bytes again
        first, last = decoded[0].position, decoded[-1].position
        middle = "".join(c.text for c in store.read_all_json(first, last - 1))
        assert middle.splitlines() == text.splitlines()[1:-1]
        orders = "".join(c.text for c in store.read_all_json(categories="order"))
        assert [orjson.loads(line)["stream_id"] for line in orders.splitlines()] == [
            "order-1",
            "order-2",
            "order-2",
        ]
        assert list(store.read_all_json(last)) == []
        with pytest.raises(InvalidEvent, match="until"):
            list(store.read_all_json(0, -1))

    def test_streams_are_listed_in_order_with_their_versions(self, store: EventStore) -> None:
        store.append("order-2", events("A"))
        store.append("invoice-1", events("A", "B"))
        store.append("order-10", events("A", "B", "C"))
        assert list(store.list_streams()) == [
            StreamInfo("invoice-1", 2),
            StreamInfo("order-10", 3),
            StreamInfo("order-2", 1),
        ]
        assert [s.stream_id for s in store.list_streams(category="order")] == [
            "order-10",
            "order-2",
        ]
        assert [s.stream_id for s in store.list_streams(after="order-10")] == ["order-2"]
        assert [s.stream_id for s in store.list_streams(limit=1)] == ["invoice-1"]
        assert store.stream_version("order-10") == 3
        assert store.stream_version("order-404") == 0

    def test_a_category_lists_its_streams_and_no_other_named_alike(self, store: EventStore) -> None:
        # Ids that sort between "order" and "order." belong to other categories, as do
        # those that share the name's first letters; "order" and "order-..." are its own.
        for stream_id in ("order!x", "order-1", "orders-1", "order", "order--2", "order,-1",
                          "order!x-1", "orde-1", "order.x", "order x", "order-é"):  # fmt: skip
            store.append(stream_id, events("A"))
        listed = [s.stream_id for s in store.list_streams(category="order")]
        assert listed == ["order", "order--2", "order-1", "order-é"]
        after = store.list_streams(category="order", after="order--2", limit=1)
        assert [s.stream_id for s in after] == ["order-1"]
        assert [s.stream_id for s in store.list_streams(category="order!x")] == [
            "order!x",
            "order!x-1",
        ]
