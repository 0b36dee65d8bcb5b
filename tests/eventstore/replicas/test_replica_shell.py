"""An operator sees how far a store's read replica is behind: `eventcraft stats` and the
console's overview, while the standby's replay is paused and after (issue 57)."""

from __future__ import annotations

import json

import pytest
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.eventstore.postgres import replicas
from starlette.testclient import TestClient

from eventcraft.cli import main
from eventcraft.console import create_app

from ...replica_server import caught_up, pause_replay, resume_replay
from .conftest import Pair

# slow: A primary and a hot standby of their own, started for the module.
pytestmark = pytest.mark.slow


@pytest.mark.slow
def test_stats_and_the_overview_show_the_replicas_lag(
    pair: Pair, capsys: pytest.CaptureFixture[str]
) -> None:
    def stats(store_url: str, *options: str) -> str:
        assert main(["--store", store_url, "stats", *options]) == 0
        return capsys.readouterr().out

    url = replicas.with_replicas(pair.primary_url, [pair.standby_url])
    with EventStore.open(pair.primary_url) as writer:
        writer.append("order-1", [NewEvent("Placed", {})])
        caught_up(pair.primary, pair.standby)
        pause_replay(pair.standby)
        try:
            writer.append("order-2", [NewEvent("Placed", {}), NewEvent("Paid", {})])
            replica = json.loads(stats(url, "--json"))["replica"]
            assert (replica["high_water_mark"], replica["events"], replica["paused"]) == (
                1,
                2,
                True,
            )
            table = stats(url)
            assert "replay paused" in table and "events behind" in table
            with EventStore.open(url) as store:
                page = TestClient(create_app(store), base_url="http://localhost").get("/")
            assert page.status_code == 200 and 'id="replica"' in page.text
            assert "replay paused" in page.text
        finally:
            resume_replay(pair.standby)
    caught_up(pair.primary, pair.standby)
    assert json.loads(stats(pair.primary_url, "--json"))["replica"] is None
