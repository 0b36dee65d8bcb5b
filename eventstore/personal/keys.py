"""The key store: one AES-256 key per data subject, and `forget`, which deletes it.

Personal fields are sealed with their subject's key (`envelope.py`); the
key store keeps the keys in a table of the store's own database by default
(`key_table.py`, one per backend), or of another database named by URL, or in memory for a
memory store. Each key has an id of its own, which the sealed fields name:
a subject forgotten and then written again gets a new key, and what was
sealed with the old one stays forgotten.

A forgotten key leaves a row without its key material (when, and whose it
was): a reader can tell a forgotten subject (its fields read as the
replacement) from a key this store never held (`UnknownDataKey`, the store
opened with the wrong key store), and an operator can see who was forgotten.

Keys are cached for `cache_seconds` (one second by default), so that
readers of many events of one subject look its key up once. The cost: after
`forget` returns in one process, another process that read or wrote that
subject in the last `cache_seconds` may still open (or seal) its fields for
the rest of that time; the forgetting process itself forgets at once, and
fields sealed meanwhile read as forgotten. `cache_seconds=0` turns the
cache off: every read that meets personal data looks its keys up.
"""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable, Collection, Sequence
from dataclasses import dataclass

import orjson
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..backends import key_table_for
from ..encoding import check_name
from ..errors import InvalidEvent
from .envelope import MARK, TEXT_MARK, key_ids, opened
from .key_table import DataKey, KeyTable

MAX_CACHED = 65_536
"""Most keys a key store keeps cached; beyond it the expired ones, then all, are dropped."""


@dataclass(slots=True)
class _Cached:
    key: DataKey
    cipher: AESGCM | None
    """None: forgotten."""
    until: float
    """When the entry expires (the clock's time); forgotten keys never do."""


class KeyStore:
    """A key table and the keys cached from it; shared by a store's threads.

    Example::

        from typing import Annotated

        from eventcraft.domain import DomainEvent
        from eventcraft.eventstore import FORGOTTEN, EventStore, KeyStore, NewEvent, Personal

        class Registered(DomainEvent):
            customer_id: str
            email: Annotated[str, Personal(subject="customer_id")]

        registered = Registered(customer_id="c1", email="ada@example.com")
        with EventStore.open("sqlite:///shop.db", keys="sqlite:///keys.db") as store:
            store.append("customer-c1", [NewEvent("Registered", registered)])
        with KeyStore.open("sqlite:///keys.db", existing=True) as keys:  # an erasure request
            assert keys.forget("c1") == 1
            assert [key.material for key in keys.of_subject("c1")] == [None]
        with EventStore.open("sqlite:///shop.db", keys="sqlite:///keys.db") as store:
            (event,) = store.read_stream("customer-c1")
        assert event.data == {"customer_id": "c1", "email": FORGOTTEN}
    """

    def __init__(
        self,
        table: KeyTable,
        *,
        cache_seconds: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if isinstance(cache_seconds, bool) or not isinstance(cache_seconds, int | float):
            raise InvalidEvent(f"cache_seconds must be a number, not {cache_seconds!r}")
        if not 0 <= cache_seconds < float("inf"):
            raise InvalidEvent(f"cache_seconds must be 0 or more, not {cache_seconds!r}")
        self.table = table
        self.cache_seconds = float(cache_seconds)
        """How long a key read from the table is used without asking it again."""
        self._clock = clock
        self._lock = threading.Lock()
        self._by_id: dict[str, _Cached] = {}
        self._by_subject: dict[str, _Cached] = {}
        self._forgets = 0
        """Counts this store's forgets: a key read from the table while one ran is not
        cached, lest it outlive the forget here."""

    @classmethod
    def open(cls, url: str, *, cache_seconds: float = 1.0, existing: bool = False) -> KeyStore:
        """The key store at `url`: a store URL (`sqlite:///`, `postgresql://`, `memory://`),
        its keys in the table `eventcraft_keys` there, made when a first key is.

        With `existing`, a SQLite file that is not there is `StoreUnavailable`, for
        callers that only read or forget (a mistyped path makes no empty database)."""
        return cls(key_table_for(url, existing=existing), cache_seconds=cache_seconds)

    @property
    def url(self) -> str:
        return self.table.url

    def sealing(self, subjects: Collection[str]) -> dict[str, tuple[str, AESGCM]]:
        """Each subject's live key id and cipher, keys made where there are none."""
        now = self._clock()
        found: dict[str, tuple[str, AESGCM]] = {}
        missing = []
        with self._lock:
            for subject in subjects:
                cached = self._by_subject.get(subject)
                if cached is not None and cached.until > now and cached.cipher is not None:
                    found[subject] = (cached.key.id, cached.cipher)
                else:
                    missing.append(subject)
        if missing:
            forgets = self._forgets
            for subject, key in self.table.live_keys(missing).items():
                cached = self._remember(key, now, forgets)
                assert cached.cipher is not None  # a live key has its material
                found[subject] = (key.id, cached.cipher)
        return found

    def opening(self, key_ids: Collection[str]) -> dict[str, AESGCM | None]:
        """The cipher of each key id the table holds; None for a forgotten one. Ids the
        table never held are left out."""
        now = self._clock()
        found: dict[str, AESGCM | None] = {}
        missing = []
        with self._lock:
            for key_id in key_ids:
                cached = self._by_id.get(key_id)
                if cached is not None and (cached.cipher is None or cached.until > now):
                    found[key_id] = cached.cipher
                else:
                    missing.append(key_id)
        if missing:
            forgets = self._forgets
            for key_id, key in self.table.keys(missing).items():
                found[key_id] = self._remember(key, now, forgets).cipher
        return found

    def forget(self, subject: str) -> int:
        """Delete `subject`'s key (see `KeyTable.forget`), and drop it from this cache."""
        check_name("subject", subject)
        with self._lock:
            self._forgets += 1
        try:
            return self.table.forget(subject)
        finally:
            # Even when the forget failed part way: its erasure may have committed, and this
            # process must not go on opening the subject's fields with a cached key.
            with self._lock:
                self._forgets += 1
                self._by_subject.pop(subject, None)
                for key_id in [i for i, c in self._by_id.items() if c.key.subject == subject]:
                    del self._by_id[key_id]

    def of_subject(self, subject: str) -> list[DataKey]:
        """`subject`'s keys, live and forgotten (no material), oldest first."""
        return self.table.of_subject(check_name("subject", subject))

    def holds_keys(self) -> bool:
        """Whether any data was ever sealed with this key store's keys."""
        return self.table.holds_keys()

    def erasure_pending(self) -> bool:
        """Whether a forget's erasure from the database's files is still to be completed
        (by the next forget, of any subject)."""
        return self.table.erasure_pending()

    def open_texts(
        self, texts: Sequence[str | None], where: Callable[[int], str] | None = None
    ) -> list[str | None]:
        """Each JSON object text with its sealed personal fields opened, or replaced where
        their subject is forgotten; texts without an envelope, and None, as they are.

        For readers of the store's tables that do not go through the store
        (Spark's JDBC source, the Parquet archive): the keys of all the
        texts are looked up at once. `where(index)` names a text in errors.
        """
        named = where or (lambda index: f"text {index}")
        sealed: dict[int, dict[str, object]] = {}
        wanted: set[str] = set()
        for index, text in enumerate(texts):
            if text is not None and TEXT_MARK in text:
                data = orjson.loads(text)
                if isinstance(data, dict) and MARK in data:
                    sealed[index] = data
                    wanted.update(key_ids(data, functools.partial(named, index)))
        if not sealed:
            return list(texts)
        ciphers = self.opening(wanted)
        result = list(texts)
        for index, data in sealed.items():
            where = functools.partial(named, index)
            result[index] = orjson.dumps(opened(data, ciphers, where)).decode()
        return result

    def close(self) -> None:
        self.table.close()

    def __enter__(self) -> KeyStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _remember(self, key: DataKey, now: float, forgets: int) -> _Cached:
        cipher = AESGCM(key.material) if key.material is not None else None
        cached = _Cached(key, cipher, now + self.cache_seconds)
        if cipher is None or self.cache_seconds > 0:
            with self._lock:
                if cipher is not None and forgets != self._forgets:
                    return cached  # read while this store forgot someone: use it once
                if len(self._by_id) >= MAX_CACHED:
                    self._drop_expired(now)
                self._by_id[key.id] = cached
                if cipher is not None:
                    self._by_subject[key.subject] = cached
        return cached

    def _drop_expired(self, now: float) -> None:
        for cache in (self._by_id, self._by_subject):
            expired = [name for name, c in cache.items() if c.cipher is not None and c.until <= now]
            for name in expired:
                del cache[name]
        if len(self._by_id) >= MAX_CACHED:
            self._by_id.clear()
            self._by_subject.clear()

    def __repr__(self) -> str:
        return f"KeyStore({self.url!r}, cache_seconds={self.cache_seconds})"
