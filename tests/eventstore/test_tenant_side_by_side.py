"""Tenants side by side in the tables of one PostgreSQL schema (`tenancy=shared`): each
tenant's log is 1, 2, 3, ... with no gap, whatever the others and its own refused appends
do; the store's SQL reads a tenant's rows through a filter by tenant, and row-level
security walls off SQL that forgets it, under the application's role and the role that
owns the tables; a tenant's drop removes every row of it; writer processes of two tenants
at once never show a reader a gap, a skip or the other's event.

The store's conformance suite runs through a side-by-side tenant's store in
`test_tenant_conformance.py`, and the hypothesis model of many tenants in
`test_tenant_isolation.py`."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from typing import Annotated, Any

import psycopg
import pytest
from eventcraft.eventstore import (
    NO_STREAM,
    EventStore,
    InvalidTenant,
    NewEvent,
    Personal,
    StoreUnavailable,
    Tenants,
    UnsupportedStoreURL,
    WrongExpectedVersion,
)
from eventcraft.eventstore.postgres import statements
from eventcraft.eventstore.postgres.side_by_side import side_by_side
from psycopg import sql
from pydantic import BaseModel

from eventcraft.cli import main

from ..conftest import PG_URL, _need_postgres
from ..processes import PROCESSES
from ..roles import store_roles
from . import tenant_workers

TABLES = [
    "eventcraft_events",
    "eventcraft_tags",
    "eventcraft_streams",
    "eventcraft_snapshots",
    "eventcraft_deleted_streams",
    "eventcraft_tenants",
]


def _drop(schema: str) -> None:
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}", "{schema}__rows" CASCADE')


@pytest.fixture
def schema() -> Iterator[str]:
    """A new schema name for tenants side by side; it and its tables' schema are dropped
    afterwards."""
    _need_postgres()
    name = f"s_{uuid.uuid4().hex[:10]}"
    yield name
    _drop(name)


@pytest.fixture
def shared(schema: str) -> str:
    """The URL of every tenant side by side in `schema`."""
    return f"{PG_URL}?schema={schema}&tenancy=shared"


def placed(tenant: str, n: int = 0) -> NewEvent:
    return NewEvent("Placed", {"tenant": tenant, "n": n}, tags=[f"order:{n}"])


def test_each_tenants_positions_are_its_own_and_never_skip_a_number(shared: str) -> None:
    with Tenants(shared) as tenants:
        acme, globex = tenants.for_tenant("acme"), tenants.for_tenant("globex")
        assert globex.append("order-1", [placed("globex"), placed("globex")]).positions == (1, 2)
        assert acme.append("taken", [placed("acme")]).positions == (1,)
        with pytest.raises(WrongExpectedVersion):
            acme.append("taken", [placed("acme")], NO_STREAM)  # refused: takes nothing

        def append(n: int) -> int:
            """Half of them refused, in groups with the others (group commit)."""
            try:
                if n % 2:
                    acme.append("taken", [placed("acme", n)], NO_STREAM)
                else:
                    acme.append(f"order-{n}", [placed("acme", n) for _ in range(1 + n % 3)])
            except WrongExpectedVersion:
                return 0
            return 1 + n % 3

        with ThreadPoolExecutor(8) as pool:
            appended = 1 + sum(pool.map(append, range(60)))
        assert globex.append("order-1", [placed("globex")], 2).positions == (3,)
        assert [e.position for e in acme.read_all()] == list(range(1, appended + 1))
        assert [e.data["tenant"] for e in globex.read_all()] == ["globex"] * 3
        assert acme.high_water_mark() == appended and globex.log_status().head == 3


def test_two_tenants_may_have_the_same_stream_and_the_same_event_id(shared: str) -> None:
    same = uuid.uuid4()
    with Tenants(shared) as tenants:
        for tenant in ["acme", "globex"]:
            store = tenants.for_tenant(tenant)
            result = store.append("order-1", [NewEvent("Placed", {"tenant": tenant}, id=same)])
            assert (result.version, result.positions) == (1, (1,))
            again = store.append("order-1", [NewEvent("Placed", {"tenant": tenant}, id=same)])
            assert again == result  # a retry, recognised in its own tenant
            event = store.read_event(same)
            assert event is not None and event.data["tenant"] == tenant


def test_the_stores_reads_walk_an_index_that_begins_with_the_tenant(shared: str) -> None:
    """The first wall: every statement of a tenant's store reads its tenant's view, whose
    filter by tenant goes into the index scan."""
    with EventStore.open(f"{shared}&tenant=acme") as store:
        store.append("order-1", [placed("acme")])
        target = side_by_side(f"{shared}&tenant=acme")
        assert target is not None
    query, params = statements.read_all_query(None, None)
    by_type, type_params = statements.read_all_query(None, ["Placed"])
    with psycopg.connect(
        target.target.conninfo, **target.target.connect_arguments(), autocommit=True
    ) as conn:
        for statement, values in [(query, params), (by_type, type_params)]:
            plan = conn.execute(
                f"EXPLAIN {statement}", {**values, "start": 0, "count": 10}
            ).fetchall()
            text = "\n".join(row[0] for row in plan)
            assert "Index Cond: ((tenant = current_setting('eventcraft.tenant'::text))" in text


def _rows_by_tenant(conn: psycopg.Connection[Any], rows: str) -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for table in TABLES:
        query = sql.SQL("SELECT DISTINCT tenant FROM {}.{}").format(
            sql.Identifier(rows), sql.Identifier(table)
        )
        found[table] = {row[0] for row in conn.execute(query).fetchall()}
    return found


def test_row_level_security_walls_off_sql_without_the_tenant_filter(schema: str) -> None:
    """The second wall: SQL that reads the tables themselves, with no filter by tenant,
    under the application's role (no superuser) and the role that owns the tables, sees
    the rows of the tenant its session is set to, none without it, and cannot write a row
    of another tenant."""
    rows = f"{schema}__rows"
    with store_roles(schema, granted=False) as roles:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            for name in (schema, rows):
                conn.execute(
                    sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
                        sql.Identifier(name), sql.Identifier(roles.migrator)
                    )
                )
        owner = roles.url(roles.migrator) + "&tenancy=shared"
        with EventStore.open(owner + "&tenant=globex") as globex:  # makes the tables
            globex.append("order-1", [placed("globex")])
            globex.save_snapshot("order-1", version=1, type="Order", data={})
            globex.delete_stream("order-1")
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            # The application's role writes through the views; to show that row-level
            # security, not a privilege, stops it, it may read and write the tables too.
            for name in (schema, rows):
                conn.execute(
                    sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
                        sql.Identifier(name), sql.Identifier(roles.writer)
                    )
                )
                conn.execute(
                    sql.SQL("GRANT SELECT, INSERT, UPDATE ON ALL TABLES IN SCHEMA {} TO {}").format(
                        sql.Identifier(name), sql.Identifier(roles.writer)
                    )
                )
        app = roles.url(roles.writer) + "&tenancy=shared"
        with EventStore.open(app + "&tenant=acme") as acme:
            acme.append("order-1", [placed("acme")])
            acme.save_snapshot("order-1", version=1, type="Order", data={})
            acme.delete_stream("order-1")
            assert [e.data["tenant"] for e in acme.read_all()] == ["acme"]
        with psycopg.connect(PG_URL) as conn:  # a superuser sees them all: no wall for it
            assert all(
                tenants == {"acme", "globex"} for tenants in _rows_by_tenant(conn, rows).values()
            )
        for role in (roles.writer, roles.migrator):
            url = roles.url(role).partition("?")[0]
            with psycopg.connect(url, autocommit=True) as conn:
                assert _rows_by_tenant(conn, rows)["eventcraft_events"] == set()  # no setting
                conn.execute("SET eventcraft.tenant = 'acme'")
                seen = _rows_by_tenant(conn, rows)
                # The tenants' list is not forced on its owner, who lists them all.
                listed = {"acme", "globex"} if role == roles.migrator else {"acme"}
                assert seen == {
                    **{table: {"acme"} for table in TABLES},
                    "eventcraft_tenants": listed,
                }
                count = conn.execute(f'SELECT count(*) FROM "{rows}".eventcraft_events').fetchone()
                assert count == (1,)
                with pytest.raises(
                    psycopg.errors.InsufficientPrivilege, match="row-level security"
                ):
                    conn.execute(
                        f'INSERT INTO "{rows}".eventcraft_streams (tenant, stream_id, category) '
                        "VALUES ('globex', 'order-9', 'order')"
                    )
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            for name in (schema, rows):
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


class Registered(BaseModel):
    customer: str
    name: Annotated[str, Personal(subject="customer")]


def test_dropping_a_tenant_removes_every_row_of_it_and_no_other(shared: str, schema: str) -> None:
    rows = f"{schema}__rows"
    with Tenants(shared) as tenants:
        for tenant in ["acme", "globex"]:
            store = tenants.for_tenant(tenant)
            store.append("order-1", [placed(tenant, 1), placed(tenant, 2)])
            store.append(
                "customer-c1", [NewEvent("Registered", Registered(customer="c1", name="Ada"))]
            )
            store.save_snapshot("order-1", version=2, type="Order", data={})
            store.delete_stream("order-1")
        assert sorted(tenants.known()) == ["acme", "globex"]
        dropped = tenants.for_tenant("acme").drop_tenant()
        assert (dropped.place.kind, dropped.place.name, dropped.existed) == ("shared", schema, True)
        with psycopg.connect(PG_URL) as conn:
            left = _rows_by_tenant(conn, rows)
            keys = conn.execute(f'SELECT subject FROM "{rows}".eventcraft_keys').fetchall()
        assert left == {table: {"globex"} for table in TABLES}
        assert keys == [("globex/c1",)]
        assert tenants.known() == ["globex"]
        globex = tenants.for_tenant("globex")
        assert [e.position for e in globex.read_all()] == [1, 2, 3]
        assert next(globex.read_stream("customer-c1")).data["name"] == "Ada"
        again = tenants.for_tenant("acme")  # a new, empty tenant
        assert list(again.read_all()) == []
        assert again.append("order-1", [placed("acme")]).positions == (1,)


def test_a_side_by_side_url_names_one_tenant_or_is_refused(shared: str) -> None:
    with EventStore.open(f"{shared}&tenant=acme") as acme:
        acme.append("order-1", [placed("acme")])
        assert acme.tenant == "acme"
    with pytest.raises(UnsupportedStoreURL, match="say which tenant with"):
        EventStore.open(shared)
    refused = [
        (shared.replace("tenancy=shared", "tenancy=pooled"), "tenancy must be 'shared'"),
        (shared.replace("schema=", "nothing=") + "&tenant=acme", "needs schema=NAME"),
        (f"{shared}&pooler=transaction&tenant=acme", "does not take pooler"),
        (f"{shared}&partition_events=1000&tenant=acme", "does not take partition_events"),
        (f"{PG_URL}?schema=shop_{{tenant}}&tenancy=shared&tenant=acme", "takes no {tenant}"),
    ]
    for url, said in refused:
        with pytest.raises(UnsupportedStoreURL, match=said.replace("{", r"\{")):
            EventStore.open(url)
    for hostile in ["ACME", "acme'; DROP SCHEMA public; --", "a/b", ""]:
        with pytest.raises(InvalidTenant):
            EventStore.open(f"{shared}&tenant={hostile}")


def test_tenants_side_by_side_are_not_placed_where_a_store_of_no_tenants_is(
    pg_url: str,
) -> None:
    with EventStore.open(pg_url) as plain:
        plain.append("order-1", [placed("nobody")])
    with pytest.raises(Exception, match="holds an event store already"):
        EventStore.open(f"{pg_url}&tenancy=shared&tenant=acme")
    with EventStore.open(pg_url) as plain:
        assert [e.data["tenant"] for e in plain.read_all()] == ["nobody"]


WRITERS = 2
"""Writer processes per tenant."""
APPENDS = 120
"""Appends of each writer (two threads, group commit)."""


def test_writer_processes_of_two_tenants_never_show_a_reader_a_gap(shared: str) -> None:
    tenants = ["acme", "globex"]
    with Tenants(shared) as made:  # the tables and both tenants' rows made before the race
        for tenant in tenants:
            made.for_tenant(tenant).high_water_mark()
    jobs = WRITERS * len(tenants)
    with (
        PROCESSES.Manager() as manager,
        ProcessPoolExecutor(jobs + len(tenants), mp_context=PROCESSES) as pool,
    ):
        barrier = manager.Barrier(jobs + len(tenants))
        expected = {
            tenant: sum(
                # What each writer appends: 1 to 3 events an append, but every fifth refused.
                1 + sum(1 + n % 3 for n in range(APPENDS) if n % 5 != 4)
                for _ in range(WRITERS)
            )
            for tenant in tenants
        }
        writers = [
            pool.submit(tenant_workers.append_side_by_side, shared, tenant, w, APPENDS, barrier)
            for tenant in tenants
            for w in range(WRITERS)
        ]
        readers = {
            tenant: pool.submit(
                tenant_workers.follow_side_by_side, shared, tenant, expected[tenant], barrier
            )
            for tenant in tenants
        }
        written = [future.result(timeout=300) for future in writers]
        wrong = {tenant: future.result(timeout=300) for tenant, future in readers.items()}
    assert sum(written) == sum(expected.values())
    assert wrong == {tenant: [] for tenant in tenants}
    with Tenants(shared) as after:
        for tenant in tenants:
            log = list(after.for_tenant(tenant).read_all())
            assert [e.position for e in log] == list(range(1, expected[tenant] + 1))
            assert {e.data["tenant"] for e in log} == {tenant}


def test_the_command_line_lists_and_drops_tenants_side_by_side(
    shared: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with Tenants(shared) as tenants:
        for tenant in ["acme", "globex"]:
            tenants.for_tenant(tenant).append("order-1", [placed(tenant)])
    capsys.readouterr()
    assert main(["--store", shared, "tenant", "list"]) == 0
    listed = capsys.readouterr().out.splitlines()[1:]
    assert [line.split("\t")[:2] for line in listed] == [["acme", "shared"], ["globex", "shared"]]
    assert main(["--store", shared, "--tenant", "globex", "log"]) == 0
    assert "order-1" in capsys.readouterr().out
    assert main(["--store", shared, "--tenant", "ghost", "log"]) == 2  # a read makes none
    assert "there is no tenant 'ghost'" in capsys.readouterr().err
    assert main(["--store", shared, "tenant", "drop", "globex"]) == 2  # without --yes
    assert main(["--store", shared, "tenant", "drop", "globex", "--yes"]) == 0
    with Tenants(shared) as tenants:
        assert tenants.known() == ["acme"]
        assert [e.data["tenant"] for e in tenants.for_tenant("acme").read_all()] == ["acme"]


def test_under_row_level_security_every_read_can_walk_an_index(schema: str) -> None:
    """Planned under the policies (the tables' owner no superuser, security forced), each
    read of the store walks an index that begins with the tenant: PostgreSQL walks one
    only by leakproof operators there, and the hash a store of its own keys its type and
    category indexes by is not one (a read by type scanned every tenant's rows)."""
    rows = f"{schema}__rows"
    with store_roles(schema, granted=False) as roles:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            for name in (schema, rows):
                conn.execute(
                    sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(
                        sql.Identifier(name), sql.Identifier(roles.migrator)
                    )
                )
        url = roles.url(roles.migrator) + "&tenancy=shared"
        event_id = uuid.uuid4()
        for tenant in ["acme", "globex"]:
            with EventStore.open(f"{url}&tenant={tenant}") as store:
                for n in range(20):
                    store.append(f"order-{n}", [placed(tenant, i) for i in range(50)])
                store.append("rare-1", [NewEvent("Rare", {"tenant": tenant}, id=event_id)])
        # Each read, and what its index walk is bounded by besides the tenant.
        reads = [
            (*statements.read_all_query(None, None), '"position" >'),
            (*statements.read_all_query(["rare"], None), "category = 'rare'"),
            (*statements.read_all_query(None, ["Rare"]), "type = 'Rare'"),
            (statements.READ_STREAM_FORWARDS, {"stream": "order-3"}, "stream_id = 'order-3'"),
            (statements.EVENT_BY_ID, {}, "id = "),
            (statements.STREAM_VERSION, {}, "stream_id = "),
        ]
        params: dict[str, Any] = {"start": 0, "count": 10, "last": 10**6}
        with psycopg.connect(roles.url(roles.migrator).partition("?")[0], autocommit=True) as conn:
            conn.execute(f'ANALYZE "{rows}".eventcraft_events')
            conn.execute(f"SET search_path = {schema}")
            conn.execute("SET eventcraft.tenant = 'acme'")
            conn.execute("SET enable_seqscan = off")  # a scan now: no index could serve
            for query, given, bound in reads:
                if query == statements.EVENT_BY_ID:
                    explained = conn.execute(f"EXPLAIN {query}", (event_id,))
                elif query == statements.STREAM_VERSION:
                    explained = conn.execute(f"EXPLAIN {query}", ("order-3",))
                else:
                    explained = conn.execute(f"EXPLAIN {query}", {**params, **given})
                plan = "\n".join(row[0] for row in explained.fetchall())
                assert "Seq Scan" not in plan, (query, plan)
                walks = [line for line in plan.splitlines() if "Index Cond: ((tenant = " in line]
                assert walks and all(bound in line for line in walks), (query, plan)
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            for name in (schema, rows):
                conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(name)))


def test_an_open_replaces_the_functions_another_release_made(shared: str, schema: str) -> None:
    with EventStore.open(f"{shared}&tenant=acme") as acme:
        acme.append("order-1", [placed("acme")])
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        # As a release with other functions left them: one whose streams are all at 1000.
        conn.execute(
            f'CREATE OR REPLACE FUNCTION "{schema}".eventcraft_stream_version(p_stream text) '
            "RETURNS bigint LANGUAGE sql AS $$ SELECT 1000::bigint $$"
        )
        conn.execute(
            f'COMMENT ON SCHEMA "{schema}" IS \'eventcraft tenants side by side, layout 1; '
            "functions 0123456789abcdef'"
        )
    with EventStore.open(f"{shared}&tenant=acme") as acme:
        appended = acme.append("order-1", [placed("acme")])
        assert (appended.version, appended.positions) == (2, (2,))
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"COMMENT ON SCHEMA \"{schema}\" IS 'some other layout'")
    with pytest.raises(StoreUnavailable, match="its comment says 'some other layout'"):
        EventStore.open(f"{shared}&tenant=acme")


def test_a_refused_member_of_a_group_leaves_no_gap_for_the_members_after_it(
    shared: str,
) -> None:
    """One group, as group commit sends it: the members after a refused one take the
    positions it would have had (its rows and its note of the last position rolled back
    with its subtransaction)."""
    with EventStore.open(f"{shared}&tenant=acme") as acme:
        acme.append("taken", [placed("acme")])
    target = side_by_side(f"{shared}&tenant=acme")
    assert target is not None

    def member(stream: str, expected: int, count: int) -> list[list[object]]:
        events = [
            {"id": str(uuid.uuid4()), "type": "Placed", "data": {"tenant": "acme"}, "metadata": {}}
            for _ in range(count)
        ]
        return [[stream, "order", expected, events]]

    members = [
        member("order-1", 0, 1),
        member("taken", 0, 2),  # refused: the stream is there
        member("order-2", 0, 3),
        [*member("order-3", 0, 1), *member("taken", 0, 1)],  # refused whole
        member("order-4", -1, 2),
    ]
    with psycopg.connect(
        target.target.conninfo, **target.target.connect_arguments(), autocommit=True
    ) as conn:
        row = conn.execute(
            "SELECT eventcraft_append_group(%s, NULL)", (json.dumps(members),)
        ).fetchone()
    assert row is not None
    answers = str(row[0]).split("\n")
    assert [answer.startswith("!") for answer in answers] == [False, True, False, True, False]
    with EventStore.open(f"{shared}&tenant=acme") as acme:
        assert [e.position for e in acme.read_all()] == list(range(1, 8))
        assert [e.stream_id for e in acme.read_all()] == (
            ["taken", "order-1"] + ["order-2"] * 3 + ["order-4"] * 2
        )
