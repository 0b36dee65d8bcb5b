"""The database goes away under a running projection runner, on a PostgreSQL server of the
test's own: the runner says so once with its cause, backs off, says when it is back, and
its status reports the outage meanwhile."""

from __future__ import annotations

import logging

import pytest
from eventcraft.eventstore import EventStore
from eventcraft.projections import ProjectionRunner

from ..postgres_server import postgres_server
from ..waiting import until
from .models import append_history, audit, balances


def _said(caplog: pytest.LogCaptureFixture, level: int, words: str) -> list[logging.LogRecord]:
    return [r for r in caplog.records if r.levelno == level and words in r.getMessage()]


def _tries(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """What the runner said of its failed tries, one record each."""
    return [r for r in caplog.records if r.name == "eventcraft.projections"]


@pytest.mark.slow
def test_a_runner_says_an_outage_once_backs_off_and_says_when_it_is_over(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.DEBUG, logger="eventcraft")
    with postgres_server() as server, EventStore.open(server.url) as store:
        last = append_history(store, accounts=2, per_account=3)
        with ProjectionRunner(store, [balances, audit]) as runner:
            runner.start()
            runner.wait_until(last, timeout=30)
            server.stop("fast")

            # Each projection tries again, further apart each time (0.1 s doubling).
            until(
                lambda: len(_tries(caplog)) >= 8,
                "the projections to retry through the outage",
                seconds=60,
            )
            statuses = runner.status()  # no StoreUnavailable: the outage is reported
            assert [s.name for s in statuses] == ["balances", "audit"]
            assert all(s.outage is not None and s.outage_since for s in statuses)
            assert [s.position for s in statuses] == [last, last]

            server.start()
            until(
                lambda: all(s.outage is None for s in runner.status()),
                "the runner to reach the database again",
                seconds=60,
            )
            last = append_history(store, accounts=1, per_account=2)
            runner.wait_until(last, timeout=30)

    assert [r.getMessage() for r in caplog.records if r.levelno >= logging.ERROR] == []
    (began,) = _said(caplog, logging.WARNING, "cannot reach the database")
    assert "OperationalError" in began.getMessage() or "StoreUnavailable" in began.getMessage()
    assert len(_said(caplog, logging.WARNING, "reach the database again")) == 1
    retries = [r.getMessage() for r in _said(caplog, logging.DEBUG, "still cannot reach")]
    waits = [float(message.rsplit("next try in ", 1)[1].split()[0]) for message in retries]
    assert max(waits) > 0.4  # it backed off, where it used to try every second
