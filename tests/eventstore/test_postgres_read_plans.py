"""Reads by category and by event type use their index on PostgreSQL at any share of the log.

A page of a rare category must cost what its rows cost, not a walk of the primary key
over every row of the common ones: `category = ANY(...)` let the planner do that from
about a million events on (one 1,000-event page of a 1% category read 9,852 buffers at
10M events, against 154 through the category index). So must the high-water mark that
every read goes up to: a few pages on a new log, one walk of the rows a long
transaction elsewhere keeps past the horizon.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any
from urllib.parse import parse_qs, urlsplit

import psycopg
import pytest
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.eventstore.postgres import high_water, statements

from ..conftest import PG_URL
from ..postgres_server import postgres_server

# slow: A server of its own, filled to be planned.
pytestmark = pytest.mark.slow

STREAMS = 100
COMMON_PER_STREAM = 990
RARE_PER_STREAM = 10


@pytest.fixture(scope="module")
def big_log() -> Iterator[str]:
    """A log of 100,000 events, 1% of them in the category `rare`, spread over the log."""
    from ..conftest import _need_postgres

    _need_postgres()
    schema = f"t_read_plans_{uuid.uuid4().hex[:8]}"  # each pytest-xdist worker its own
    url = f"{PG_URL}?schema={schema}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")
    with EventStore.open(url) as store:
        for n in range(STREAMS):
            store.append(
                f"common-{n}",
                [NewEvent("Counted", {"n": i}) for i in range(COMMON_PER_STREAM)],
            )
            store.append(f"rare-{n}", [NewEvent("Seen", {"n": i}) for i in range(RARE_PER_STREAM)])
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"ANALYZE {schema}.eventcraft_events")
    yield url
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


@pytest.fixture(scope="module")
def quiet_server() -> Iterator[str]:
    """A PostgreSQL server of the module's own, for the tests of a transaction elsewhere
    holding the horizon back: on the shared server, a transaction of another test (another
    pytest-xdist worker's) may be older than theirs and hold it further back."""
    with postgres_server() as server:
        yield server.url


@pytest.fixture
def quiet_url(quiet_server: str) -> str:
    """A new store's URL on the quiet server."""
    return f"{quiet_server}?schema=t_{uuid.uuid4().hex[:12]}"


def _server_of(url: str) -> str:
    """The server's URL of a store's URL (its schema left out)."""
    return url.partition("?")[0]


def _plan(url: str, categories: list[str] | None, types: list[str] | None) -> dict[str, Any]:
    query, params = statements.read_all_query(categories, types)
    # What a log of millions makes the planner conclude (sorting a category's rows
    # costs more than walking the primary key), said here for 100,000 events.
    return _explained(url, query, {**params, "start": 0, "count": 1000}, "SET enable_sort = off")


def _explained(url: str, query: str, params: dict[str, Any], *settings: str) -> dict[str, Any]:
    """The plan of `query` run in the store at `url`, with its buffers, after `settings`."""
    schema = parse_qs(urlsplit(url).query)["schema"][0]
    with psycopg.connect(_server_of(url), autocommit=True) as conn:
        conn.execute(f"SET search_path TO {schema}")
        for setting in settings:
            conn.execute(setting.encode())
        row = conn.execute(f"EXPLAIN (ANALYZE, BUFFERS, FORMAT JSON) {query}", params).fetchone()
    assert row is not None
    plan: dict[str, Any] = row[0][0]
    return plan


def _indexes(node: dict[str, Any]) -> set[str]:
    found = {node["Index Name"]} if "Index Name" in node else set()
    for child in node.get("Plans", []):
        found |= _indexes(child)
    return found


def _buffers(plan: dict[str, Any]) -> int:
    top = plan["Plan"]
    return int(top["Shared Hit Blocks"]) + int(top["Shared Read Blocks"])


@pytest.mark.parametrize(
    ("categories", "types", "index"),
    [
        (["rare"], None, "eventcraft_events_category_key"),
        (["rare", "other"], None, "eventcraft_events_category_key"),
        (["rare"], ["Seen"], "eventcraft_events_category_key"),
        (None, ["Seen"], "eventcraft_events_type_key"),
        (None, ["Seen", "Gone"], "eventcraft_events_type_key"),
    ],
)
@pytest.mark.slow
def test_a_rare_category_or_type_is_read_through_its_index(
    big_log: str, categories: list[str] | None, types: list[str] | None, index: str
) -> None:
    plan = _plan(big_log, categories, types)
    assert index in _indexes(plan["Plan"]), plan
    # 1,000 rows of about 100 bytes: tens of pages, not the thousand of the whole log.
    assert _buffers(plan) < 200, plan


def test_the_store_reads_a_rare_category_whole_and_in_order(big_log: str) -> None:
    with EventStore.open(big_log) as store:
        rare = list(store.read_all(categories=["rare"]))
        both = list(store.read_all(categories=["rare", "common", "rare"]))
        typed = list(store.read_all(types=["Seen", "Counted"], limit=2500))
    assert len(rare) == STREAMS * RARE_PER_STREAM
    assert [e.stream_id for e in rare[:11]] == ["rare-0"] * 10 + ["rare-1"]
    assert [e.position for e in both] == list(range(1, STREAMS * 1000 + 1))
    assert [e.position for e in typed] == list(range(1, 2501))


def _walked(node: dict[str, Any]) -> int:
    """Rows the high-water mark's walks past the settled row gave, over the whole plan."""
    own = int(node["Actual Rows"] * node["Actual Loops"]) if node["Node Type"] == "WindowAgg" else 0
    return own + sum(_walked(child) for child in node.get("Plans", []))


def test_the_high_water_mark_walks_the_rows_past_a_long_transaction_once(quiet_url: str) -> None:
    """While a transaction elsewhere on the server stays open, the rows committed since
    it began are past the coarse rule's horizon, and every read walks them to find
    the mark: once, not once for each use of the mark in the statement."""
    with (
        EventStore.open(quiet_url) as store,
        psycopg.connect(_server_of(quiet_url)) as long_transaction,
    ):
        store.append("before-1", [NewEvent("Counted", {"n": 0})])
        long_transaction.execute("SELECT pg_current_xact_id()")  # holds the horizon
        for n in range(3):
            store.append(f"after-{n}", [NewEvent("Counted", {"n": i}) for i in range(100)])
        plan = _explained(quiet_url, high_water._COARSE, {"after": 0})
        assert store.high_water_mark() == 301
        long_transaction.rollback()
    assert _walked(plan["Plan"]) == 300, plan


def _events_read(node: dict[str, Any]) -> int:
    """Rows the plan's scans of the events table read (given or filtered out), over the
    whole plan."""
    own = (node["Actual Rows"] + node.get("Rows Removed by Filter", 0)) * node["Actual Loops"]
    read = int(own) if node.get("Relation Name") == "eventcraft_events" else 0
    return read + sum(_events_read(child) for child in node.get("Plans", []))


def test_a_read_behind_a_long_transaction_pays_a_bounded_walk(quiet_url: str) -> None:
    """Every row committed since a transaction elsewhere began is past the coarse rule's
    horizon: the walk down to the last settled row crossed them all, in every read (73 ms
    a read behind 200,000 of them). Now each walk stops after WALK rows, and the precise
    rule, which that transaction does not hold back, finds the mark at the top."""
    # Ten walks' worth: on a log of a few thousand rows the planner may rightly read the
    # table whole rather than walk an index, which is no walk to bound.
    past = 10 * high_water.WALK
    with (
        EventStore.open(quiet_url) as store,
        psycopg.connect(_server_of(quiet_url)) as long_transaction,
    ):
        store.append("before-1", [NewEvent("Counted", {"n": 0})])
        long_transaction.execute("SELECT pg_current_xact_id()")  # holds the horizon
        for n in range(past // 1_000):
            store.append(f"after-{n}", [NewEvent("Counted", {"n": i}) for i in range(1_000)])
        for after in (0, past // 2):
            coarse = _explained(quiet_url, high_water._COARSE, {"after": after})
            precise = _explained(quiet_url, high_water._PRECISE, {"after": after})
            assert _events_read(coarse["Plan"]) <= 2 * high_water.WALK + 2, coarse
            assert _events_read(precise["Plan"]) <= 3, precise
            assert store.high_water_mark() == past + 1
            assert len(list(store.read_all(after=after))) == past + 1 - after
        long_transaction.rollback()


def test_the_high_water_mark_of_a_new_log_costs_a_few_pages_whatever_its_size(
    quiet_url: str,
) -> None:
    """Until its first ANALYZE, the planner read a log of a few thousand events whole, three
    times over, to walk the rows past the settled one (none, on a quiet log): 239 pages
    for a read of a log of 5,000, 701 for 15,000. On the module's own server: on the
    shared one, another worker's open transaction leaves rows past the horizon to walk."""
    with EventStore.open(quiet_url) as store:
        for n in range(50):
            store.append(f"s-{n}", [NewEvent("Counted", {"n": i}) for i in range(100)])
    for after in (0, 4990):
        plan = _explained(quiet_url, high_water._COARSE, {"after": after})
        assert _buffers(plan) < 20, plan
    whole = _explained(quiet_url, "SELECT count(*) FROM eventcraft_events", {})
    assert _buffers(whole) > 50  # read whole, as before, the log would fail the test
