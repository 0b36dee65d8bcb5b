"""A projection that reads by a query of types and tags: the console's page of it, and the
operations behind it, show the events it reads, not every event of its types."""

from __future__ import annotations

import re

import orjson
import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent, Query, QueryItem, RecordedEvent
from eventcraft.projections import Projection, ReadModel
from starlette.testclient import TestClient

from eventcraft import App
from eventcraft.console import create_app
from eventcraft.operations import newest, projections

from .conftest import LOCAL

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

    html = TestClient(create_app(store, app), base_url=LOCAL).get("/projections/c1-roster").text
    assert "course:c1" in html  # the query is shown beside categories and types
    message_log = html[html.index('id="message-log"') :]
    assert [int(p) for p in re.findall(r'<tr data-position="(\d+)"', message_log)] == mine[::-1]


def test_the_log_link_of_a_query_projection_lists_only_its_events(store: EventStore) -> None:
    mine = _fill(store)
    client = TestClient(create_app(store, App(projections=[_projection()])), base_url=LOCAL)
    html = client.get("/projections/c1-roster").text
    (link,) = re.findall(r'href="([^"]*)">All in the Log<', html)
    assert link.endswith("/log?projection=c1-roster")
    log_html = client.get("/log?projection=c1-roster").text
    listed = [int(p) for p in re.findall(r'<tr data-position="(\d+)"', log_html)]
    assert listed == mine[::-1]  # not the other course's subscriptions, of the same type
    assert 'name="projection" value="c1-roster"' in log_html  # kept by the filter form
    narrowed = client.get("/log?projection=c1-roster&tag=student:s2").text
    assert [int(p) for p in re.findall(r'<tr data-position="(\d+)"', narrowed)] == [mine[1]]
    ndjson = client.get("/log.ndjson?projection=c1-roster").text
    assert [orjson.loads(line)["position"] for line in ndjson.splitlines()] == mine
    missing = client.get("/log?projection=nobody")
    assert (
        missing.status_code == 404 and "no projection" in missing.text and "nobody" in missing.text
    )
