"""A fold subscribed to a query of types and tags replays in Spark to what the runner builds."""

from __future__ import annotations

from typing import Any

import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent, Query, QueryItem, RecordedEvent
from eventcraft.projections import Fold, ProjectionRunner, State

metadata = sa.MetaData()
seats_table = sa.Table(
    "spark_query_seats",
    metadata,
    sa.Column("student_id", sa.Text, primary_key=True),
    sa.Column("moves", sa.Integer, nullable=False),
)


def _moved(state: State, event: RecordedEvent) -> State:
    return {**state, "moves": state["moves"] + 1}


c1_seats = Fold(
    "spark-c1-seats",
    table=seats_table,
    key=lambda event: event.data["student"],
    initial=lambda key: {"student_id": key, "moves": 0},
    apply=_moved,
    query=Query(
        [
            QueryItem(types=["Subscribed", "Unsubscribed"], tags=["course:c1"]),
            QueryItem(types=["Waived"]),
        ]
    ),
)


def _rows(runner: ProjectionRunner) -> list[tuple[Any, ...]]:
    with runner.database.reading() as connection:
        return sorted(tuple(row) for row in connection.execute(sa.select(seats_table)))


def test_a_query_fold_replays_in_spark_to_the_rows_the_runner_builds(
    spark: Any, shared_store_url: str
) -> None:
    from eventcraft.projections.spark import replay

    with EventStore.open(shared_store_url) as store:
        for n in range(40):
            course = f"course:c{n % 3}"
            kind = ["Subscribed", "Unsubscribed", "Waived", "Noted"][n % 4]
            event = NewEvent(kind, {"student": f"s{n % 5}"}, tags=[course, f"student:s{n % 5}"])
            store.append(f"student-s{n % 5}", [event])
        with ProjectionRunner(store, [c1_seats], lease_ttl=None) as runner:
            runner.catch_up()
            in_process = _rows(runner)
        report = replay(c1_seats, shared_store_url, spark=spark)
        with ProjectionRunner(store, [c1_seats], lease_ttl=None) as runner:
            assert report.generation == 2
            assert _rows(runner) == in_process
    selected = [e for e in range(40) if (e % 4 < 2 and e % 3 == 1) or e % 4 == 2]
    assert report.events == len(selected)
    assert sum(moves for _, moves in in_process) == len(selected)
