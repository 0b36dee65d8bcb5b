"""Forgetting a data subject: what the key store holds of one, and the forget itself.

The shells show `subject_keys` before they ask, and `forget` erases what is
live when it runs (the key store's own statement re-checks it): a forget
that meets a subject already forgotten erases nothing and says so.

What a forget does not reach, and an operator does next: read models that
copied the subject's fields hold them until they are rebuilt (`eventcraft
projections rebuild NAME`), and backups of the key store's database keep
the key until they expire.
"""

from __future__ import annotations

from dataclasses import dataclass

from eventcraft.eventstore import FORGOTTEN, KeyStore


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


@dataclass(frozen=True)
class Forgotten:
    """What a forget did."""

    subject: str
    erased: int
    """Keys erased: 0 when the subject had none live."""
    replacement: str
    """What readers now see in its personal fields (unless a field names its own)."""
    key_store: str


def subject_keys(keys: KeyStore, subject: str) -> SubjectKeys:
    """How many live and forgotten keys `subject` has in `keys`."""
    found = keys.of_subject(subject)
    live = sum(key.material is not None for key in found)
    return SubjectKeys(subject, live, len(found) - live, keys.url)


def forget(keys: KeyStore, subject: str) -> Forgotten:
    """Erase `subject`'s live keys: its personal fields read as their replacement from now on."""
    return Forgotten(subject, keys.forget(subject), FORGOTTEN, keys.url)
