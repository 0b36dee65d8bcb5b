"""A Spark replay writing its read model holds no reader of the PostgreSQL log back.

Its executors insert a generation's rows in transactions of their own; such a
transaction draws no position, so a gap in the log (here, left by appends refused
for their expected version) must be passed at once while it runs.
"""

from __future__ import annotations

import threading
import uuid
from contextlib import suppress
from typing import Any

import psycopg
import sqlalchemy as sa
from eventcraft.eventstore import NO_STREAM, EventStore, NewEvent, WrongExpectedVersion
from eventcraft.projections import Fold

from ..conftest import PG_URL

metadata = sa.MetaData()
totals = sa.Table(
    "gap_totals",
    metadata,
    sa.Column("account", sa.BigInteger, primary_key=True),
    sa.Column("cents", sa.BigInteger, nullable=False),
)
by_account = Fold(
    "gap-totals",
    table=totals,
    types=["Deposited"],
    key=lambda event: event.data["account"],
    initial=lambda key: {"account": key, "cents": 0},
    apply=lambda row, event: {**row, "cents": row["cents"] + event.data["cents"]},
)


def _writers_elsewhere(conn: psycopg.Connection[Any], ours: set[int]) -> int:
    """Transactions holding an xid that are not this test's own: the replay's writes."""
    row = conn.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE backend_xid IS NOT NULL "
        "AND pid <> ALL(%s) AND datname = current_database()",
        (list(ours),),
    ).fetchone()
    return int(row[0]) if row else 0


def test_readers_pass_gaps_while_a_spark_replay_writes_its_read_model(
    spark: Any, pg_url: str
) -> None:
    from eventcraft.projections.spark import replay

    with EventStore.open(pg_url) as store:
        for batch in range(40):  # 40,000 keys: the executors' inserts take a while
            deposits = range(batch * 1000, (batch + 1) * 1000)
            store.append(
                f"deposits-{batch}",
                [NewEvent("Deposited", {"account": n, "cents": n}) for n in deposits],
            )
        done = threading.Event()
        failures: list[BaseException] = []

        def run_replay() -> None:
            try:
                replay(by_account, pg_url, spark=spark)
            except BaseException as error:
                failures.append(error)
            finally:
                done.set()

        replaying = threading.Thread(target=run_replay)
        stalls = overlaps = 0
        with psycopg.connect(PG_URL, autocommit=True) as watcher:
            ours = {watcher.info.backend_pid}
            replaying.start()
            while not done.is_set():
                stream = f"order-{uuid.uuid4().hex[:8]}"
                store.append(stream, [NewEvent("A", {})], expected_version=NO_STREAM)
                with suppress(WrongExpectedVersion):  # its position stays empty: a gap
                    store.append(stream, [NewEvent("B", {})], expected_version=NO_STREAM)
                busy = _writers_elsewhere(watcher, ours)
                later = store.append(f"invoice-{uuid.uuid4().hex[:8]}", [NewEvent("C", {})])
                if store.high_water_mark() < later.positions[0]:
                    stalls += 1
                overlaps += busy > 0 and _writers_elsewhere(watcher, ours) > 0
            replaying.join(60)
        assert not failures
        assert overlaps > 0, "no read happened while the replay was writing"
        assert stalls == 0
