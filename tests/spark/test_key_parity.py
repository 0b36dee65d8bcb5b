"""A key means the same in every runner: Python's equality, even for 1 and 1.0, 0.0 and -0.0.

And a replay that fails on an executor says what failed there: the
executor's exception type and message, the fold, the event.
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import ANY, EventStore, NewEvent, RecordedEvent
from eventcraft.projections import DefinitionError, Fold, ProjectionRunner
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st


class _Any(sa.types.UserDefinedType[Any]):
    """A column SQLite stores any value in as it is given (no affinity): keys keep their type."""

    cache_ok = True

    def get_col_spec(self, **kw: Any) -> str:
        return "BLOB"


counts = sa.Table(
    "num_spark",
    sa.MetaData(),
    sa.Column("acc_key", _Any(), primary_key=True),
    sa.Column("events", sa.Integer, nullable=False),
    sa.Column("total", sa.Integer, nullable=False),
)


def key_of(event: RecordedEvent) -> Any:
    return event.data["k"]


def initial(key: Any) -> dict[str, Any]:
    return {"events": 0, "total": 0}


def counted(state: dict[str, Any], event: RecordedEvent) -> dict[str, Any]:
    return {"events": state["events"] + 1, "total": state["total"] + event.data["n"]}


by_key = Fold("num_spark", table=counts, key=key_of, initial=initial, apply=counted)

# Any character a store holds (not NUL, nor a lone surrogate).
held = st.characters(exclude_characters="\x00", exclude_categories=["Cs"])
EDGES = [1, 1.0, 0, 0.0, -0.0, -1, -1.0, 2**53, float(2**53), 2**63 - 1, -(2**63), 1.5, ""]
keys = st.one_of(
    st.sampled_from(EDGES),
    st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(held, max_size=12),
    st.sampled_from(["é", "e\u0301", "😀", "中文", "\u2028"]),
    st.builds(lambda c, n: c * n, held, st.integers(1, 5000)),
)


def _rows(runner: ProjectionRunner) -> list[tuple[str, Any, int, int]]:
    with runner.database.reading() as connection:
        found = connection.execute(sa.select(counts)).all()
    return sorted((type(k).__name__, repr(k), e, t) for k, e, t in found)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@example(
    history=[(1, 1), (1.0, 2), (0.0, 3), (-0.0, 4), (2**53, 5), (float(2**53), 6), ("1", 7)],
    batch_size=1,
)
@given(
    history=st.lists(st.tuples(keys, st.integers(0, 1000)), min_size=1, max_size=30),
    batch_size=st.integers(1, 10),
)
def test_keys_equal_in_python_are_one_key_in_every_runner(
    spark: Any, history: list[tuple[Any, int]], batch_size: int
) -> None:
    from eventcraft.projections.spark import replay

    with tempfile.TemporaryDirectory() as directory:
        url = f"sqlite:///{Path(directory) / 'events.db'}"
        with EventStore.open(url) as store:
            for n, (key, amount) in enumerate(history):
                store.append(f"s-{n % 3}", [NewEvent("Counted", {"k": key, "n": amount})], ANY)
            # What Python's own dict makes of these keys.
            expected: dict[Any, tuple[int, int]] = {}
            for key, amount in history:
                events, total = expected.get(key, (0, 0))
                expected[key] = (events + 1, total + amount)
            with ProjectionRunner(store, [by_key], batch_size=batch_size) as runner:
                runner.catch_up()
                incremental = _rows(runner)
                runner.rebuild(by_key.name)
                rebuilt = _rows(runner)
            replay(by_key, url, spark=spark, partitions=2)
            with ProjectionRunner(store, [by_key]) as runner:
                replayed = _rows(runner)
                with runner.database.reading() as connection:
                    stored = connection.execute(sa.select(counts)).all()
    assert incremental == rebuilt == replayed
    assert {k: (e, t) for k, e, t in stored} == expected
    assert len(stored) == len(expected)
    # One form per key: an integral float is stored as the int it equals.
    for key, *_ in stored:
        assert not (isinstance(key, float) and key.is_integer() and abs(key) < 2**63)


def test_a_key_that_is_not_a_finite_number_is_refused_by_every_runner(
    spark: Any, sqlite_url: str
) -> None:
    from eventcraft.projections.spark import ReplayFailed, replay

    nan_keyed = Fold(
        "num_spark",
        table=counts,
        key=lambda event: float("nan"),
        initial=initial,
        apply=counted,
    )
    with EventStore.open(sqlite_url) as store:
        store.append("s-1", [NewEvent("Counted", {"k": 1, "n": 1})], ANY)
        with pytest.raises(DefinitionError, match="a key is a finite number, not nan"):
            nan_keyed.fold({}, store.read_all())
    with pytest.raises(ReplayFailed, match="a key is a finite number, not nan") as failed:
        replay(nan_keyed, sqlite_url, spark=spark)
    assert failed.value.error_type == "DefinitionError"
    assert failed.value.position == 1


def test_a_replay_failing_in_the_database_names_the_error_the_executor_met(
    spark: Any, sqlite_url: str
) -> None:
    from eventcraft.projections.spark import ReplayFailed, replay

    nulls = Fold(
        "num_spark",
        table=counts,
        key=key_of,
        initial=initial,
        apply=lambda state, event: {**state, "total": None},  # total is NOT NULL
    )
    with EventStore.open(sqlite_url) as store:
        store.append("s-1", [NewEvent("Counted", {"k": k, "n": 1}) for k in "ab"], ANY)
    with pytest.raises(ReplayFailed) as failed:
        replay(nulls, sqlite_url, spark=spark)
    error = failed.value
    assert (error.name, error.error_type) == ("num_spark", "IntegrityError")
    assert error.message == "NOT NULL constraint failed: num_spark__g2.total"
    assert str(error) == (
        "replay of 'num_spark' failed on an executor: "
        "IntegrityError: NOT NULL constraint failed: num_spark__g2.total"
    )
