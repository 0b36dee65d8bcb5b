"""The input part of the conformance suite: what the store refuses and what it converts.

`EventStoreConformance` includes it. Everything refused raises `InvalidEvent`
and writes nothing, on every backend.
"""

from __future__ import annotations

import dataclasses
import enum
import math
import uuid
from collections.abc import Callable
from datetime import UTC, date, datetime, time, timedelta, timezone
from decimal import Decimal
from typing import Any

import pytest
from pydantic import BaseModel

from ..encoding import MAX_AFTER, MAX_INT
from ..errors import InvalidEvent, WrongExpectedVersion
from ..events import NewEvent
from ..store import EventStore


def _events(*types: str) -> list[NewEvent]:
    return [NewEvent(type=t, data={}) for t in types]


class _Colour(enum.Enum):
    RED = "red"


class _Size(enum.IntEnum):
    LARGE = 3


@dataclasses.dataclass
class _Line:
    sku: str
    price: float


class _Stamped(BaseModel):
    at: datetime
    id: uuid.UUID
    pair: tuple[int, str]
    colour: _Colour


class _Priced(BaseModel):
    price: float


_AT = datetime(2024, 5, 1, 12, 30, tzinfo=UTC)
_ID = uuid.UUID("12345678-1234-5678-1234-567812345678")

_CONVERTED: list[tuple[str, object, object]] = [
    ("aware-datetime", _AT, "2024-05-01T12:30:00+00:00"),
    (
        "offset-datetime",
        datetime(2024, 5, 1, 12, 30, 0, 5, tzinfo=timezone(timedelta(hours=2))),
        "2024-05-01T12:30:00.000005+02:00",
    ),
    ("naive-datetime", datetime(2024, 5, 1, 12, 30), "2024-05-01T12:30:00"),
    ("date", date(2024, 5, 1), "2024-05-01"),
    ("time", time(12, 30), "12:30:00"),
    ("uuid", _ID, "12345678-1234-5678-1234-567812345678"),
    ("enum", _Colour.RED, "red"),
    ("int-enum", _Size.LARGE, 3),
    ("tuple", (1, "a"), [1, "a"]),
    ("dataclass", _Line("a", 2.5), {"sku": "a", "price": 2.5}),
    ("largest-int", 2**64 - 1, 2**64 - 1),
    ("smallest-int", -(2**63), -(2**63)),
]

_MAX_INT32 = 2**31 - 1


class InputConformance:
    """Names, payloads, sizes and numbers: what an append or a read refuses or converts."""

    # --- names ---------------------------------------------------------------

    @pytest.mark.parametrize(
        ("stream_id", "reason"),
        [
            ("", "empty"),
            ("x" * 256, "limit is 255"),
            ("bad\x00id", "NUL"),
            (42, "must be a str"),
            (None, "must be a str"),
            ("\ud800", "not valid Unicode"),
            ("order-1\n", "control characters"),
            ("order\t-1", "control characters"),
            ("order-\x7f", "control characters"),
            ("order-\x9b1", "control characters"),
            (" ", "only whitespace"),
            ("\u3000", "only whitespace"),
            (" order-1", "begin or end with whitespace"),
            ("order-1\u00a0", "begin or end with whitespace"),
            ("-1", "category"),
            ("-", "category"),
        ],
        ids=lambda value: repr(value)[:20],
    )
    def test_an_unusable_stream_id_is_refused(
        self, store: EventStore, stream_id: object, reason: str
    ) -> None:
        with pytest.raises(InvalidEvent, match=f"stream id.*{reason}"):
            store.append(stream_id, _events("A"))  # type: ignore[arg-type]
        assert list(store.read_all()) == []

    @pytest.mark.parametrize(
        ("event_type", "reason"),
        [
            ("", "empty"),
            ("t" * 256, "limit is 255"),
            ("a\x00b", "NUL"),
            (7, "must be a str"),
            ("Order\nPlaced", "control characters"),
            ("Placed\x85", "control characters"),
            ("\t", "control characters"),
            ("  ", "only whitespace"),
            ("Placed ", "begin or end with whitespace"),
        ],
        ids=lambda value: repr(value)[:20],
    )
    def test_an_unusable_event_type_is_refused(
        self, store: EventStore, event_type: object, reason: str
    ) -> None:
        good = NewEvent("Fine", {})
        with pytest.raises(InvalidEvent, match=f"type of event 1.*{reason}"):
            store.append("order-1", [good, NewEvent(event_type, {})])  # type: ignore[arg-type]
        assert list(store.read_all()) == []

    @pytest.mark.parametrize(
        "stream_id",
        [
            "order-'; DROP TABLE eventcraft_events; --",
            'quote-"double"',
            "unicode-ñandú-事件-🚀",
            "family-👨\u200d👩\u200d👧",  # joined by zero-width joiners, format characters
            "percent-%_like",
            "back\\slash-1",
            "spaced out-no\u00a0break",
        ],
    )
    def test_hostile_stream_ids_are_stored_and_read_as_given(
        self, store: EventStore, stream_id: str
    ) -> None:
        store.append(stream_id, [NewEvent("Tricky 'type' \"🚀\"", {"k'ey": 'va"lue'})])
        (recorded,) = store.read_stream(stream_id)
        assert recorded.stream_id == stream_id
        assert recorded.data == {"k'ey": 'va"lue'}
        assert recorded.type == "Tricky 'type' \"🚀\""
        category = stream_id.split("-", 1)[0]
        assert [e.stream_id for e in store.read_all(categories=[category])] == [stream_id]
        assert [s.stream_id for s in store.list_streams(category=category)] == [stream_id]
        assert store.stream_version(stream_id) == 1

    @pytest.mark.parametrize("stream_id", ["-1", " order-1", "a\nb"], ids=repr)
    def test_names_refused_for_new_streams_can_still_be_read(
        self, store: EventStore, stream_id: str
    ) -> None:
        # A store written before these rules may hold such streams.
        store.append("order-1", _events("A"))
        assert list(store.read_stream(stream_id)) == []
        assert list(store.read_stream_encoded(stream_id)) == []
        assert store.stream_version(stream_id) == 0
        assert store.load_snapshot(stream_id) is None
        assert [s.stream_id for s in store.list_streams(after=stream_id)] == ["order-1"]

    # --- payloads --------------------------------------------------------------

    @pytest.mark.parametrize(
        "data",
        [
            {"when": object()},
            {"tags": {1, 2}},
            {1: "int key"},
            {"s": "nul\x00"},
            [1, 2],
            "x",
            {"price": Decimal("1.10")},
            {"raw": b"bytes"},
            {"nested": _Stamped(at=_AT, id=_ID, pair=(1, "a"), colour=_Colour.RED)},
            {"n": 2**64},
            {"n": -(2**63) - 1},
        ],
        ids=[
            "object",
            "set",
            "int-key",
            "nul",
            "list",
            "str",
            "decimal",
            "bytes",
            "nested-model",
            "int-too-large",
            "int-too-small",
        ],
    )
    def test_unencodable_data_names_the_event_and_writes_nothing(
        self, store: EventStore, data: object
    ) -> None:
        batch = [NewEvent("Fine", {}), NewEvent("Broken", data)]  # type: ignore[arg-type]
        with pytest.raises(InvalidEvent, match=r"event 1 \('Broken'\) for stream 'order-1'"):
            store.append("order-1", batch)
        assert list(store.read_all()) == []

    def test_unencodable_metadata_is_refused(self, store: EventStore) -> None:
        with pytest.raises(InvalidEvent, match="metadata"):
            store.append("order-1", [NewEvent("A", {}, metadata={"x": object()})])

    @pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf], ids=repr)
    @pytest.mark.parametrize("part", ["data", "metadata"])
    def test_nan_and_infinity_are_refused_naming_the_event_and_where(
        self, store: EventStore, value: float, part: str
    ) -> None:
        payload = {"note": None, "lines": [{"sku": "a", "price": value}]}
        if part == "data":
            broken = NewEvent("Broken", payload)
        else:
            broken = NewEvent("Broken", {}, metadata=payload)
        with pytest.raises(
            InvalidEvent,
            match=rf"event 1 \('Broken'\) for stream 'order-1': {part} holds {value!r} "
            r"at \['lines'\]\[0\]\['price'\]",
        ):
            store.append("order-1", [NewEvent("Fine", {"note": None}), broken])
        assert list(store.read_all()) == []

    @pytest.mark.parametrize(
        "data",
        [
            {"line": _Line("a", math.inf)},
            {"pair": (1.0, math.nan)},
            _Priced(price=-math.inf),
        ],
        ids=["dataclass", "tuple", "model"],
    )
    def test_nan_is_found_inside_every_container_orjson_encodes(
        self, store: EventStore, data: Any
    ) -> None:
        with pytest.raises(InvalidEvent, match=r"data holds -?(nan|inf) at \["):
            store.append("order-1", [NewEvent("Broken", data)])
        assert list(store.read_all()) == []

    @pytest.mark.parametrize(("value", "stored"), [(v, s) for _, v, s in _CONVERTED])
    def test_values_json_lacks_are_stored_as_documented(
        self, store: EventStore, value: object, stored: object
    ) -> None:
        store.append("order-1", [NewEvent("A", {"v": value}, metadata={"v": value})])
        (recorded,) = store.read_stream("order-1")
        assert recorded.data == {"v": stored}
        assert recorded.metadata == {"v": stored}
        assert type(recorded.data["v"]) is type(stored)

    def test_a_pydantic_payload_is_stored_as_its_json_mode_dump(self, store: EventStore) -> None:
        model = _Stamped(at=_AT, id=_ID, pair=(1, "a"), colour=_Colour.RED)
        store.append("order-1", [NewEvent("A", model)])
        (recorded,) = store.read_stream("order-1")
        assert recorded.data == {
            "at": "2024-05-01T12:30:00Z",  # pydantic's own format, not orjson's
            "id": "12345678-1234-5678-1234-567812345678",
            "pair": [1, "a"],
            "colour": "red",
        }
        assert _Stamped.model_validate(recorded.data) == model

    # --- sizes -----------------------------------------------------------------

    def test_an_event_over_the_size_limit_is_refused_and_one_at_it_is_stored(
        self, store: EventStore
    ) -> None:
        limit = store.max_event_bytes
        frame = len(b'{"blob":""}') + len(b'{"k":""}')

        def sized(total: int) -> NewEvent:
            return NewEvent("Big", {"blob": "x" * (total - frame - 1)}, metadata={"k": "m"})

        with pytest.raises(
            InvalidEvent,
            match=rf"event 1 \('Big'\) for stream 'blob-1' takes {limit + 1} bytes "
            rf"of JSON .*limit is {limit}",
        ):
            store.append("blob-1", [sized(10), sized(limit + 1)])
        assert list(store.read_all()) == []
        store.append("blob-1", [sized(limit)])
        (recorded,) = store.read_stream("blob-1")
        assert len(recorded.data["blob"]) == limit - frame - 1

    def test_a_one_megabyte_payload_round_trips(self, store: EventStore) -> None:
        blob = "x" * (1 << 20)
        store.append("blob-1", [NewEvent("Big", {"blob": blob, "n": 1})])
        (recorded,) = store.read_stream("blob-1")
        assert recorded.data == {"blob": blob, "n": 1}

    # --- numbers and other arguments ---------------------------------------------

    @pytest.mark.parametrize(
        "expected", [-1, True, "3", 1.0, None], ids=["negative", "bool", "str", "float", "none"]
    )
    def test_an_unusable_expected_version_is_refused(
        self, store: EventStore, expected: object
    ) -> None:
        with pytest.raises(InvalidEvent, match="expected_version"):
            store.append("order-1", _events("A"), expected_version=expected)  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        "batch", [[], NewEvent("A", {}), ["A"], None], ids=["empty", "single", "str", "none"]
    )
    def test_a_batch_that_is_not_a_list_of_events_is_refused(
        self, store: EventStore, batch: object
    ) -> None:
        with pytest.raises(InvalidEvent):
            store.append("order-1", batch)  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        "call",
        [
            lambda s: s.read_all(after=-1),
            lambda s: s.read_all(limit=-1),
            lambda s: s.read_all(categories=[]),
            lambda s: s.read_stream("", limit=1),
            lambda s: s.read_stream("order-1", from_version=-1),
            lambda s: s.list_streams(category=""),
            lambda s: s.list_streams(limit=-1),
            lambda s: s.wait_for_events(after=-1, timeout=0),
        ],
        ids=[
            "negative-after",
            "negative-limit",
            "no-categories",
            "empty-stream",
            "negative-from-version",
            "empty-category",
            "negative-list-limit",
            "negative-wait-after",
        ],
    )
    def test_unusable_read_arguments_are_refused(
        self, store: EventStore, call: Callable[[EventStore], object]
    ) -> None:
        with pytest.raises(InvalidEvent):
            call(store)

    @pytest.mark.parametrize(
        ("call", "bound"),
        [
            (lambda s: s.append("order-1", _events("B"), expected_version=MAX_INT + 1), MAX_INT),
            (lambda s: s.read_stream("order-1", from_version=MAX_INT + 1), MAX_INT),
            (lambda s: s.read_stream("order-1", backwards=True, from_version=2**64), MAX_INT),
            (lambda s: s.read_stream("order-1", limit=MAX_INT + 1), MAX_INT),
            (lambda s: s.read_stream_encoded("order-1", from_version=MAX_INT + 1), MAX_INT),
            (lambda s: s.read_all(after=MAX_AFTER + 1), MAX_AFTER),
            (lambda s: s.read_all(limit=MAX_INT + 1), MAX_INT),
            (lambda s: s.list_streams(limit=MAX_INT + 1), MAX_INT),
            (lambda s: s.wait_for_events(after=MAX_AFTER + 1, timeout=0), MAX_AFTER),
            (
                lambda s: s.save_snapshot("order-1", version=MAX_INT + 1, type="T", data={}),
                MAX_INT,
            ),
            (
                lambda s: s.save_snapshot(
                    "order-1", version=1, type="T", data={}, schema_version=_MAX_INT32 + 1
                ),
                _MAX_INT32,
            ),
        ],
        ids=[
            "expected-version",
            "from-version",
            "backwards-from-version",
            "stream-limit",
            "encoded-from-version",
            "after",
            "all-limit",
            "list-limit",
            "wait-after",
            "snapshot-version",
            "snapshot-schema-version",
        ],
    )
    def test_numbers_beyond_what_the_databases_hold_are_refused(
        self, store: EventStore, call: Callable[[EventStore], object], bound: int
    ) -> None:
        store.append("order-1", _events("A"))
        with pytest.raises(InvalidEvent, match=str(bound)):
            call(store)
        assert store.stream_version("order-1") == 1
        assert store.load_snapshot("order-1") is None

    def test_the_largest_numbers_the_databases_hold_are_accepted(self, store: EventStore) -> None:
        store.append("order-1", _events("A"))
        with pytest.raises(WrongExpectedVersion):
            store.append("order-1", _events("B"), expected_version=MAX_INT)
        assert list(store.read_stream("order-1", from_version=MAX_INT)) == []
        backwards = store.read_stream(
            "order-1", backwards=True, from_version=MAX_INT, limit=MAX_INT
        )
        assert [e.version for e in backwards] == [1]
        assert list(store.read_stream_encoded("order-1", from_version=MAX_INT)) == []
        assert list(store.read_all(after=MAX_AFTER)) == []
        assert len(list(store.read_all(limit=MAX_INT))) == 1
        assert len(list(store.list_streams(limit=MAX_INT))) == 1
        assert store.wait_for_events(after=MAX_AFTER, timeout=0) is False
        store.save_snapshot("order-1", version=1, type="T", data={}, schema_version=_MAX_INT32)
        snapshot = store.load_snapshot("order-1")
        assert snapshot is not None and snapshot.schema_version == _MAX_INT32

    @pytest.mark.parametrize("timeout", [math.nan, math.inf, 1e300], ids=repr)
    def test_a_timeout_no_clock_can_wait_is_refused(
        self, store: EventStore, timeout: float
    ) -> None:
        with pytest.raises(InvalidEvent, match="timeout"):
            store.wait_for_events(after=0, timeout=timeout)
