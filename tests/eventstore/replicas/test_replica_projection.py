"""A projection that reads the log from a hot standby and keeps its read model and
checkpoint on the primary applies each event once, through out-of-order commits, a paused
replay and a runner restarted meanwhile; `wait_until` waits for the standby to catch up."""

from __future__ import annotations

from concurrent.futures import ProcessPoolExecutor

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore, RecordedEvent
from eventcraft.projections import Projection, ProjectionRunner, ReadModel

from ...processes import PROCESSES
from ...replica_server import pause_replay, resume_replay
from .. import workers
from .conftest import Pair

# slow: A primary and a hot standby of their own, started for the module.
pytestmark = pytest.mark.slow

metadata = sa.MetaData()
applied_table = sa.Table(
    "applied",
    metadata,
    # No unique key on purpose: an event applied twice must show, not fail.
    sa.Column("position", sa.BigInteger, nullable=False),
    sa.Column("event_id", sa.Text, nullable=False),
)
applied = Projection("applied", tables=[applied_table])


@applied.on("Slow")
def _apply(read_model: ReadModel, event: RecordedEvent) -> None:
    read_model.execute(
        sa.insert(read_model[applied_table]).values(position=event.position, event_id=str(event.id))
    )


def _applied(runner: ProjectionRunner) -> list[tuple[int, str]]:
    """The read model's rows through its view, in position order."""
    with runner.database.reading() as connection:
        rows = connection.execute(sa.select(applied_table)).all()
    return sorted((int(p), str(i)) for p, i in rows)


@pytest.mark.slow
def test_a_projection_reading_the_standby_applies_each_event_once(pair: Pair) -> None:
    writers, appends = 3, 300
    with (
        EventStore.open(pair.primary_url) as primary,
        EventStore.open(pair.primary_url, replicas=[pair.standby_url]) as store,
        ProcessPoolExecutor(writers, mp_context=PROCESSES) as pool,
    ):
        pool.submit(int).result()  # the processes are up before the runner starts
        with ProjectionRunner(store, [applied]) as runner:
            runner.start()
            futures = [
                pool.submit(workers.slow_committer, pair.primary_url, w, appends, seed=10 + w)
                for w in range(writers)
            ]
            runner.wait_until(appends // 2, timeout=60)  # applying while the writers write
        pause_replay(pair.standby)
        try:
            # Restarted while the standby stands still: it resumes at its checkpoint.
            with ProjectionRunner(store, [applied]) as runner:
                runner.start()
                resume_replay(pair.standby)
                for future in futures:
                    future.result()
                last = primary.high_water_mark()
                runner.wait_until(last, timeout=60)  # waits for the standby's replay
                seen = _applied(runner)
        finally:
            resume_replay(pair.standby)
        final = [(e.position, str(e.id)) for e in primary.read_all()]
    committed = {i for f in futures for i in f.result()}
    assert seen == final, "an event was applied twice, or never"
    assert {i for _, i in seen} == committed
