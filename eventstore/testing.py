"""The conformance suite every backend passes.

Subclass `EventStoreConformance` in a test module and provide a `store`
fixture that yields a fresh, empty `EventStore` on your backend::

    class TestMyBackend(EventStoreConformance):
        @pytest.fixture
        def store(self):
            with EventStore.open("mybackend://...") as store:
                yield store
"""

from __future__ import annotations

import copy
import math
import pickle
import uuid
from collections.abc import Callable
from dataclasses import FrozenInstanceError, fields, replace
from datetime import timedelta

import orjson
import pytest
from pydantic import BaseModel

from .errors import DuplicateEventId, InvalidEvent, WrongExpectedVersion
from .events import (
    ANY,
    EVENT_VERSION,
    NO_STREAM,
    NewEvent,
    RecordedEvent,
    StreamInfo,
    recorded_at_text,
)
from .query import Query, QueryItem
from .store import EventStore
from .testing_deletion import DeletionConformance
from .testing_import import ImportConformance
from .testing_input import InputConformance
from .testing_many import AppendManyConformance
from .testing_personal import PersonalConformance
from .testing_query import QueryConformance
from .testing_snapshots import SnapshotConformance
from .testing_waiting import WaitingConformance


def events(*types: str, **data: object) -> list[NewEvent]:
    """New events of the given types, each carrying `data`."""
    return [NewEvent(type=t, data=dict(data)) for t in types]


LARGE = 1001
"""Events in a large batch: more than PostgreSQL writes in one call, so it writes them in
parts, in one transaction."""


def many(count: int) -> list[NewEvent]:
    """`count` new events numbered by their `n`."""
    return [NewEvent("Numbered", {"n": n}) for n in range(count)]


class _Placed(BaseModel):
    order_id: str
    amount_cents: int
    tags: list[str]


class EventStoreConformance(
    AppendManyConformance,
    DeletionConformance,
    ImportConformance,
    InputConformance,
    PersonalConformance,
    QueryConformance,
    SnapshotConformance,
    WaitingConformance,
):
    """Behaviour every backend must show. Needs a `store` fixture: a new, empty store."""

    # --- appending and optimistic concurrency ---------------------------------

    def test_a_new_stream_starts_at_version_1(self, store: EventStore) -> None:
        result = store.append("order-1", events("Placed", "Paid"), expected_version=NO_STREAM)
        assert result.version == 2
        assert len(result.positions) == 2
        assert result.positions[0] < result.positions[1]
        assert [e.version for e in store.read_stream("order-1")] == [1, 2]

    def test_positions_increase_across_streams(self, store: EventStore) -> None:
        a = store.append("order-1", events("Placed"))
        b = store.append("order-2", events("Placed", "Paid"))
        c = store.append("order-1", events("Paid"))
        positions = [*a.positions, *b.positions, *c.positions]
        assert positions == sorted(positions)
        assert len(set(positions)) == 4
        assert [e.position for e in store.read_all()] == positions

    def test_an_append_at_the_expected_version_succeeds(self, store: EventStore) -> None:
        store.append("order-1", events("Placed"), expected_version=NO_STREAM)
        result = store.append("order-1", events("Paid", "Shipped"), expected_version=1)
        assert result.version == 3
        assert store.append("order-1", events("Closed"), expected_version=3).version == 4

    def test_a_wrong_expected_version_writes_nothing(self, store: EventStore) -> None:
        store.append("order-1", events("Placed", "Paid"))
        before = list(store.read_all())
        with pytest.raises(WrongExpectedVersion) as caught:
            store.append("order-1", events("Shipped"), expected_version=1)
        assert (caught.value.stream_id, caught.value.expected, caught.value.actual) == (
            "order-1",
            1,
            2,
        )
        assert "order-1" in str(caught.value)
        assert list(store.read_all()) == before
        assert store.stream_version("order-1") == 2

    def test_no_stream_refuses_a_stream_that_exists(self, store: EventStore) -> None:
        store.append("order-1", events("Placed"))
        with pytest.raises(WrongExpectedVersion) as caught:
            store.append("order-1", events("Placed"), expected_version=NO_STREAM)
        assert caught.value.expected is NO_STREAM
        assert caught.value.actual == 1

    def test_expecting_a_version_of_a_missing_stream_fails(self, store: EventStore) -> None:
        with pytest.raises(WrongExpectedVersion) as caught:
            store.append("order-9", events("Paid"), expected_version=3)
        assert caught.value.actual == 0
        assert list(store.read_stream("order-9")) == []
        assert list(store.list_streams()) == []

    def test_expected_version_0_means_no_stream(self, store: EventStore) -> None:
        assert store.append("order-1", events("Placed"), expected_version=0).version == 1
        with pytest.raises(WrongExpectedVersion):
            store.append("order-1", events("Placed"), expected_version=0)

    def test_any_appends_whatever_the_version(self, store: EventStore) -> None:
        assert store.append("order-1", events("A"), expected_version=ANY).version == 1
        assert store.append("order-1", events("B", "C"), expected_version=ANY).version == 3

    # --- idempotent retries ----------------------------------------------------

    @pytest.mark.parametrize("expected", [ANY, NO_STREAM, 0], ids=["any", "no-stream", "zero"])
    def test_a_retried_append_returns_the_first_result_and_writes_nothing(
        self, store: EventStore, expected: object
    ) -> None:
        batch = events("Placed", "Paid")
        first = store.append("order-1", batch, expected_version=expected)  # type: ignore[arg-type]
        store.append("order-2", events("Placed"))
        again = store.append("order-1", batch, expected_version=expected)  # type: ignore[arg-type]
        assert again == first
        assert store.stream_version("order-1") == 2
        assert len(list(store.read_all())) == 3

    def test_a_retry_after_later_appends_still_returns_the_first_result(
        self, store: EventStore
    ) -> None:
        batch = events("Paid")
        store.append("order-1", events("Placed"))
        first = store.append("order-1", batch, expected_version=1)
        store.append("order-1", events("Shipped"), expected_version=2)
        assert store.append("order-1", batch, expected_version=1) == first
        assert store.stream_version("order-1") == 3

    def test_an_event_id_reused_in_another_stream_is_refused(self, store: EventStore) -> None:
        batch = events("Placed")
        store.append("order-1", batch)
        with pytest.raises(DuplicateEventId) as caught:
            store.append("order-2", batch)
        assert caught.value.event_id == batch[0].id
        assert "order-1" in str(caught.value)
        assert store.stream_version("order-2") == 0

    def test_stored_ids_in_another_order_are_refused(self, store: EventStore) -> None:
        batch = events("A", "B")
        store.append("order-1", batch)
        with pytest.raises(DuplicateEventId):
            store.append("order-1", list(reversed(batch)))
        assert store.stream_version("order-1") == 2

    def test_a_batch_mixing_stored_and_new_ids_writes_nothing(self, store: EventStore) -> None:
        batch = events("A")
        store.append("order-1", batch)
        with pytest.raises(DuplicateEventId):
            store.append("order-1", [*batch, *events("B")])
        assert [e.type for e in store.read_stream("order-1")] == ["A"]

    def test_a_batch_naming_one_id_twice_is_refused(self, store: EventStore) -> None:
        event = NewEvent("A", {})
        with pytest.raises(InvalidEvent, match="twice"):
            store.append("order-1", [event, event])
        assert list(store.read_all()) == []

    # --- large batches -----------------------------------------------------------

    def test_a_large_batch_is_one_append(self, store: EventStore) -> None:
        store.append("order-1", events("A"))
        result = store.append("order-1", many(LARGE), expected_version=1)
        assert result.version == LARGE + 1
        stored = list(store.read_stream("order-1", from_version=2))
        assert [e.position for e in stored] == list(result.positions)
        assert list(result.positions) == sorted(set(result.positions))
        assert [(e.version, e.data["n"]) for e in stored] == [(n + 2, n) for n in range(LARGE)]

    @pytest.mark.parametrize("expected", [ANY, NO_STREAM], ids=["any", "no-stream"])
    def test_a_large_batch_retried_returns_the_first_result(
        self, store: EventStore, expected: object
    ) -> None:
        batch = many(LARGE)
        first = store.append("order-1", batch, expected_version=expected)  # type: ignore[arg-type]
        again = store.append("order-1", batch, expected_version=expected)  # type: ignore[arg-type]
        assert again == first
        assert len(list(store.read_all())) == LARGE

    def test_a_large_batch_at_a_wrong_version_writes_nothing(self, store: EventStore) -> None:
        store.append("order-1", events("A", "B"))
        with pytest.raises(WrongExpectedVersion) as caught:
            store.append("order-1", many(LARGE), expected_version=1)
        assert (caught.value.expected, caught.value.actual) == (1, 2)
        assert len(list(store.read_all())) == 2
        assert store.append("order-1", many(LARGE), expected_version=2).version == LARGE + 2

    @pytest.mark.parametrize(
        "broken",
        [
            lambda limit: {"when": object()},
            lambda limit: {"price": math.nan},
            lambda limit: {"blob": "x" * limit},
        ],
        ids=["object", "nan", "too-large"],
    )
    def test_a_large_batch_with_an_unencodable_last_event_writes_nothing(
        self, store: EventStore, broken: Callable[[int], dict[str, object]]
    ) -> None:
        batch = [*many(LARGE - 1), NewEvent("Broken", broken(store.max_event_bytes))]
        with pytest.raises(InvalidEvent, match=rf"event {LARGE - 1} \('Broken'\)"):
            store.append("order-1", batch)
        assert list(store.read_all()) == []
        assert list(store.list_streams()) == []
        assert store.append("order-1", many(LARGE)).version == LARGE  # and the store goes on

    def test_a_large_batch_reusing_a_stored_id_at_its_end_writes_nothing(
        self, store: EventStore
    ) -> None:
        stored = events("A")
        store.append("order-2", stored)
        with pytest.raises(DuplicateEventId) as caught:
            store.append("order-1", [*many(LARGE - 1), *stored])
        assert caught.value.event_id == stored[0].id
        assert store.stream_version("order-1") == 0
        assert len(list(store.read_all())) == 1

    # --- reading ---------------------------------------------------------------

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
