"""A Spark replay and an archive export are one span each, saying what the run did."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from eventcraft.eventstore import EventStore
from opentelemetry.trace import StatusCode

from examples.read_models import account_balances

from ..spark.histories import append
from .conftest import Telemetry

HISTORY = [[(n % 4, kind, 100 + n)] for n, kind in enumerate(["open", "deposit"] * 10)]


def test_a_replay_and_an_export_are_a_span_each(
    telemetry: Telemetry, spark: Any, sqlite_url: str, tmp_path: Path
) -> None:
    from eventcraft.projections.spark import Archive, replay

    with EventStore.open(sqlite_url) as store:
        append(store, HISTORY)
        head = store.high_water_mark()
    archive = Archive(str(tmp_path / "archive"))
    exported = archive.export(spark, sqlite_url)
    report = replay(account_balances, sqlite_url, spark=spark, source=archive)

    (export,) = telemetry.finished(f"export {archive.path}")
    assert export.attributes is not None
    assert export.attributes["eventcraft.spark.events"] == exported.events == head
    assert export.attributes["eventcraft.spark.read_path"] == "python"
    (run,) = telemetry.finished(f"replay {account_balances.name}")
    assert run.attributes is not None
    assert run.attributes["eventcraft.spark.read_path"] == "archive"
    assert run.attributes["eventcraft.spark.events"] == report.events > 0
    assert run.attributes["eventcraft.spark.replayed_to"] == head
    assert run.status.status_code != StatusCode.ERROR


def test_a_replay_refused_before_it_runs_makes_no_span(
    telemetry: Telemetry, spark: Any, sqlite_url: str
) -> None:
    from eventcraft.projections import DefinitionError
    from eventcraft.projections.spark import replay

    with pytest.raises(DefinitionError):
        replay(account_balances, "memory://", spark=spark)  # checked before the run: no span
    assert telemetry.finished(f"replay {account_balances.name}") == []
