"""A projection catching up from position 0 on a store whose early events retention
archived applies every event of the log once, in order: the archive's below the low-water
mark, then the table's; whether the store was opened with `archive=` or not, and while
another process's runs move the mark under it."""

from __future__ import annotations

from pathlib import Path

import pytest
from eventcraft.eventstore import EventStore, NewEvent, RecordedEvent
from eventcraft.projections import ProjectionRunner, Subscription

from eventcraft.operations import retention

from ..eventstore.archive_workers import ORDERS, run_in_steps
from ..processes import PROCESSES


def _orders(store: EventStore, rounds: int) -> None:
    for r in range(rounds):
        for n in range(10):
            store.append(
                f"order-{n}", [NewEvent("Paid" if k else "Placed", {"r": r}) for k in range(5)]
            )


@pytest.mark.parametrize("archive", [True, False])
@pytest.mark.slow
def test_a_runner_from_0_applies_every_archived_and_stored_event_once(
    shared_store_url: str, tmp_path: Path, archive: bool
) -> None:
    url = shared_store_url
    with EventStore.open(url) as store:
        _orders(store, 6)
        whole = [e.id for e in store.read_all()]
        paid = [e.id for e in store.read_all(types=["Paid"])]
        retention.apply(store, ORDERS, [], str(tmp_path / "archive"))
        assert len(list(store.read_all())) == 10  # each order's newest, in the table
        store.append("order-3", [NewEvent("Paid", {"after": "the run"})])
        whole += [e.id for e in store.read_all(after=len(whole))]
    seen: list[RecordedEvent] = []
    receipts: list[RecordedEvent] = []
    with (
        EventStore.open(url, archive=archive) as store,
        ProjectionRunner(
            store,
            [Subscription("all", seen.append), Subscription("paid", receipts.append, types="Paid")],
            batch_size=7,
        ) as runner,
    ):
        runner.catch_up()
    assert [e.id for e in seen] == whole
    assert [e.id for e in receipts] == paid + whole[-1:]


@pytest.mark.slow
def test_a_runner_catching_up_while_runs_move_the_mark_applies_every_event_once(
    shared_store_url: str, tmp_path: Path
) -> None:
    url = shared_store_url
    with EventStore.open(url) as store:
        _orders(store, 20)
        whole = [e.id for e in store.read_all()]
    started = PROCESSES.Event()
    marks = list(range(50, len(whole) + 1, 50))
    runs = PROCESSES.Process(
        target=run_in_steps, args=(url, str(tmp_path / "archive"), marks, started)
    )
    runs.start()
    seen: list[RecordedEvent] = []

    def apply(event: RecordedEvent) -> None:
        seen.append(event)
        if len(seen) == 100:
            started.set()  # the runs begin with the runner mid-way

    try:
        with (
            EventStore.open(url, archive=True) as store,
            ProjectionRunner(store, [Subscription("all", apply)], batch_size=5) as runner,
        ):
            while runs.is_alive():
                runner.catch_up()
            runner.catch_up()
    finally:
        started.set()
        runs.join(120)
    assert runs.exitcode == 0
    assert [e.id for e in seen] == whole
