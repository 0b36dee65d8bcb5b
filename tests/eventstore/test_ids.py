"""`new_event_id`: the UUIDs every event gets unless the caller gives one: version 7,
time-ordered, growing within a process, distinct across processes."""

from __future__ import annotations

import multiprocessing
import pickle
import threading
import time
import uuid

from eventcraft.eventstore import NewEvent, new_event_id
from eventcraft.eventstore.ids import uuids_from_ints
from hypothesis import given
from hypothesis import strategies as st


def test_an_id_is_a_version_7_uuid_like_any_other() -> None:
    for _ in range(1000):
        made = new_event_id()
        assert type(made) is uuid.UUID
        assert (made.version, made.variant) == (7, uuid.RFC_4122)
        parsed = uuid.UUID(str(made))
        assert parsed == made and hash(parsed) == hash(made)
        assert uuid.UUID(bytes=made.bytes) == made
        assert pickle.loads(pickle.dumps(made)) == made
        assert made.is_safe is uuid.SafeUUID.unknown


def test_ids_carry_the_time_they_were_made_in_milliseconds() -> None:
    before = time.time_ns() // 1_000_000
    made = new_event_id()
    after = time.time_ns() // 1_000_000
    assert before <= made.int >> 80 <= after


def test_ids_of_one_process_only_grow_even_from_many_threads() -> None:
    drawn: list[list[uuid.UUID]] = [[] for _ in range(4)]

    def draw(into: list[uuid.UUID]) -> None:
        for _ in range(20_000):
            into.append(new_event_id())

    threads = [threading.Thread(target=draw, args=(into,)) for into in drawn]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    for ids in drawn:
        assert ids == sorted(ids) and len(set(ids)) == len(ids)
    every = [i for ids in drawn for i in ids]
    assert len(set(every)) == len(every)
    # In text as in bytes: the store's index on ids sees them in the order they were made.
    assert [str(i) for i in drawn[0]] == sorted(str(i) for i in drawn[0])


def test_the_random_tail_is_random() -> None:
    tails = [new_event_id().int & 0xFFFFFFFF for _ in range(2000)]
    ones = zeros = 0
    for tail in tails:
        ones |= tail
        zeros |= ~tail & 0xFFFFFFFF
    assert ones == zeros == 0xFFFFFFFF


def test_new_events_get_one_each() -> None:
    ids = [NewEvent("T", {}).id for _ in range(1000)]
    assert len(set(ids)) == 1000 and all(i.version == 7 for i in ids)
    assert ids == sorted(ids)


def _draw(queue: multiprocessing.Queue[list[uuid.UUID]]) -> None:
    queue.put([new_event_id() for _ in range(100)])


def test_a_forked_process_draws_ids_of_its_own() -> None:
    context = multiprocessing.get_context("fork")
    queue: multiprocessing.Queue[list[uuid.UUID]] = context.Queue()
    child = context.Process(target=_draw, args=(queue,))
    child.start()
    theirs = queue.get(timeout=60)
    child.join(timeout=60)
    ours = [new_event_id() for _ in range(100)]
    assert not set(theirs) & set(ours)


@given(st.lists(st.integers(0, 2**128 - 1), max_size=20))
def test_ids_read_back_a_page_at_a_time_are_the_uuids_of_their_values(values: list[int]) -> None:
    made = uuids_from_ints(iter(values), len(values))
    assert made == [uuid.UUID(int=value) for value in values]
    assert [str(id) for id in made] == [str(uuid.UUID(int=value)) for value in values]
    assert pickle.loads(pickle.dumps(made)) == made  # every slot set: is_safe too
