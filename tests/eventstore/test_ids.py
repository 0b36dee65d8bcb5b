"""`new_event_id`: the UUIDs every event gets unless the caller gives one."""

from __future__ import annotations

import multiprocessing
import pickle
import uuid

from eventcraft.eventstore import NewEvent, new_event_id

# The bits RFC 4122 fixes in a version 4 UUID: version (76-79) and variant (62-63).
FIXED = (0xF000 << 64) | (0xC000 << 48)


def test_an_id_is_a_version_4_uuid_like_any_other() -> None:
    for _ in range(1000):
        made = new_event_id()
        assert type(made) is uuid.UUID
        assert (made.version, made.variant) == (4, uuid.RFC_4122)
        parsed = uuid.UUID(str(made))
        assert parsed == made and hash(parsed) == hash(made)
        assert uuid.UUID(bytes=made.bytes) == made
        assert pickle.loads(pickle.dumps(made)) == made
        assert made.is_safe is uuid.SafeUUID.unknown


def test_every_bit_the_rfc_leaves_free_is_random() -> None:
    made = [new_event_id().int for _ in range(2000)]
    ones = 0
    zeros = 0
    for value in made:
        ones |= value
        zeros |= ~value
    free = ~FIXED & (2**128 - 1)
    assert ones & free == free and zeros & free == free
    assert len(set(made)) == len(made)


def test_new_events_get_one_each() -> None:
    ids = {NewEvent("T", {}).id for _ in range(1000)}
    assert len(ids) == 1000 and all(i.version == 4 for i in ids)


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
