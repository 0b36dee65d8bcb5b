"""A PostgreSQL store is read in the JVM through Debian's JDBC driver, up to H and no further."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
from eventcraft.eventstore import ANY, EventStore, NewEvent
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.conftest import missing

from .histories import append

HISTORY = [[(n % 7, kind, 100 + n)] for n, kind in enumerate(["open", "deposit", "order"] * 15)]


@pytest.fixture
def jdbc(spark: Any) -> None:
    from eventcraft.projections.spark.jdbc import POSTGRES_JAR

    if not os.path.isfile(POSTGRES_JAR):
        missing(f"no PostgreSQL JDBC driver at {POSTGRES_JAR}: `make services` installs it")


def _fields(e: Any) -> tuple[Any, ...]:
    return (e.position, e.stream_id, e.version, e.type, e.id, e.data, e.metadata, e.recorded_at)


def _events(frame: Any) -> list[tuple[Any, ...]]:
    import pyarrow as pa
    from eventcraft.projections.spark.rows import EVENT_SCHEMA, events_of

    table = frame.toArrow().cast(EVENT_SCHEMA)
    return sorted(
        (*_fields(e), e.tags)
        for batch in table.to_batches()
        for e in events_of(pa.RecordBatch.from_arrays(batch.columns, schema=EVENT_SCHEMA))
    )


def _stored(store: EventStore, **filters: Any) -> list[tuple[Any, ...]]:
    return [(*_fields(e), e.tags) for e in store.read_all(**filters)]


def test_a_postgresql_store_is_read_through_jdbc_as_read_all_reads_it(
    spark: Any, jdbc: None, pg_url: str
) -> None:
    from eventcraft.projections.spark.jdbc import read_path
    from eventcraft.projections.spark.source import read_store

    with EventStore.open(pg_url) as store:
        append(store, HISTORY)
        odd = NewEvent("Odd", {"s": "é\t\\\n'\"", "n": [1.5, None]}, tags=["a,b", '"{x}\\'])
        store.append("weird-1", [odd], ANY)
        head = store.high_water_mark()
        assert read_path(spark, pg_url) == "jdbc"
        everything = read_store(spark, pg_url, after=0, upto=head, partitions=3)
        assert everything.rdd.getNumPartitions() == 3
        assert _events(everything) == _stored(store)
        some = read_store(
            spark, pg_url, after=5, upto=30, categories=["account"], types=["MoneyDeposited"]
        )
        assert _events(some) == [
            e
            for e in _stored(store, categories=["account"], types=["MoneyDeposited"])
            if 5 < e[0] <= 30
        ]


def test_what_commits_after_the_high_water_mark_is_not_read(
    spark: Any, jdbc: None, pg_url: str
) -> None:
    from eventcraft.projections.spark.source import read_store

    with EventStore.open(pg_url) as store:
        append(store, HISTORY)
        head = store.high_water_mark()
        # The frame is planned here; its tasks run only at collect, after more appends:
        # only a bound inside the query keeps them out (Spark's upperBound does not).
        frame = read_store(spark, pg_url, after=0, upto=head, partitions=2)
        append(store, HISTORY)
        positions = sorted(row.position for row in frame.select("position").collect())
        assert positions == list(range(1, head + 1))


def test_replay_and_export_say_which_way_they_read_the_log(
    spark: Any, jdbc: None, pg_url: str, sqlite_url: str, tmp_path: Path
) -> None:
    from eventcraft.projections.spark import Archive, replay
    from eventcraft.projections.spark.jdbc import read_path

    from examples.read_models import account_balances

    for url, path in ((pg_url, "jdbc"), (sqlite_url, "python")):
        with EventStore.open(url) as store:
            append(store, HISTORY)
        archive = Archive(str(tmp_path / path))
        assert archive.export(spark, url).read_path == path
        assert replay(account_balances, url, spark=spark).read_path == path
        assert replay(account_balances, url, spark=spark, source=archive).read_path == "archive"
    # The JDBC driver speaks TCP: a store over a Unix socket is read by Python workers.
    assert read_path(spark, "postgresql:///test?host=/var/run/postgresql") == "python"


def test_a_store_url_becomes_jdbc_options_with_the_password_out_of_the_url(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from eventcraft.projections.spark.jdbc import jdbc_options

    options = jdbc_options("postgresql://ann:p%40ss@db.example:6543/app?schema=s1&sslmode=require")
    assert options["url"] == "jdbc:postgresql://db.example:6543/app"
    assert (options["user"], options["password"]) == ("ann", "p@ss")
    assert (options["currentSchema"], options["sslmode"]) == ("s1", "require")
    assert jdbc_options("postgresql://u@[::1]/app")["url"] == "jdbc:postgresql://[::1]/app"
    monkeypatch.setenv("PGUSER", "bob")
    monkeypatch.setenv("PGPASSWORD", "secret")
    options = jdbc_options("postgresql://127.0.0.1/app")
    assert (options["user"], options["password"]) == ("bob", "secret")


def _arrival_fold() -> Any:
    """Per key, the positions of its events in the order the fold saw them: any event
    folded out of log order, or a key split over two tasks, shows in its row."""
    import sqlalchemy as sa
    from eventcraft.projections import Fold, StreamKey

    table = sa.Table(
        "t_arrivals",
        sa.MetaData(),
        sa.Column("key", sa.Text, primary_key=True),
        sa.Column("seen", sa.Text, nullable=False),
    )
    return Fold(
        "arrivals",
        table=table,
        key=StreamKey("ä-"),
        initial=lambda key: {"seen": ""},
        apply=lambda state, event: {"seen": f"{state['seen']} {event.position}"},
    )


def test_a_fold_keyed_by_stream_reads_whole_keys_and_folds_them_in_log_order(
    spark: Any, jdbc: None, pg_url: str
) -> None:
    from eventcraft.projections import ProjectionRunner
    from eventcraft.projections.spark import replay
    from eventcraft.projections.spark.jdbc import MOST_KEYED_TASKS

    fold = _arrival_fold()
    # "ä-7" and "7" are one key, "7" ("ä-ä-7" is "ä-7"): twelve such pairs, whose
    # events interleave with each other's and with other streams'.
    pairs = [(f"ä-{n}", str(n)) for n in range(12)]
    streams = [s for pair in pairs for s in pair] + [f"ä-ä-{n}" for n in range(12)] + ["x-1"]
    with EventStore.open(pg_url) as store, ProjectionRunner(store, [fold]) as runner:
        for turn in range(4):
            for stream in streams:
                store.append(stream, [NewEvent("Seen", {"turn": turn})], ANY)
        runner.rebuild(fold.name)
        expected = _rows(runner, fold)
        for partitions, by_key in ((3, True), (MOST_KEYED_TASKS + 1, False)):
            report = replay(fold, pg_url, spark=spark, partitions=partitions)
            assert (report.read_path, report.by_key) == ("jdbc", by_key)
            assert _rows(runner, fold) == expected
    seen = dict(expected)
    assert all(seen[str(n)].count(" ") == 8 for n in range(12))  # both streams, merged


def _rows(runner: Any, fold: Any) -> list[tuple[Any, ...]]:
    import sqlalchemy as sa

    with runner.database.reading() as connection:
        found = connection.execute(sa.select(fold.table).order_by(fold.table.c.key))
        return [tuple(row) for row in found]


@settings(max_examples=40, deadline=None)
@given(
    prefix=st.text(st.characters(exclude_categories=["Cs", "Cc"]), max_size=4),
    stream_ids=st.lists(
        st.text(st.characters(exclude_categories=["Cs", "Cc"]), min_size=1, max_size=8),
        min_size=1,
        max_size=10,
    ),
)
def test_a_stream_key_computed_by_postgresql_is_the_one_python_computes(
    prefix: str, stream_ids: list[str]
) -> None:
    import psycopg
    from eventcraft.projections.spark.jdbc import key_sql

    from tests.conftest import PG_URL, _need_postgres

    _need_postgres()
    with psycopg.connect(PG_URL) as conn:
        computed = [
            conn.execute(
                f'SELECT {key_sql(prefix)} FROM (SELECT %s COLLATE "C" AS stream_id) AS s',
                (stream_id,),
            ).fetchone()[0]  # type: ignore[index]
            for stream_id in stream_ids
        ]
    assert computed == [s.removeprefix(prefix) for s in stream_ids]
