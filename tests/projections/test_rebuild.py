"""Blue/green rebuilds: new tables filled from position 0, swapped in without a gap."""

from __future__ import annotations

import contextlib
import threading
from collections import Counter
from typing import Literal

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.projections import (
    DefinitionError,
    ParkedEventNotFound,
    ProjectionRunner,
    ProjectionStopped,
    Subscription,
)

from .models import (
    append_history,
    applied_table,
    audit,
    balances,
    balances_table,
    flaky,
    notes,
    notes_table,
    rows,
)


def physical_tables(runner: ProjectionRunner) -> set[str]:
    return {name for name in sa.inspect(runner.database.engine).get_table_names() if "__g" in name}


def test_a_rebuild_gives_what_catching_up_gave_in_a_new_generation(store: EventStore) -> None:
    last = append_history(store, accounts=4, per_account=6)
    with ProjectionRunner(store, [balances, audit], batch_size=7) as runner:
        runner.catch_up()
        with runner.database.reading() as connection:
            before = rows(connection, balances_table), rows(connection, applied_table)
        reports = [runner.rebuild("balances", progress=True), runner.rebuild("audit")]
        with runner.database.reading() as connection:
            after = rows(connection, balances_table), rows(connection, applied_table)
        assert after == before
        assert [(r.generation, r.position) for r in reports] == [(2, last), (2, last)]
        assert physical_tables(runner) == {"balances__g2", "applied__g2"}
        assert [s.generation for s in runner.status()] == [2, 2]


@pytest.mark.slow
def test_a_rebuild_hands_over_to_the_live_projector_without_gap_or_repeat(
    shared_store_url: str,
) -> None:
    with EventStore.open(shared_store_url) as store:
        append_history(store, accounts=3, per_account=30)
        done = threading.Event()

        def write() -> None:
            with EventStore.open(shared_store_url) as writer:
                n = 0
                while not done.is_set() or n < 50:
                    writer.append(f"account-{n % 5}", [NewEvent("Deposited", {"amount": n})])
                    n += 1

        writer = threading.Thread(target=write)
        with ProjectionRunner(store, [audit, balances], batch_size=10) as runner:
            runner.start()
            writer.start()
            runner.rebuild("audit")
            runner.rebuild("balances")
            done.set()
            writer.join()
            head = store.high_water_mark()
            runner.wait_until(head, timeout=60)
            with runner.database.reading() as connection:
                applied = Counter(row[0] for row in rows(connection, applied_table))
                live = rows(connection, balances_table)
            runner.stop()
            runner.rebuild("balances")
            with runner.database.reading() as connection:
                assert rows(connection, balances_table) == live
        assert sorted(applied) == [e.position for e in store.read_all()]
    assert set(applied.values()) == {1}


def test_a_subscription_cannot_be_rebuilt(store: EventStore) -> None:
    with (
        ProjectionRunner(store, [Subscription("mailer", print)]) as runner,
        pytest.raises(DefinitionError, match="no read model"),
    ):
        runner.rebuild("mailer")


def test_a_rebuild_that_fails_swaps_nothing(store: EventStore) -> None:
    broken: set[str] = set()
    first, second = notes(store, "a", "b")
    with ProjectionRunner(store, [flaky("skip", broken)]) as runner:
        runner.catch_up()
        broken.add("b")  # a bug shipped after the first run
        with pytest.raises(ValueError, match="cannot take 'b'"):
            runner.rebuild("notes-skip")
        with runner.database.reading() as connection:
            assert rows(connection, notes_table) == [(first, "a"), (second, "b")]
        assert [s.generation for s in runner.status()] == [1]
        broken.clear()
        assert runner.rebuild("notes-skip").generation == 3  # the failed one's tables dropped
        assert physical_tables(runner) == {"notes__g3"}


@pytest.mark.parametrize("then", ["skip", "stop"])
def test_a_rebuild_settles_the_parked_events_it_applied(
    store: EventStore, then: Literal["skip", "stop"]
) -> None:
    broken = {"bad"}
    first, bad, last = notes(store, "a", "bad", "c")
    with ProjectionRunner(store, [flaky(then, broken)]) as runner:
        with contextlib.suppress(ProjectionStopped):
            runner.catch_up()
        broken.clear()  # the fix is deployed, and the read model rebuilt with it
        runner.rebuild(f"notes-{then}")
        assert runner.parked(f"notes-{then}") == []
        with pytest.raises(ParkedEventNotFound):
            runner.retry_parked(f"notes-{then}", bad)
        runner.catch_up()
        with runner.database.reading() as connection:
            assert rows(connection, notes_table) == [(first, "a"), (bad, "bad"), (last, "c")]
        (status,) = runner.status()
        assert (status.position, status.parked, status.stopped_at) == (last, 0, None)
