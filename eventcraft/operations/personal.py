"""Forgetting a data subject: what the key store holds of one, and the forget itself.

The shells show `subject_keys` before they ask, and `forget` erases what is
live when it runs (the key store's own statement re-checks it): a forget
that meets a subject already forgotten erases nothing and says so.

What a forget does not reach, and an operator does next: read models that
copied the subject's fields hold them until they are rebuilt (`eventcraft
projections rebuild NAME`), and backups of the key store's database keep
the key until they expire.

A key store that holds no key at all was never sealed with: a forget there
says so, naming it, for the store's keys may live in another database. On
PostgreSQL a forget may leave its erasure from the key table's file pending
(a transaction older than it stayed open): the next forget completes it.
"""

from __future__ import annotations

from dataclasses import dataclass

from eventcraft.eventstore import FORGOTTEN, KeyStore, StoreUnavailable

from .errors import InputError


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


def forget(keys: KeyStore, subject: str) -> Forgotten:
    """Erase `subject`'s live keys: its personal fields read as their replacement from now on.
    Completes any erasure an earlier forget left pending."""
    erased = keys.forget(subject)
    empty = not erased and not keys.holds_keys()
    return Forgotten(subject, erased, FORGOTTEN, keys.url, empty, keys.erasure_pending())
