"""A reducer fold's rows are the same from the incremental runner, the rebuild and Spark SQL."""

from __future__ import annotations

import math
import tempfile
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import ANY, EventStore, NewEvent
from eventcraft.projections import DefinitionError, ProjectionRunner, StreamKey
from eventcraft.projections.reducers import (
    POSITION,
    RECORDED_AT,
    Count,
    First,
    Last,
    Max,
    Min,
    ReducerFold,
    Set,
    Sum,
)
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st

from tests.conftest import PG_URL, _need_postgres

from .histories import fresh_store_url

reduced = sa.Table(
    "reduced",
    sa.MetaData(),
    sa.Column("stream", sa.String, primary_key=True),
    sa.Column("n_sum", sa.BigInteger),
    sa.Column("f_sum", sa.Float),
    sa.Column("events", sa.Integer),
    sa.Column("a_with_n", sa.Integer),
    sa.Column("n_min", sa.BigInteger),
    sa.Column("deep_max", sa.Float),
    sa.Column("s_first", sa.String),
    sa.Column("s_last_b", sa.String),
    sa.Column("s_max", sa.String),
    sa.Column("b_set", sa.Boolean),
    sa.Column("first_at", sa.DateTime(timezone=True)),
    sa.Column("last_position", sa.BigInteger),
)
fold = ReducerFold(
    "reduced",
    table=reduced,
    key=StreamKey(),
    columns={
        "n_sum": Sum("n"),
        "f_sum": Sum("f", types=["A", "B"]),
        "events": Count(),
        "a_with_n": Count("n", types="A"),
        "n_min": Min("n"),
        "deep_max": Max("x.y"),
        "s_first": First("s"),
        "s_last_b": Last("s", types="B"),
        "s_max": Max("s"),
        "b_set": Set("b", types="A"),
        "first_at": Min(RECORDED_AT),
        "last_position": Max(POSITION),
    },
)

MISSING = object()
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**40), 2**40),
    st.sampled_from([0, -1, 2**63 - 1, 2**63, 2**64 - 1, -(2**63), 1.0, -0.0, 0.1, 1e300, 1.5e-7]),
    st.floats(-1e12, 1e12, allow_nan=False),
    # Text the store takes: no NUL, and no lone surrogates (not UTF-8), which characters() draws
    # unless told a codec.
    st.text(st.characters(codec="utf-8", exclude_characters="\x00"), max_size=5),
    st.sampled_from(["12", "1.5", "", "é", "😀", "Z", "a"]),
)
values = st.one_of(st.just(MISSING), scalars, st.dictionaries(st.sampled_from("yz"), scalars))
event = st.tuples(
    st.sampled_from(["s-1", "s-2", "t-3"]),
    st.sampled_from(["A", "B", "C"]),
    st.fixed_dictionaries({name: values for name in ("n", "f", "x", "s", "b")}),
)


def _data(fields: dict[str, Any]) -> dict[str, Any]:
    return {name: value for name, value in fields.items() if value is not MISSING}


def _sums_fit(history: list[tuple[str, str, dict[str, Any]]]) -> bool:
    """Whether every stream's `n_sum` stays within 64 bits, whatever order it is added in.

    A Sum past 64 bits fails every runner, each in its own way (the incremental runner
    parks the event, the replay raises `ReplayFailed`:
    `test_a_sum_past_64_bits_fails_the_replay_naming_the_fold`); parity is about the
    histories they can hold."""
    totals: dict[str, int] = {}
    for stream, _, fields in history:
        n = fields["n"]
        if isinstance(n, int) and not isinstance(n, bool) and -(2**63) <= n < 2**63:
            totals[stream] = totals.get(stream, 0) + abs(n)
    return all(total < 2**63 for total in totals.values())


def _rows(runner: ProjectionRunner) -> list[tuple[Any, ...]]:
    with runner.database.reading() as connection:
        found = connection.execute(sa.select(reduced).order_by(reduced.c.stream)).all()
    return [tuple(row) for row in found]


def _same(left: list[tuple[Any, ...]], right: list[tuple[Any, ...]]) -> bool:
    """Equal rows; float sums to 1e-9 (Spark adds in another order)."""
    if len(left) != len(right):
        return False
    f_sum = list(reduced.columns).index(reduced.c.f_sum)
    for one, other in zip(left, right, strict=True):
        if one[:f_sum] + one[f_sum + 1 :] != other[:f_sum] + other[f_sum + 1 :]:
            return False
        if not math.isclose(one[f_sum], other[f_sum], rel_tol=1e-9, abs_tol=1e-6):
            return False
    return True


@pytest.mark.parametrize("kind", ["sqlite", "postgres"])
@settings(
    max_examples=10,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(
    history=st.lists(event, min_size=1, max_size=25),
    batch_size=st.integers(1, 10),
    from_archive=st.booleans(),
)
# Integers beside decimals in one field: the archive's shredded variant reads both back
# as decimals, yet an integer column takes the integers alone.
@example(
    history=[("s-1", "A", {"n": n, "f": n}) for n in (5, 1.0, 2**63, 2.5, -0.0, 7)],
    batch_size=1,
    from_archive=True,
)
def test_reducers_fold_alike_in_python_and_in_spark_sql(
    spark: Any,
    kind: str,
    history: list[tuple[str, str, dict[str, Any]]],
    batch_size: int,
    from_archive: bool,
) -> None:
    from eventcraft.projections.spark import Archive, replay

    assume(_sums_fit(history))
    if kind == "postgres":
        _need_postgres()
    with (
        tempfile.TemporaryDirectory() as directory,
        fresh_store_url(kind, PG_URL, Path(directory)) as url,
        EventStore.open(url) as store,
    ):
        for stream, type_, fields in history:
            store.append(stream, [NewEvent(type_, _data(fields))], ANY)
        with ProjectionRunner(store, [fold], batch_size=batch_size) as runner:
            runner.catch_up()
            incremental = _rows(runner)
            runner.rebuild(fold.name)
            rebuilt = _rows(runner)
        source = None
        if from_archive:
            source = Archive(str(Path(directory) / "archive"))
            source.export(spark, url)
        report = replay(fold, url, spark=spark, source=source)
        with ProjectionRunner(store, [fold]) as runner:
            replayed = _rows(runner)
    assert incremental == rebuilt
    assert _same(replayed, incremental), (replayed, incremental)
    assert report.events == len(history)
    assert report.rows == len(incremental)


def test_a_reducer_fold_is_checked_against_its_table() -> None:
    with pytest.raises(DefinitionError, match="a reducer for each column"):
        ReducerFold("reduced", table=reduced, key=StreamKey(), columns={"n_sum": Sum("n")})
    columns = dict(fold.reducers)
    with pytest.raises(DefinitionError, match=r"Sum\('s'\) cannot fill column 's_first'"):
        ReducerFold(
            "reduced", table=reduced, key=StreamKey(), columns={**columns, "s_first": Sum("s")}
        )
    with pytest.raises(DefinitionError, match="a field is a path of names"):
        Max("a..b")
    with pytest.raises(DefinitionError, match="a field is a path of names"):
        Max("$['x']")
    with pytest.raises(DefinitionError, match="Set needs the event types"):
        Set("b", types=None)  # type: ignore[arg-type]


def test_a_sum_past_64_bits_fails_the_replay_naming_the_fold(spark: Any, sqlite_url: str) -> None:
    from eventcraft.projections.spark import ReplayFailed, replay

    with EventStore.open(sqlite_url) as store:
        store.append("s-1", [NewEvent("A", {"n": 2**62}) for _ in range(2)], ANY)
    with pytest.raises(ReplayFailed) as failed:
        replay(fold, sqlite_url, spark=spark)
    assert failed.value.name == "reduced"
    assert "ArithmeticException" in failed.value.error_type
    assert "overflow" in failed.value.message.lower()
    with EventStore.open(sqlite_url) as store, ProjectionRunner(store, [fold]) as runner:
        assert _rows(runner) == []  # nothing swapped in
