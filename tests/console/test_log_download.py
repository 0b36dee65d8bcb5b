"""The console's download of the log is the export: the same lines `eventcraft export` writes
for the same range, streamed from the store's JSON lines."""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest
from eventcraft.eventstore import EventStore, NewEvent
from starlette.testclient import TestClient

from eventcraft.console import create_app

from ..cli.conftest import Run
from .conftest import LOCAL
from .lag_app import app


def _log(store: EventStore) -> None:
    store.delete_stream("ghost-1", tombstone=True)  # deleted before its first event
    for n in range(30):
        store.append(
            f"order-{n % 3}",
            [NewEvent("Placed", {"n": n, "note": "ü"}, {"correlation_id": f"c{n}"})],
        )
        store.append(f"cart-{n % 2}", [NewEvent("Emptied", {"n": n}, tags=[f"n:{n}"])])
    store.delete_stream("order-1")
    store.append("order-2", [NewEvent("Paid", {})])


@pytest.mark.parametrize(
    ("query", "arguments"),
    [
        ("", ()),
        ("?after=17", ("--after", "17")),
        ("?category=order", ("--category", "order")),
        (
            "?category=order,cart&after=5",
            ("--category", "order", "--category", "cart", "--after", "5"),
        ),
    ],
)
def test_the_log_download_is_the_export_of_the_same_range(
    shared_store_url: str, run: Run, tmp_path: Path, query: str, arguments: tuple[str, ...]
) -> None:
    exported = tmp_path / "export.ndjson"
    with EventStore.open(shared_store_url) as store:
        _log(store)
        with TestClient(create_app(store, app), base_url=LOCAL) as console:
            response = console.get(f"/log.ndjson{query}")
    done = run("--debug", "--store", shared_store_url, "export", *arguments, "--out", str(exported))
    assert done.code == 0, done.err
    assert response.status_code == 200
    assert response.headers["content-type"] == "application/x-ndjson"
    assert response.headers["content-disposition"] == 'attachment; filename="log.ndjson"'
    assert response.content == exported.read_bytes()
    assert response.content.count(b"\n") > 10


def test_a_download_filtered_by_type_streams_those_events(store: EventStore) -> None:
    _log(store)
    with TestClient(create_app(store, app), base_url=LOCAL) as console:
        response = console.get("/log.ndjson?type=Paid,Placed&category=order")
    assert response.status_code == 200
    documents = [orjson.loads(line) for line in response.content.splitlines()]
    assert [d["type"] for d in documents] == ["Placed"] * 30 + ["Paid"]
    assert [d["position"] for d in documents] == sorted(d["position"] for d in documents)


def test_a_download_after_a_bad_position_is_refused_before_it_starts(store: EventStore) -> None:
    _log(store)
    with TestClient(create_app(store, app), base_url=LOCAL) as console:
        response = console.get("/log.ndjson?after=-3")
    assert response.status_code == 400
    assert b"after" in response.content
