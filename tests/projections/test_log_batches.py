"""The log as Arrow batches gives back the events it was made of: what a Spark fold and
a rebuild from the archive hand to `apply` is what the store would."""

from __future__ import annotations

import gc
import uuid
from dataclasses import FrozenInstanceError
from datetime import UTC, datetime

import pyarrow as pa
import pytest
from eventcraft.eventstore import EventStore, NewEvent, RecordedEvent
from eventcraft.projections.log_batches import EVENT_SCHEMA, encoded_batch, events_of, to_batch
from hypothesis import given, settings
from hypothesis import strategies as st

_text = st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=20)
_json = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | _text,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_text, inner, max_size=3),
    max_leaves=8,
)
_events = st.builds(
    RecordedEvent,
    id=st.uuids(),
    stream_id=st.from_regex(r"[a-z]{1,8}-[0-9]{1,4}", fullmatch=True),
    version=st.integers(1, 2**40),
    position=st.integers(1, 2**62),
    type=st.from_regex(r"[A-Z][a-z]{0,10}", fullmatch=True),
    data=st.dictionaries(_text, _json, max_size=4),
    metadata=st.dictionaries(_text, _text, max_size=2),
    recorded_at=st.datetimes(
        min_value=datetime(1900, 1, 1), max_value=datetime(2200, 1, 1), timezones=st.just(UTC)
    ),
    tags=st.lists(st.from_regex(r"[a-z]{1,5}:[a-z0-9]{1,5}", fullmatch=True), max_size=3)
    .map(sorted)
    .map(tuple),
)


@settings(deadline=None)  # the first call also loads pyarrow's compute kernels
@given(st.lists(_events, max_size=8))
@pytest.mark.slow
def test_a_batch_gives_back_its_events(events: list[RecordedEvent]) -> None:
    read = list(events_of(to_batch(events)))
    assert read == events
    assert all(type(event) is RecordedEvent for event in read)


def test_events_read_from_a_batch_are_frozen() -> None:
    event = RecordedEvent(uuid.uuid4(), "a-1", 1, 1, "T", {}, {}, datetime.now(UTC))
    (read,) = events_of(to_batch([event]))
    with pytest.raises(FrozenInstanceError):
        read.version = 2  # type: ignore[misc]


def test_a_batch_without_tags_reads_as_untagged_events() -> None:
    event = RecordedEvent(uuid.uuid4(), "a-1", 1, 1, "T", {"n": 1}, {}, datetime.now(UTC))
    batch = to_batch([event])
    older = pa.RecordBatch.from_arrays(batch.columns[:-1], schema=EVENT_SCHEMA.remove(8))
    (read,) = events_of(older)
    assert read == event and read.tags == ()


def test_a_malformed_id_is_named() -> None:
    event = RecordedEvent(uuid.uuid4(), "a-1", 1, 1, "T", {}, {}, datetime.now(UTC))
    batch = to_batch([event])
    ids = pa.array(["1234"], pa.string())
    broken = pa.RecordBatch.from_arrays(
        [ids if name == "id" else batch.column(name) for name in EVENT_SCHEMA.names],
        schema=EVENT_SCHEMA,
    )
    with pytest.raises(ValueError, match="'1234'"):
        list(events_of(broken))


def test_encoded_batches_read_as_the_same_events() -> None:
    with EventStore.open("memory://") as store:
        store.append("a-1", [NewEvent("T", {"x": [1, "é"]}, tags=["k:1"])])
        assert list(events_of(encoded_batch(list(store.read_all_encoded())))) == list(
            store.read_all()
        )


@pytest.mark.slow
def test_a_batch_is_made_into_events_in_one_go_and_the_collector_left_on() -> None:
    now = datetime.now(UTC)
    events = [
        RecordedEvent(uuid.uuid4(), f"a-{n}", 1, n + 1, "T", {"n": n}, {}, now) for n in range(3000)
    ]
    batch = to_batch(events)
    young: list[int] = []

    def count(phase: str, info: dict[str, int]) -> None:
        if phase == "start" and info["generation"] == 0:
            young.append(1)

    gc.collect()
    gc.callbacks.append(count)
    try:
        read = list(events_of(batch))
    finally:
        gc.callbacks.remove(count)
    assert read == events and gc.isenabled()
    # Built with the collector running, 3,000 events set off twenty.
    assert len(young) <= 2
