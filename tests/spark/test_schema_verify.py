"""schema verify as a Spark job: the same counts and failures as the in-process verify, over
the store, its archive after retention, and from the command line."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from eventcraft.domain import (
    EVENT_VERSION,
    DomainEvent,
    EventRegistry,
    verify_stored_events,
)
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.projections.spark import Archive, verify_events

from eventcraft.cli.main import main

shop = EventRegistry()


@shop.event("OrderPlaced", version=2)
class OrderPlaced(DomainEvent):
    cents: int


@shop.upcaster("OrderPlaced", from_version=1)
def _euros(data: dict[str, Any]) -> dict[str, Any]:
    return {"cents": data.pop("euros") * 100}


@shop.event("OrderShipped")
class OrderShipped(DomainEvent):
    carrier: str


def _fill(url: str) -> None:
    with EventStore.open(url) as store:
        for n in range(30):
            store.append(
                f"order-{n}",
                [
                    NewEvent("OrderPlaced", {"euros": n}, {EVENT_VERSION: 1})
                    if n % 3
                    else NewEvent("OrderPlaced", {"cents": n}, {EVENT_VERSION: 2}),
                    NewEvent("OrderShipped", {"carrier": "dhl"}),
                ],
            )
        store.append("order-x", [NewEvent("OrderPlaced", {"euro": 1}, {EVENT_VERSION: 1})])
        store.append("order-y", [NewEvent("CouponAdded", {"code": "x"})])


def _in_process(url: str) -> list[tuple[Any, ...]]:
    with EventStore.open(url) as store:
        found = verify_stored_events(store, shop)
    return [
        (c.event_type, c.version, c.events, c.failed, c.first_failure, c.last_position)
        for c in found.counts
    ]


def test_spark_counts_and_fails_the_events_the_in_process_verify_does(
    spark: Any, shared_store_url: str
) -> None:
    _fill(shared_store_url)
    counted = verify_events(spark, shared_store_url, shop)
    in_spark = [
        (c.type, c.event_version, c.events, c.failed, c.first_failure, c.last_position)
        for c in counted
    ]
    assert in_spark == _in_process(shared_store_url)
    assert in_spark == [
        ("CouponAdded", 1, 1, 1, 62, 62),
        ("OrderPlaced", 1, 21, 1, 61, 61),
        ("OrderPlaced", 2, 10, 0, None, 55),
        ("OrderShipped", 1, 30, 0, None, 60),
    ]
    errors = {(c.type, c.event_version): c.error or "" for c in counted}
    assert "KeyError('euros')" in errors[("OrderPlaced", 1)]
    assert "no event class registered" in errors[("CouponAdded", 1)]


def test_an_archive_is_verified_as_the_store_it_was_made_from(
    spark: Any, sqlite_url: str, tmp_path: Path
) -> None:
    _fill(sqlite_url)
    archive = Archive(str(tmp_path / "archive"))
    archive.export(spark, sqlite_url)
    from_archive = [
        (c.type, c.event_version, c.events, c.failed, c.first_failure, c.last_position)
        for c in verify_events(spark, archive, shop)
    ]
    assert from_archive == _in_process(sqlite_url)


def test_the_command_line_runs_it_with_spark(
    spark: Any,
    sqlite_url: str,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    _fill(sqlite_url)
    monkeypatch.setattr("eventcraft.app.load_app", lambda reference: _App())
    code = main(["--store", sqlite_url, "--app", "x:app", "schema", "verify", "--spark", "--json"])
    out = capsys.readouterr()
    assert code == 1, out.err
    document = json.loads(out.out)
    rows = [(c["event_type"], c["version"], c["events"], c["failed"]) for c in document["counts"]]
    assert rows == [(t, v, e, f) for t, v, e, f, _, _ in _in_process(sqlite_url)]
    assert document["ok"] is False
    refused = main(
        ["--store", sqlite_url, "--app", "x:app", "schema", "verify", "--spark", "--after", "3"]
    )
    assert refused == 2
    assert "--spark reads the whole log" in capsys.readouterr().err


class _App:
    registry = shop
    projections = ()
    sagas = ()
    store = None
