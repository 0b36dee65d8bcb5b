"""The tag locks a group of appends takes before anything else (`postgres/tag_functions.py` says why
they make a conditional append correct, and why unrelated writers never wait).

An append that writes tagged events takes its tags' locks shared; an append
with a condition takes one tag of each of the condition's items exclusive,
or the store's append lock exclusive when an item has no tags. An append with
neither tags nor a condition takes none, and goes through the append function
alone (`plain`).
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence

import orjson

from ..arguments import AppendCall
from ..query import Query


def plain(call: AppendCall) -> bool:
    """The append has neither tags nor a condition: the append function serves it alone;
    other appends go through the group function, which takes tag locks."""
    return call.condition is None and call.batch.tags is None


def lock_key(tag: str) -> int:
    """The advisory lock key of a tag: 64 bits of its BLAKE2b digest, signed.

    The same in every process. Two tags may share a key (one chance in 2**64
    per pair); they then only wait for each other, never decide wrongly.
    """
    digest = hashlib.blake2b(tag.encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def condition_tags(query: Query) -> tuple[str, ...] | None:
    """The tags whose writers a check of `query` must wait for, one per item: any tag of an
    item is held by every writer of an event matching it. None when some item has no tags
    (or the query has no items): its events may carry any tags or none, and only the
    store's append lock covers them."""
    if not query.items or any(not item.tags for item in query.items):
        return None
    return tuple(sorted({item.tags[0] for item in query.items}))


def group_locks(members: Sequence[Sequence[AppendCall]]) -> bytes | None:
    """The group function's `p_locks` for `members`: each tag written shared, one tag of
    each item of a condition exclusive, in key order; the append lock exclusive for a
    condition with an item without tags. None when no member has tags or a condition."""
    calls = [call for member in members for call in member if not plain(call)]
    if not calls:
        return None
    keys: dict[int, bool] = {}
    whole_log = False
    conditional = False
    for call in calls:
        for tags in call.batch.tags or ():
            for tag in tags:
                keys.setdefault(lock_key(tag), False)
        if call.condition is not None:
            conditional = True
            checked = condition_tags(call.condition.fail_if_events_match)
            if checked is None:
                whole_log = True
            else:
                keys.update((lock_key(tag), True) for tag in checked)
    ordered = [[key, keys[key]] for key in sorted(keys)]
    return orjson.dumps({"k": ordered, "log": whole_log, "c": conditional})
