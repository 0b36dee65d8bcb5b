"""`eventcraft messaging relays` and the console's Messaging page show a relay's lag as its
status counts it: the events after its checkpoint its selection takes, from the selection
the relay records beside its state, where they showed every position behind the head."""

from __future__ import annotations

import re
from typing import Any

import orjson
import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore, Query, QueryItem
from eventcraft.messaging import RabbitMQPublisher, Relay, relay_state
from eventcraft.projections import CheckpointTable, Database
from starlette.testclient import TestClient

from eventcraft.console import create_app
from eventcraft.operations import messaging as operations

from ..cli.apps import shop
from ..console.lag_app import NOISE, noise, wanted_events
from .test_commands import run

NOWHERE = "amqp://guest:guest@127.0.0.1:9/"
"""No broker: the relays here never have anything to publish."""

SELECTIONS: dict[str, dict[str, Any]] = {
    "indexes": {"categories": "order", "types": "Wanted"},
    "query": {"query": Query([QueryItem(types=["Wanted"], tags=["keep"])])},
}
"""The relay's selection: by the category and type indexes, or by a query of tags."""


def _said(store: EventStore, **selection: Any) -> None:
    """A relay that ran once on the empty log and stopped: its checkpoint at 0, its state
    row written, as a relay whose process stopped before the log grew."""
    with Relay("orders-out", store, RabbitMQPublisher(NOWHERE), **selection) as relay:
        relay.start()
        relay.stop()


def _shown(url: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str, bool]:
    """The relay's checkpoint, lag and capped flag as `messaging relays --json` shows them."""
    code, out, err = run(capsys, "--store", url, "messaging", "relays", "--json")
    assert (code, err) == (0, "")
    [relay] = orjson.loads(out)
    return relay["position"], str(relay["lag_events"]), relay["lag_capped"]


def _on_page(store: EventStore) -> str:
    """The lag cell of the relay's row on the Messaging page."""
    with TestClient(create_app(store, shop), base_url="http://localhost") as client:
        page = client.get("/messaging")
    assert page.status_code == 200
    row = re.search(r'<tr data-name="orders-out">(.*?)</tr>', page.text)
    assert row, page.text
    cells: list[str] = re.findall(r"<td[^>]*>(.*?)</td>", row[1])
    return cells[5]


@pytest.mark.parametrize("selection", SELECTIONS)
def test_the_shells_show_a_relays_lag_as_the_events_its_selection_takes(
    selection: str, shared_store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with EventStore.open(shared_store_url) as store:
        _said(store, **SELECTIONS[selection])
        noise(store)
        assert _shown(shared_store_url, capsys) == (0, "0", False)
        assert _on_page(store) == "0"
        wanted_events(store, 3, kept=3)
        assert store.high_water_mark() == NOISE + 3
        assert _shown(shared_store_url, capsys) == (0, "3", False)
        assert _on_page(store) == "3"


def test_a_relay_table_of_an_earlier_release_is_read_then_brought_up_to_date(
    shared_store_url: str,
) -> None:
    with EventStore.open(shared_store_url) as store:
        database = Database.of(None, store)
        try:
            # The table as a release before the selection column made it, with its row.
            with database.transaction() as connection:
                earlier = sa.MetaData()
                sa.Table(
                    relay_state.STATES,
                    earlier,
                    *(
                        sa.Column(c.name, c.type, nullable=c.nullable, primary_key=c.primary_key)
                        for c in relay_state.table.columns
                        if c.name != "selection"
                    ),
                )
                earlier.create_all(connection)
                CheckpointTable(connection).create()
                connection.execute(
                    sa.text(
                        f"INSERT INTO {relay_state.STATES} VALUES "
                        "('orders-out', 'rabbitmq 127.0.0.1:9', 'stopped', NULL, NULL, 0, 0)"
                    )
                )
            noise(store)
            # Read as it is: its relay's selection unknown, the positions behind the head.
            [before] = operations.relays(store)
            assert (before.state, before.lag_events) == ("stopped", NOISE)
            _said(store, categories="order", types="Wanted")
            noise(store)  # wherever the relay stopped, none of these is its
            [after] = operations.relays(store)
            assert (after.state, after.lag_events) == ("stopped", 0)
            wanted_events(store, 2, kept=0)
            assert operations.relays(store)[0].lag_events == 2
        finally:
            database.close()
