"""A message id is taken once: a retry (the same body) is answered as the first time and
writes nothing; the same id with another body is a conflict, kept in the error store (or
raised by `append`), never dropped, whichever stream the mapping names, and however the
deliveries race."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor

import orjson
import pytest
from eventcraft.eventstore import EventStore
from eventcraft.messaging import Inbox, IncomingMessage, MessageIdConflict

from ..processes import PROCESSES
from .unscoped import stored_unscoped
from .workers import order_received, take_racing

CONFLICT = "MessageIdConflict: message id {!r} is already used: it is stored with another body"


@pytest.fixture
def sql_store(shared_store_url: str) -> Iterator[EventStore]:
    with EventStore.open(shared_store_url) as store:
        yield store


def stored_data(store: EventStore) -> list[object]:
    return [e.data for e in store.read_all()]


@pytest.mark.parametrize(
    "changed", [b'{"order":1,"lines":3}', b'{"order":2}'], ids=["same-stream", "another-stream"]
)
def test_a_message_id_sent_again_with_another_body_is_kept_as_a_conflict(
    sql_store: EventStore, changed: bytes
) -> None:
    first = b'{"order":1,"lines":2}'
    with Inbox("orders-in", sql_store, order_received) as inbox:
        assert inbox.take(IncomingMessage("m-1", first)) is not None
        assert inbox.take(IncomingMessage("m-1", changed)) is None
        with pytest.raises(MessageIdConflict) as raised:
            inbox.append(IncomingMessage("m-1", changed))
        [failed] = inbox.failures()
        assert inbox.stored == 1
    assert raised.value.message_id == "m-1"
    assert failed.message_id == "m-1" and failed.body == changed
    assert failed.error == (
        CONFLICT.format("m-1") + f", as event {inbox.event_id('m-1')} of stream 'order-1'"
    )
    assert stored_data(sql_store) == [orjson.loads(first)]


def test_a_retry_is_answered_as_the_first_time_though_the_mapping_names_another_stream(
    sql_store: EventStore,
) -> None:
    message = IncomingMessage("m-1", b'{"order":1}')
    with Inbox("orders-in", sql_store, order_received) as inbox:
        first = inbox.take(message)
        # The mapping changed since (a new release routes orders elsewhere).
        inbox.mapping = lambda m: dataclasses.replace(order_received(m), stream_id="moved-1")
        assert inbox.take(message) == first
        assert inbox.failures() == []
    assert [e.stream_id for e in sql_store.read_all()] == ["order-1"]


def test_a_message_stored_before_ids_were_scoped_sent_with_another_body_is_a_conflict(
    sql_store: EventStore,
) -> None:
    stored_unscoped(sql_store, "m-1", b'{"order": 1}', "order-1")
    with Inbox("orders-in", sql_store, order_received) as inbox:
        assert inbox.take(IncomingMessage("m-1", b'{"order": 1}')) is not None
        assert inbox.take(IncomingMessage("m-1", b'{"order": 2}')) is None
        [failed] = inbox.failures()
    assert failed.error.startswith(CONFLICT.format("m-1"))
    assert len(list(sql_store.read_all())) == 1


RACES = {
    # message id: what each of the two processes sends under it
    "same-body": (b'{"order":1}', b'{"order":1}'),
    "same-stream": (b'{"order":2,"lines":1}', b'{"order":2,"lines":2}'),
    "another-stream": (b'{"order":3}', b'{"order":4}'),
}
ROUNDS = 4


def test_deliveries_of_one_message_id_racing_store_one_event_and_one_conflict(
    shared_store_url: str,
) -> None:
    ids = [f"{race}-{n}" for n in range(ROUNDS) for race in RACES]
    sent = [[(m, RACES[m.rsplit("-", 1)[0]][p]) for m in ids] for p in (0, 1)]
    with PROCESSES.Manager() as manager, ProcessPoolExecutor(2, mp_context=PROCESSES) as pool:
        with EventStore.open(shared_store_url) as store:  # the tables, made before the race
            Inbox("orders-in", store, order_received).close()
        barrier = manager.Barrier(2)  # each append of one process meets the other's
        futures = [pool.submit(take_racing, shared_store_url, barrier, s) for s in sent]
        taken = [set(f.result(timeout=240)) for f in futures]
    with (
        EventStore.open(shared_store_url) as store,
        Inbox("orders-in", store, order_received) as inbox,
    ):
        events = {e.metadata["message_id"]: e for e in store.read_all()}
        failures = {f.message_id: f for f in inbox.failures()}
    assert sorted(events) == sorted(ids)  # one event each
    for m in ids:
        race = m.rsplit("-", 1)[0]
        if race == "same-body":
            assert m in taken[0] and m in taken[1] and m not in failures
            continue
        # One delivery stored, whichever committed first; the other kept as a conflict.
        assert [m in t for t in taken].count(True) == 1, m
        loser = 1 if m in taken[0] else 0
        assert events[m].data == orjson.loads(RACES[race][1 - loser])
        assert failures[m].body == RACES[race][loser] and failures[m].attempts == 1
        assert failures[m].error.startswith(CONFLICT.format(m))
    assert len(failures) == len(ids) - ROUNDS
