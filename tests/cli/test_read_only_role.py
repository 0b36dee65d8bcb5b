"""The command line's read commands on PostgreSQL with a role that may only read (USAGE on
the schema, SELECT on its tables: the manual's 'Roles and privileges'); a write refused to it is
one line naming the privilege it lacks."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import pytest
from eventcraft.eventstore import EventStore

from ..conftest import _need_postgres
from ..console.conftest import fill_console
from ..roles import schema_of, store_roles
from .conftest import Run

APP = "tests.cli.apps:shop"


@pytest.fixture(scope="module")
def reader_url() -> Iterator[str]:
    """A read-only role's URL of the shop (its history, sagas and projections), which the
    migration role made and ran; one for the module, as the commands change nothing."""
    _need_postgres()
    with store_roles(f"reader_{uuid.uuid4().hex[:10]}") as roles:
        with EventStore.open(roles.url(roles.migrator)) as store:
            fill_console(store)
        yield roles.url(roles.reader)


@pytest.mark.parametrize(
    ("command", "shows"),
    [
        (["log"], "ParcelSent"),
        (["show", "order-1"], "OrderPaid"),
        (["event", "1"], '"stream_id": "order-1"'),
        (["export", "--out", "-"], '"type":"OrderPlaced"'),
        (["stats"], "high-water mark"),
        (["streams"], "shipment-1"),
        (["trace", "checkout-1"], "ParcelSent"),
        (["verify"], "ok:"),
        (["--app", APP, "projections", "status", "--json"], "order-notes"),
        (["--app", APP, "projections", "parked", "--json"], "negative amount"),
        (["--app", APP, "sagas", "list"], "parked"),
        (["messaging", "failed"], ""),
    ],
)
def test_a_read_command_works_with_a_role_that_may_only_read(
    run: Run, reader_url: str, command: list[str], shows: str
) -> None:
    """Every one was refused at the open, as an outage: 'the store cannot be reached: ...
    permission denied for database test'."""
    outcome = run("--store", reader_url, *command)
    assert outcome.code == 0, outcome.err
    assert shows in outcome.out


def test_a_write_refused_to_a_read_only_role_is_one_line_naming_the_privilege(
    run: Run, reader_url: str
) -> None:
    outcome = run("--store", reader_url, "delete-stream", "order-2", "--yes")
    assert outcome.code == 1
    assert outcome.err.count("\n") == 1 and "Traceback" not in outcome.err
    assert outcome.err.startswith("error: permission denied: the role 'reader_")
    assert "lacks INSERT, UPDATE on table reader_" in outcome.err
    assert "eventcraft_deleted_streams" in outcome.err
    assert "cannot be reached" not in outcome.err


def test_a_role_without_usage_on_the_schema_is_told_so_not_that_no_store_is_there(
    run: Run, pg_url: str
) -> None:
    """It read 'no event store in schema ...: check the URL (only import creates a store)'."""
    with store_roles(schema_of(pg_url), granted=False) as roles:
        EventStore.open(pg_url).close()
        outcome = run("--store", roles.url(roles.reader), "log")
    assert outcome.code == 1
    assert outcome.err == (
        f"error: permission denied: the role '{roles.reader}' lacks USAGE on schema "
        f"{roles.schema} (the store's tables are in it; grant it as to a read-only role: "
        "docs/reference/manual/event-store.md, 'Roles and privileges')\n"
    )
