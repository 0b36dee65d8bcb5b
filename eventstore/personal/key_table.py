"""Where a store's keys are kept: the `KeyTable` port, the `DataKey` it keeps, and a
table in memory. Each backend keeps its own (`sqlite/key_table.py`,
`postgres/key_table.py`), chosen by URL in `backends.py`; `KeyStore` (`keys.py`) caches
what it reads from one."""

from __future__ import annotations

import abc
import os
import threading
import uuid
from collections.abc import Collection
from dataclasses import dataclass

KEYS = "eventcraft_keys"
"""The key table's name, in the store's own database or another one."""

KEY_BYTES = 32
"""AES-256."""


@dataclass(frozen=True, slots=True)
class DataKey:
    """A subject's key as the key table keeps it."""

    id: str
    """The key's own id (a UUID as text), which sealed fields name."""
    subject: str
    """The data subject whose fields it seals."""
    material: bytes | None
    """The AES-256 key; None once the subject is forgotten."""


def new_key(subject: str) -> DataKey:
    return DataKey(str(uuid.uuid4()), subject, os.urandom(KEY_BYTES))


class KeyTable(abc.ABC):
    """Where keys are kept. Safe to share between threads."""

    url: str
    """Where, for messages (no password)."""

    @abc.abstractmethod
    def live_keys(self, subjects: Collection[str]) -> dict[str, DataKey]:
        """Each subject's live key, made for those that have none, by subject."""

    @abc.abstractmethod
    def keys(self, key_ids: Collection[str]) -> dict[str, DataKey]:
        """The keys with these ids that the table holds or held (forgotten: no material)."""

    @abc.abstractmethod
    def forget(self, subject: str) -> int:
        """Delete the subject's live keys beyond recovery from the database's files;
        how many there were (0: none, or forgotten already)."""

    @abc.abstractmethod
    def of_subject(self, subject: str) -> list[DataKey]:
        """The subject's keys, live and forgotten, oldest first; made none."""

    @abc.abstractmethod
    def holds_keys(self) -> bool:
        """Whether the table holds or held any key: False means no data was ever sealed
        with it."""

    def erasure_pending(self) -> bool:
        """Whether a forgotten key may still be in the database's files, until the next
        forget completes its erasure (PostgreSQL: see `postgres/key_table.py`)."""
        return False

    def close(self) -> None:  # noqa: B027 - most tables hold nothing to release
        """Release connections. Idempotent."""


class MemoryKeyTable(KeyTable):
    """Keys in this process only: for memory stores, and tests."""

    def __init__(self) -> None:
        self.url = "memory://"
        self._lock = threading.Lock()
        self._by_id: dict[str, DataKey] = {}
        self._live: dict[str, DataKey] = {}

    def live_keys(self, subjects: Collection[str]) -> dict[str, DataKey]:
        with self._lock:
            found = {}
            for subject in subjects:
                key = self._live.get(subject)
                if key is None:
                    key = self._live[subject] = self._by_id.setdefault(
                        (made := new_key(subject)).id, made
                    )
                found[subject] = key
            return found

    def keys(self, key_ids: Collection[str]) -> dict[str, DataKey]:
        with self._lock:
            return {key_id: self._by_id[key_id] for key_id in key_ids if key_id in self._by_id}

    def forget(self, subject: str) -> int:
        with self._lock:
            key = self._live.pop(subject, None)
            if key is None:
                return 0
            self._by_id[key.id] = DataKey(key.id, subject, None)
            return 1

    def of_subject(self, subject: str) -> list[DataKey]:
        with self._lock:
            return [key for key in self._by_id.values() if key.subject == subject]

    def holds_keys(self) -> bool:
        return bool(self._by_id)
