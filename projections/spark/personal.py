"""Personal fields in Spark: the log's DataFrame holds them sealed, a replay opens them.

Every way Spark reads the log (the JDBC source, Python workers' sealed
reads, the Parquet archive) hands over each event's data as stored, with
personal fields sealed in their envelope: so the archive never holds them
in the clear, and forgetting a subject forgets it in the archive too. A
replay and `read_events` open them with the store's key store as they
read, through an Arrow UDF that is given the data of sealed events only
(null for the others), so a log with few sealed events ships few rows to
Python. A key store given must exist (a mistyped SQLite path makes no
file), and one that holds no key at all fails the job at a sealed event,
naming it, as a replay without one does: sealed envelopes never reach the
reducers.
"""

from __future__ import annotations

import threading
from contextlib import closing

import pyarrow as pa
from eventcraft.eventstore import SEALED_MARK, KeyStore, UnreadablePersonalData
from pyspark.sql import DataFrame
from pyspark.sql import functions as F

from .archive import DATA_VARIANT

_stores: dict[str, KeyStore] = {}
_stores_lock = threading.Lock()


def opened(events: DataFrame, keys: str | None) -> DataFrame:
    """`events` (of the event schema) with their personal fields opened, or replaced where
    their subject is forgotten, with the keys of the key store at `keys`.

    Without `keys` (an archive read on its own), or with a key store that holds
    no key (the wrong one), a sealed event fails the job rather than hand its
    ciphertext on. A SQLite key store that is not there is `StoreUnavailable`.
    """
    refusal = None
    if keys is None:
        refusal = "cannot open without a key store: give keys= its store's URL"
    else:
        with closing(KeyStore.open(keys, existing=True)) as store:
            if not store.holds_keys():
                refusal = f"cannot open: the key store {store.url} holds no keys (the wrong one?)"
    data = F.col("data")
    sealed_only = F.when(data.contains(SEALED_MARK), data)

    # A function of its own, not a partial: Spark reads the argument types from its hints.
    def open_column(data: pa.Array, positions: pa.Array) -> pa.Array:
        return _open_column(keys, data, positions, refusal)

    opener = F.arrow_udf(open_column, "string")  # type: ignore[attr-defined]
    parsed = DATA_VARIANT in events.columns
    if parsed:
        # The archive parsed the sealed text: parsed again from the opened one.
        events = events.withColumn(DATA_VARIANT, F.when(sealed_only.isNull(), F.col(DATA_VARIANT)))
    events = events.withColumn("data", F.coalesce(opener(sealed_only, F.col("position")), data))
    if parsed:
        events = events.withColumn(
            DATA_VARIANT, F.coalesce(F.col(DATA_VARIANT), F.parse_json("data"))
        )
    return events


def _open_column(
    keys: str | None, data: pa.Array, positions: pa.Array, refusal: str | None = None
) -> pa.Array:
    """Executor side: the sealed texts of `data` opened; nulls (unsealed events) stay null.
    With a `refusal`, a sealed text fails with it."""
    if data.null_count == len(data):
        return data
    texts = data.to_pylist()
    at = positions.to_pylist()

    def where(index: int) -> str:
        return f"the event at position {at[index]}"

    if keys is None or refusal is not None:
        index = next(i for i, text in enumerate(texts) if text is not None)
        raise UnreadablePersonalData(where(index), "(any)", refusal or "cannot open")
    return pa.array(_store(keys).open_texts(texts, where), pa.string())


def _store(url: str) -> KeyStore:
    """One key store per URL per Python worker, which Spark reuses from task to task.

    Uncached: a worker outlives its job, and a replay started after a `forget`
    must read the subject as forgotten, though this worker opened its fields
    in the job before. `open_texts` looks up a whole batch's keys at once, so
    the cost is one lookup per Arrow batch.
    """
    with _stores_lock:
        store = _stores.get(url)
        if store is None:
            store = _stores[url] = KeyStore.open(url, cache_seconds=0)
        return store
