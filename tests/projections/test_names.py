"""The names a runner makes from a definition's, and the tables already in its way."""

from __future__ import annotations

import re

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.projections import DefinitionError, Fold, ProjectionRunner, TableConflict

from .models import balances, balances_table, rows

CYRILLIC = "\u0431"  # two bytes in UTF-8


def points(table_name: str, index_name: str | None = None) -> Fold:
    """Points per player, kept in a table (and an index) of the names given."""
    table = sa.Table(
        table_name,
        sa.MetaData(),
        sa.Column("player", sa.Text, primary_key=True),
        sa.Column("points", sa.Integer, nullable=False),
        *([sa.Index(index_name, "points")] if index_name else []),
    )
    return Fold(
        "points",
        table=table,
        key=lambda event: event.stream_id,
        initial=lambda key: {"player": key, "points": 0},
        apply=lambda state, event: {**state, "points": state["points"] + event.data["n"]},
    )


def made_tables(store: EventStore) -> list[str]:
    with ProjectionRunner(store, []) as runner:
        return sorted(sa.inspect(runner.database.engine).get_table_names())


@pytest.mark.parametrize(
    ("table_name", "index_name", "refused"),
    [
        pytest.param(CYRILLIC * 40, None, CYRILLIC * 40, id="table-80-bytes"),
        pytest.param(CYRILLIC * 30, None, CYRILLIC * 30, id="table-60-bytes"),
        pytest.param(CYRILLIC * 29 + "x", None, CYRILLIC * 29 + "x", id="table-59-bytes"),
        pytest.param("points", CYRILLIC * 30, CYRILLIC * 30, id="index-60-bytes"),
    ],
)
def test_a_name_whose_generations_would_pass_63_bytes_is_refused_before_anything_is_made(
    pg_url: str, table_name: str, index_name: str | None, refused: str
) -> None:
    with EventStore.open(pg_url) as store:
        store.append("player-1", [NewEvent("Scored", {"n": 2})])
        before = made_tables(store)
        with pytest.raises(DefinitionError, match=rf"{re.escape(repr(refused))}.* 63 bytes"):
            fold = points(table_name, index_name)
            with ProjectionRunner(store, [fold]) as runner:
                runner.catch_up()
                # Generation 10 is the first whose suffix has two digits.
                for _ in range(10):
                    runner.rebuild("points")
        assert made_tables(store) == before


def test_the_longest_table_and_index_names_accepted_serve_every_generation(pg_url: str) -> None:
    longest = CYRILLIC * 25  # 50 bytes: 13 left for "__g" and any generation's number
    fold = points(longest, longest[:-1] + "\u0438")
    with EventStore.open(pg_url) as store, ProjectionRunner(store, [fold]) as runner:
        store.append("player-1", [NewEvent("Scored", {"n": 2})])
        store.append("player-1", [NewEvent("Scored", {"n": 3})])
        runner.catch_up()
        reports = [runner.rebuild("points") for _ in range(11)]
        with runner.database.reading() as connection:
            assert rows(connection, fold.table) == [("player-1", 5)]
            assert f"{longest}__g12" in sa.inspect(connection).get_table_names()
        assert reports[-1].generation == 12


@pytest.mark.slow
def test_a_table_of_the_users_own_in_the_way_of_a_declared_name_is_refused_and_left_alone(
    shared_store_url: str,
) -> None:
    with EventStore.open(shared_store_url) as store:
        with ProjectionRunner(store, []) as bare, bare.database.transaction() as connection:
            connection.exec_driver_sql("CREATE TABLE balances (name TEXT, cents BIGINT)")
            connection.exec_driver_sql("INSERT INTO balances VALUES ('mine', 1)")
        before = made_tables(store)
        with pytest.raises(TableConflict, match=r"'balances' .*not one the runner made"):
            ProjectionRunner(store, [balances])
        assert made_tables(store) == before
        with ProjectionRunner(store, []) as bare, bare.database.transaction() as connection:
            assert connection.exec_driver_sql("SELECT * FROM balances").all() == [("mine", 1)]
            connection.exec_driver_sql("DROP TABLE balances")
        store.append("account-1", [NewEvent("Deposited", {"amount": 4})])
        with ProjectionRunner(store, [balances]) as runner:
            runner.catch_up()
            with runner.database.reading() as connection:
                assert rows(connection, balances_table) == [("account-1", 4, 1)]
