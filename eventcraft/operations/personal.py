"""Forgetting a data subject: what the key store holds of one, and the forget itself, in
every place the store and its parts keep data.

The shells show `subject_keys` before they ask, and `forget` erases what is
live when it runs (the key store's own statement re-checks it): a forget
that meets a subject already forgotten erases nothing and says so.

A forget reaches two kinds of places. Where the subject's data is sealed
under its key (events, snapshots, saga data, the Parquet archive's copies
of them), erasing the key erases it. The error stores keep a failure's
message in the clear, so the forget erases those of the subject's: the
parked projection events whose event is sealed under one of its keys (their
error message; their traceback holds none) and the inbox's failed messages
naming it in their `eventcraft-data-subjects` header (body, headers and
error message), in the store's database and the App's read-model database.
On SQLite those writes zero what they erase (`secure_delete`), and the WAL
is checkpointed and truncated after them.

What a forget does not reach, and an operator does next: read models that
copied the subject's fields hold them until they are rebuilt (`eventcraft
projections rebuild NAME`), a failed message that names no subject until it
is discarded, and backups until they expire.

A key store that holds no key at all was never sealed with: a forget there
says so, naming it, for the store's keys may live in another database. On
PostgreSQL a forget may leave its erasure from the key table's file pending
(a transaction older than it stayed open): the next forget completes it.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from dataclasses import dataclass

from eventcraft.eventstore import (
    FORGOTTEN,
    SEALED_MARK,
    EventStore,
    KeyStore,
    RecordedEvent,
    StoreUnavailable,
    redacted,
)
from eventcraft.messaging import FAILED_TABLE, InboxErrorStore
from eventcraft.projections import (
    PARKED_TABLE,
    Database,
    event_at,
    forget_parked_errors,
    parked_positions,
)

from .errors import InputError

log = logging.getLogger("eventcraft.operations")

_MARK = SEALED_MARK.strip('"')
"""The key of an event's data that holds its sealed fields, by subject."""

KEYS = "keys"
PARKED = "parked projection events"
FAILED = "failed inbox messages"


@dataclass(frozen=True)
class SubjectKeys:
    """What a key store holds of one data subject."""

    subject: str
    live: int
    """Keys its personal fields are sealed with now: what a forget erases."""
    forgotten: int
    """Keys erased by earlier forgets (the subject was written again after one)."""
    key_store: str
    """The key store, by URL (no password)."""
    key_store_empty: bool
    """The key store holds no key of anyone: nothing was ever sealed with it."""


@dataclass(frozen=True)
class Erased:
    """What a forget erased in one place."""

    place: str
    """`KEYS`, `PARKED` or `FAILED`."""
    table: str
    database: str
    """By URL (no password)."""
    erased: int
    """Keys erased; parked events whose error message was; failed messages whose body,
    headers and error message were."""


@dataclass(frozen=True)
class Forgotten:
    """What a forget did."""

    subject: str
    erased: int
    """Keys erased: 0 when the subject had none live."""
    replacement: str
    """What readers now see in its personal fields (unless a field names its own)."""
    key_store: str
    key_store_empty: bool
    """The key store holds no key of anyone: the wrong one, when the subject's data was
    sealed."""
    pending: bool
    """An erased key may still be in the key store's database files: a transaction older
    than the erasure stayed open, or the rewrite failed; the next forget completes it."""
    places: tuple[Erased, ...] = ()
    """What it erased where: the key table first, then each error store it found."""


def open_key_store(url: str) -> KeyStore:
    """The key store at `url`, which must be there: `InputError` naming a SQLite file that
    is not (a mistyped path), rather than a new, empty key store."""
    try:
        return KeyStore.open(url, existing=True)
    except StoreUnavailable as error:
        raise InputError(str(error)) from error


def subject_keys(keys: KeyStore, subject: str) -> SubjectKeys:
    """How many live and forgotten keys `subject` has in `keys`."""
    found = keys.of_subject(subject)
    live = sum(key.material is not None for key in found)
    empty = not found and not keys.holds_keys()
    return SubjectKeys(subject, live, len(found) - live, keys.url, empty)


def forget(
    keys: KeyStore,
    subject: str,
    store: EventStore | None = None,
    databases: Sequence[str | None] = (None,),
) -> Forgotten:
    """Erase `subject`'s live keys, then, with `store`, the error stores' text of it in
    each of `databases` (None: the store's own; an App's read-model database beside it).
    Its personal fields read as their replacement from now on. Completes any erasure an
    earlier forget left pending."""
    erased = keys.forget(subject)
    empty = not erased and not keys.holds_keys()
    places = [Erased(KEYS, "eventcraft_keys", keys.url, erased)]
    if store is not None:
        places += _error_stores(keys, subject, store, databases)
    pending = keys.erasure_pending()
    return Forgotten(subject, erased, FORGOTTEN, keys.url, empty, pending, tuple(places))


def _error_stores(
    keys: KeyStore, subject: str, store: EventStore, databases: Sequence[str | None]
) -> list[Erased]:
    """The parked events and failed messages of `subject` erased in each database."""
    key_ids = {key.id for key in keys.of_subject(subject)}
    places: list[Erased] = []
    seen: set[str] = set()
    with ExitStack() as closing:
        sealed: list[EventStore] = []
        for url in databases:
            where = store.url if url is None else url
            if where in seen:
                continue
            seen.add(where)
            database = Database.of(url, store)
            closing.callback(database.close)
            shown = redacted(where)
            opener = functools.partial(_sealed, store, sealed, closing)
            parked = _parked(database, subject, key_ids, opener)
            if parked is not None:
                places.append(Erased(PARKED, PARKED_TABLE, shown, parked))
            messages = InboxErrorStore(database).forget(subject)
            if messages is not None:
                places.append(Erased(FAILED, FAILED_TABLE, shown, messages))
            if parked or messages:
                _truncate_wal(database)
    return places


def _parked(
    database: Database,
    subject: str,
    key_ids: set[str],
    sealed: Callable[[], EventStore | None],
) -> int | None:
    """Erase the error messages of the events parked here that hold `subject`'s sealed
    fields; None where no projection ever ran."""
    positions = parked_positions(database)
    if positions is None:
        return None
    if not positions or not key_ids:
        return 0
    events = sealed()
    if events is None:
        return 0
    theirs = {p for p in positions if _names(event_at(events, p), subject, key_ids)}
    if not theirs:
        return 0
    return forget_parked_errors(database, theirs, FORGOTTEN)


def _names(event: RecordedEvent | None, subject: str, key_ids: set[str]) -> bool:
    """Whether `event`, as stored, holds fields sealed under one of `subject`'s keys."""
    if event is None:
        return False
    entries = event.data.get(_MARK)
    if not isinstance(entries, list):
        return False
    return any(
        isinstance(entry, dict) and entry.get("subject") == subject and entry.get("key") in key_ids
        for entry in entries
    )


def _sealed(store: EventStore, opened: list[EventStore], closing: ExitStack) -> EventStore | None:
    """The store opened again to read its events as stored (envelopes sealed), once;
    None for a memory store, which no other handle reaches."""
    if opened:
        return opened[0]
    if store.url.lower().startswith("memory:"):
        return None
    # A URL, not the KeyStore, which the twin would close; sealed reads open no key.
    twin = EventStore.open(store.url, group_commit=False, keys=store.url, sealed=True)
    closing.callback(twin.close)
    opened.append(twin)
    return twin


def _truncate_wal(database: Database) -> None:
    """On SQLite, move the erasures into the database file and empty the WAL, which keeps
    the pages as they were written: the erased text included."""
    if not database.truncate_wal():
        log.warning(
            "readers kept the checkpoint of %s from finishing: its WAL keeps the erased "
            "text until the next checkpoint",
            database.engine.url,
        )
