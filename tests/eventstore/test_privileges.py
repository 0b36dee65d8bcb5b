"""A PostgreSQL store served to roles of least privilege: a read-only role opens and reads it,
an application role writes without creating anything, and a privilege a call lacks is
`StorePermissionDenied` naming it, never an outage (`StoreUnavailable`)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from typing import Annotated

import psycopg
import pytest
from eventcraft.eventstore import (
    FORGOTTEN,
    NO_STREAM,
    AppendCondition,
    AsyncEventStore,
    EventStore,
    NewEvent,
    Personal,
    Query,
    QueryItem,
    StorePermissionDenied,
    StoreUnavailable,
)
from eventcraft.eventstore.postgres.key_table import PostgresKeyTable
from psycopg import sql
from pydantic import BaseModel

from ..conftest import PG_URL
from ..roles import StoreRoles, schema_of, store_roles


def placed(n: int) -> NewEvent:
    return NewEvent("OrderPlaced", {"n": n}, tags=[f"order:{n}"])


@pytest.fixture
def roles(pg_url: str) -> Iterator[StoreRoles]:
    """The README's three roles for a store the migration role made, holding two events of
    `order-1` and a snapshot."""
    with store_roles(schema_of(pg_url)) as made:
        with EventStore.open(made.url(made.migrator)) as store:
            store.append("order-1", [placed(1), placed(2)], NO_STREAM)
            store.save_snapshot("order-1", version=2, type="Order", data={"n": 2})
        yield made


def test_a_role_with_only_usage_and_select_opens_the_store_and_reads_it(
    roles: StoreRoles,
) -> None:
    """It was refused at the open, as an outage: 'cannot open the event store ...
    permission denied for database test' (every open ran CREATE SCHEMA IF NOT EXISTS)."""
    with EventStore.open(roles.url(roles.reader)) as store:
        assert [e.data["n"] for e in store.read_stream("order-1")] == [1, 2]
        assert [e.position for e in store.read_all()] == [1, 2]
        assert store.read_event(next(store.read_all()).id) is not None
        assert store.stream_version("order-1") == 2
        assert [s.stream_id for s in store.list_streams()] == ["order-1"]
        assert store.high_water_mark() == 2 and store.log_status().head == 2
        found = store.read_query(Query([QueryItem(tags=["order:2"])]))
        assert [e.data["n"] for e in found.events] == [2]
        snapshot = store.load_snapshot("order-1")
        assert snapshot is not None and snapshot.version == 2
        assert store.stream_deletion("order-1") is None


def test_a_read_only_roles_async_store_opens_and_reads(roles: StoreRoles) -> None:
    async def read() -> list[int]:
        async with await AsyncEventStore.open(roles.url(roles.reader)) as store:
            return [e.position async for e in store.read_all()]

    assert asyncio.run(read()) == [1, 2]


def test_a_read_only_roles_append_is_refused_naming_the_privilege(roles: StoreRoles) -> None:
    with EventStore.open(roles.url(roles.reader)) as store:
        with pytest.raises(StorePermissionDenied) as refused:
            store.append("order-2", [placed(3)])
        with pytest.raises(StorePermissionDenied, match="lacks INSERT, UPDATE on table"):
            store.save_snapshot("order-1", version=2, type="Order", data={"n": 3})
        assert store.high_water_mark() == 2
    message = str(refused.value)
    assert f"the role '{roles.reader}' lacks INSERT on table {roles.schema}." in message
    assert "an append" in message
    assert not isinstance(refused.value, StoreUnavailable)
    assert isinstance(refused.value, PermissionError)
    assert refused.value.role == roles.reader


def test_a_read_only_roles_async_append_is_refused_naming_the_privilege(
    roles: StoreRoles,
) -> None:
    async def append() -> None:
        async with await AsyncEventStore.open(roles.url(roles.reader)) as store:
            await store.append("order-2", [placed(3)])

    with pytest.raises(StorePermissionDenied, match=r"lacks INSERT on table \w+\.eventcraft_"):
        asyncio.run(append())


def test_the_application_role_writes_without_creating_anything(roles: StoreRoles) -> None:
    """What an application does with its store, under the manual's grants and no more."""
    with EventStore.open(roles.url(roles.writer)) as store:
        store.append("order-1", [placed(3)], 2)
        store.append_many(
            [("order-2", [placed(4)], NO_STREAM), ("order-3", [placed(5)], NO_STREAM)]
        )
        condition = AppendCondition(Query([QueryItem(tags=["order:6"])]), after=None)
        store.append("order-6", [placed(6)], condition=condition)
        store.save_snapshot("order-1", version=3, type="Order", data={"n": 3})
        store.delete_stream("order-3")
        assert store.stream_version("order-1") == 3
        assert [e.data["n"] for e in store.read_all()] == [1, 2, 3, 4, 5, 6]
        assert store.stream_version("order-3") == 0


def test_a_role_that_may_not_create_the_store_is_told_which_privilege_it_lacks(
    roles: StoreRoles,
) -> None:
    """Opening a schema that does not exist yet creates it: the database's CREATE; one that
    is there but empty, its tables: the schema's CREATE."""
    missing = f"nothing_{uuid.uuid4().hex[:8]}"
    with pytest.raises(StorePermissionDenied) as refused:
        EventStore.open(roles.url(roles.writer, schema=missing))
    database = psycopg.conninfo.conninfo_to_dict(PG_URL)["dbname"]
    assert f"lacks CREATE on database {database}" in str(refused.value)
    assert "opening creates the store's tables" in str(refused.value)
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(missing)))
        conn.execute(
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
                sql.Identifier(missing), sql.Identifier(roles.writer)
            )
        )
    try:
        with pytest.raises(StorePermissionDenied, match=f"lacks CREATE on schema {missing}"):
            EventStore.open(roles.url(roles.writer, schema=missing))
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(missing)))


def test_a_role_without_usage_on_the_schema_is_told_so(pg_url: str) -> None:
    """Without USAGE the store's tables cannot be seen: not an empty schema to fill."""
    with store_roles(schema_of(pg_url), granted=False) as roles:
        EventStore.open(pg_url).close()
        with pytest.raises(
            StorePermissionDenied,
            match=f"the role '{roles.reader}' lacks USAGE on schema {roles.schema}",
        ):
            EventStore.open(roles.url(roles.reader))


class Registered(BaseModel):
    customer_id: str
    name: Annotated[str, Personal(subject="customer_id")]


def registered(customer: str, name: str) -> NewEvent:
    return NewEvent("Registered", Registered(customer_id=customer, name=name))


def names(store: EventStore) -> dict[str, str]:
    return {e.data["customer_id"]: e.data["name"] for e in store.read_all(types="Registered")}


def key_table_owner(roles: StoreRoles) -> str | None:
    with psycopg.connect(PG_URL) as conn:
        row = conn.execute(
            "SELECT pg_get_userbyid(relowner) FROM pg_class WHERE oid = to_regclass(%s)",
            (f"{roles.schema}.eventcraft_keys",),
        ).fetchone()
    return row[0] if row else None


def test_the_application_role_seals_and_reads_personal_data(roles: StoreRoles) -> None:
    """The migration role's open made the key table, and the manual's grants let the
    application seal with it; the first seal was refused ('lacks a privilege (permission
    denied for schema ...)': it made the key table, which needs CREATE on the schema)."""
    assert key_table_owner(roles) == roles.migrator
    with EventStore.open(roles.url(roles.writer)) as store:
        store.append("customer-1", [registered("c1", "Ann")])
        store.append("customer-2", [registered("c2", "Bob")])
        store.append("customer-1", [registered("c1", "Ann B.")])
        assert names(store) == {"c1": "Ann B.", "c2": "Bob"}
    with psycopg.connect(PG_URL) as conn:
        raw = conn.execute(
            sql.SQL("SELECT data::text FROM {}.eventcraft_events").format(
                sql.Identifier(roles.schema)
            )
        ).fetchall()
    assert raw and not any("Ann" in row[0] or "Bob" in row[0] for row in raw)


def test_the_application_roles_async_store_seals_and_reads_personal_data(
    roles: StoreRoles,
) -> None:
    async def write_and_read() -> list[str]:
        async with await AsyncEventStore.open(roles.url(roles.writer)) as store:
            await store.append("customer-1", [registered("c1", "Ann")])
            return [e.data["name"] async for e in store.read_all(types="Registered")]

    assert asyncio.run(write_and_read()) == ["Ann"]


def test_a_read_only_role_opens_personal_fields_and_may_not_seal_any(
    roles: StoreRoles,
) -> None:
    """The read-only role reads what the console shows: personal fields opened."""
    with EventStore.open(roles.url(roles.writer)) as store:
        store.append("customer-1", [registered("c1", "Ann")])
    with EventStore.open(roles.url(roles.reader)) as store:
        assert names(store) == {"c1": "Ann"}
        (event,) = store.read_stream("customer-1")
        assert event.data["name"] == "Ann" != FORGOTTEN
        with pytest.raises(StorePermissionDenied) as refused:
            store.append("customer-2", [registered("c2", "Bob")])
    message = str(refused.value)
    assert f"lacks INSERT on table {roles.schema}.eventcraft_keys" in message
    assert "sealing personal data" in message
    with psycopg.connect(PG_URL) as conn:
        held = conn.execute(
            sql.SQL("SELECT subject FROM {}.eventcraft_keys").format(sql.Identifier(roles.schema))
        ).fetchall()
    assert held == [("c1",)]


def test_forget_runs_as_the_migration_role_and_another_role_is_told_so(
    roles: StoreRoles,
) -> None:
    """A forget rewrites the key table (VACUUM FULL), which only its owner may: another
    role's forget is refused before it erases anything, naming the owner to run it as."""
    with EventStore.open(roles.url(roles.writer)) as store:
        store.append("customer-1", [registered("c1", "Ann")])
        store.append("customer-2", [registered("c2", "Bob")])
    for role in (roles.writer, roles.reader):
        refusal = pytest.raises(StorePermissionDenied)
        with EventStore.open(roles.url(role)) as store, refusal as refused:
            store.forget("c1")
        message = str(refused.value)
        assert f"the role '{role}' lacks ownership of table {roles.schema}.eventcraft_keys" in (
            message
        )
        assert f"run forget as the migration role, '{roles.migrator}'" in message
        assert not isinstance(refused.value, StoreUnavailable)
    with EventStore.open(roles.url(roles.reader)) as store:
        assert names(store) == {"c1": "Ann", "c2": "Bob"}  # nothing was erased
    with EventStore.open(roles.url(roles.migrator)) as store:
        assert store.forget("c1") == 1
        assert not store.keys.erasure_pending()
    with EventStore.open(roles.url(roles.reader)) as store:
        assert names(store) == {"c1": FORGOTTEN, "c2": "Bob"}
    with EventStore.open(roles.url(roles.writer)) as store:
        store.append("customer-1", [registered("c1", "Ann again")])
        assert names(store) == {"c1": "Ann again", "c2": "Bob"}


def test_a_seal_whose_key_table_the_role_may_not_make_is_named(roles: StoreRoles) -> None:
    """Keys kept in a schema of their own, where the role may not create: the key table is
    made by the first seal there, and the seal was StoreUnavailable ('key store ...')."""
    elsewhere = f"keys_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA {}").format(sql.Identifier(elsewhere)))
        conn.execute(
            sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(
                sql.Identifier(elsewhere), sql.Identifier(roles.writer)
            )
        )
    keys = roles.url(roles.writer, schema=elsewhere)
    try:
        refused = pytest.raises(
            StorePermissionDenied, match=rf"permission denied for schema {elsewhere}.*key store"
        )
        with EventStore.open(roles.url(roles.writer), keys=keys) as store, refused:
            store.append("customer-1", [registered("c1", "Ann")])
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(sql.SQL("DROP SCHEMA {} CASCADE").format(sql.Identifier(elsewhere)))


def test_a_reader_kept_from_personal_data_is_refused_its_events_naming_the_key_table(
    roles: StoreRoles,
) -> None:
    """As the manual's roles SQL says: its SELECT on the key table revoked, a reader still
    reads events without personal fields, and one holding them is refused, named."""
    with EventStore.open(roles.url(roles.writer)) as store:
        store.append("customer-1", [registered("c1", "Ann")])
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(
            sql.SQL("REVOKE SELECT ON {}.eventcraft_keys FROM {}").format(
                sql.Identifier(roles.schema), sql.Identifier(roles.reader)
            )
        )
    with EventStore.open(roles.url(roles.reader)) as store:
        assert [e.data["n"] for e in store.read_stream("order-1")] == [1, 2]
        with pytest.raises(StorePermissionDenied) as refused:
            list(store.read_stream("customer-1"))
    message = str(refused.value)
    assert f"the role '{roles.reader}' lacks SELECT on table {roles.schema}.eventcraft_keys" in (
        message
    )
    assert "reading personal data" in message


def test_a_rewrite_postgresql_skipped_for_want_of_privilege_leaves_the_erasure_pending(
    roles: StoreRoles, caplog: pytest.LogCaptureFixture
) -> None:
    """VACUUM FULL by a role that may not vacuum the key table is a warning, not an error: the
    key's old row version stays in the file, so the rewrite's mark must stay for the owner's
    next forget. Past the forget's own check (which refuses such a role first), as a role
    granted UPDATE on the key table would get there."""
    with EventStore.open(roles.url(roles.writer)) as store:
        store.append("customer-1", [registered("c1", "Ann")])
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        table = sql.Identifier(roles.schema, "eventcraft_keys")
        conn.execute(
            sql.SQL("GRANT UPDATE ON {} TO {}").format(table, sql.Identifier(roles.writer))
        )
        # A forget cut short before its rewrite, as `postgres/key_table.py` marks it.
        conn.execute(
            sql.SQL(
                "UPDATE {} SET material = NULL, forgotten_at = now(), "
                "erased_xid = pg_current_xact_id() WHERE subject = 'c1'"
            ).format(table)
        )
    writer = PostgresKeyTable(roles.url(roles.writer), snapshot_wait=60)
    try:
        writer._pool.run(writer._rewrite)
        assert writer.erasure_pending()
        assert "was not rewritten" in caplog.text
    finally:
        writer.close()
    with EventStore.open(roles.url(roles.migrator)) as store:
        assert store.forget("nobody") == 0
        assert not store.keys.erasure_pending()
