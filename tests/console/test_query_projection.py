"""A projection that reads by a query of types and tags: the console's page of it, and the
operations behind it, show the events it reads, not every event of its types."""

from __future__ import annotations

import re

import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent, Query, QueryItem, RecordedEvent
from eventcraft.projections import Projection, ReadModel
from starlette.testclient import TestClient

from eventcraft import App
from eventcraft.console import create_app
from eventcraft.operations import newest, projections

metadata = sa.MetaData()
roster = sa.Table("console_c1_roster", metadata, sa.Column("position", sa.BigInteger))
C1 = Query([QueryItem(types=["Subscribed"], tags=["course:c1"])])


def _projection() -> Projection:
    projection = Projection("c1-roster", tables=[roster], query=C1)

    @projection.on("Subscribed")
    def note(read_model: ReadModel, event: RecordedEvent) -> None:
        read_model.execute(sa.insert(read_model[roster]).values(position=event.position))

    return projection


def _fill(store: EventStore) -> list[int]:
    """Subscriptions to c1 and c2 in turn; the positions of c1's."""
    mine = []
    for n in range(6):
        course = f"course:c{n % 2 + 1}"
        event = NewEvent("Subscribed", {"n": n}, tags=[course, f"student:s{n}"])
        result = store.append(f"subscription-{n}", [event])
        if course == "course:c1":
            mine.append(result.positions[0])
    return mine


def test_a_query_projection_waits_on_and_logs_only_its_own_events(store: EventStore) -> None:
    mine = _fill(store)
    app = App(projections=[_projection()])
    waiting = projections.waiting(store, app, "c1-roster", limit=10)
    assert [event.position for event in waiting] == mine
    reads = projections.reads(app, "c1-roster")
    page = newest.log_page(store, limit=10, where=reads)
    assert [event.position for event in page.events] == mine[::-1]

    projections.catch_up(store, app)
    assert projections.waiting(store, app, "c1-roster", limit=10) == []

    html = TestClient(create_app(store, app)).get("/projections/c1-roster").text
    assert "course:c1" in html  # the query is shown beside categories and types
    message_log = html[html.index('id="message-log"') :]
    assert [int(p) for p in re.findall(r'<tr data-position="(\d+)"', message_log)] == mine[::-1]
