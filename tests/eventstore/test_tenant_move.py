"""Moving a tenant copies its whole log (events with every field, deletions where they
stand, snapshots, personal fields sealed again with the destination's keys) into its
place under another resolver, positions renumbered there and mapped; a destination
holding another log is refused with nothing written; a move killed part-way resumes."""

from __future__ import annotations

import os
import signal
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
from eventcraft.eventstore import (
    FORGOTTEN,
    EventStore,
    InvalidEvent,
    InvalidTenant,
    NewEvent,
    PostgresTarget,
    RecordedEvent,
    Tenants,
    UnsupportedStoreURL,
    move_tenant,
    move_tenant_log,
)
from eventcraft.eventstore.retention import RetentionPolicy
from eventcraft.eventstore.sql.schema import POSITION_SEQUENCE
from eventcraft.eventstore.testing.personal import Registered

from eventcraft.operations import retention

from ..conftest import PG_URL, _need_postgres
from ..processes import PROCESSES

SERVER = PG_URL.rsplit("/", 1)[0]


@pytest.fixture
def prefix() -> Iterator[str]:
    """A prefix for the schemas and databases a test's tenants get, dropped afterwards."""
    _need_postgres()
    prefix = f"m_{uuid.uuid4().hex[:6]}"
    yield prefix
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for (schema,) in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (f"{prefix}\\_%",)
        ).fetchall():
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')
        for (database,) in conn.execute(
            "SELECT datname FROM pg_database WHERE datname LIKE %s", (f"{prefix}\\_%",)
        ).fetchall():
            conn.execute(f'DROP DATABASE "{database}" WITH (FORCE)')


def _template(kind: str, tmp_path: Path, prefix: str, side: str) -> str:
    if kind == "sqlite":
        (tmp_path / side).mkdir(exist_ok=True)
        return f"sqlite:///{tmp_path}/{side}/{{tenant}}.db"
    if kind == "schema":
        return f"{PG_URL}?schema={prefix}_{side}_{{tenant}}"
    return f"{SERVER}/{prefix}_{side}_{{tenant}}"


def fill(store: EventStore) -> None:
    """Something of everything a tenant's log keeps: events with tags and metadata, a
    gap in the positions where the backend leaves one, a soft deletion with events after
    it, a tombstone, a stream tombstoned before its first event, a snapshot, personal
    fields (one subject forgotten)."""
    store.delete_stream("spam-1", tombstone=True)  # before any event: placed at 0
    for n in range(3):
        store.append(
            f"order-{n}",
            [NewEvent("Placed", {"n": n}, {"by": "test"}, tags=[f"course:c{n}"])],
        )
    _gap(store)
    store.append("order-0", [NewEvent("Paid", {"cents": 90})])
    store.save_snapshot("order-0", version=2, type="Order", data={"paid": True})
    store.delete_stream("order-1")
    store.append("order-1", [NewEvent("Reopened", {})])  # after its soft deletion
    store.delete_stream("order-2", tombstone=True)
    for customer, name in [("c1", "Ada"), ("c2", "Bob")]:
        # U+2028 is kept raw in JSON text: a line ends at a newline only.
        registered = Registered(customer_id=customer, name=name, age=36, plan="pro\u2028max")
        store.append(f"customer-{customer}", [NewEvent("Registered", registered)])
    store.save_snapshot(
        "customer-c1",
        version=1,
        type="Customer",
        data=Registered(customer_id="c1", name="Ada", age=36, plan="pro"),
    )
    assert store.forget("c2") == 1


def _gap(store: EventStore) -> None:
    """On PostgreSQL, positions taken and never used (as an append that failed leaves
    them): a gap in the log."""
    if store.url.startswith("postgresql"):
        schema = PostgresTarget.from_url(store.url).schema
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            sequence = f"{schema}.{POSITION_SEQUENCE}"
            conn.execute("SELECT nextval(%s::regclass), nextval(%s::regclass)", (sequence,) * 2)


def _fields(event: RecordedEvent) -> tuple[object, ...]:
    return (
        event.id,
        event.stream_id,
        event.version,
        event.type,
        event.data,
        event.metadata,
        event.recorded_at,
        event.tags,
    )


def _same_tenant(source: EventStore, copy: EventStore) -> None:
    """`copy` reads as `source` does, each event at its own position."""
    theirs, mine = list(source.read_all()), list(copy.read_all())
    assert [_fields(e) for e in mine] == [_fields(e) for e in theirs]
    positions = [e.position for e in mine]
    assert positions == sorted(set(positions))  # the destination's own, in the log's order
    for stream in ["order-0", "order-1", "order-2", "spam-1", "customer-c1", "customer-c2"]:
        assert [_fields(e) for e in copy.read_stream(stream)] == [
            _fields(e) for e in source.read_stream(stream)
        ]
        assert copy.stream_deletion(stream) == source.stream_deletion(stream)
        assert copy.stream_version(stream) == source.stream_version(stream)
    for stream in ["order-0", "customer-c1"]:
        held, copied = source.load_snapshot(stream), copy.load_snapshot(stream)
        assert (held is None) == (copied is None)
        if held is not None and copied is not None:
            assert (copied.version, copied.type, copied.data) == (
                held.version,
                held.type,
                held.data,
            )
    with pytest.raises(Exception, match="tombstoned"):
        copy.append("order-2", [NewEvent("Placed", {})])
    with pytest.raises(Exception, match="tombstoned"):
        copy.append("spam-1", [NewEvent("Placed", {})])
    (ada,) = copy.read_stream("customer-c1")
    (bob,) = copy.read_stream("customer-c2")
    assert (ada.data["name"], bob.data["name"], bob.data["age"]) == ("Ada", FORGOTTEN, 0)


@pytest.mark.parametrize(
    ("origin", "target"),
    [("sqlite", "schema"), ("schema", "sqlite"), ("schema", "database"), ("sqlite", "sqlite")],
)
@pytest.mark.slow
def test_a_moved_tenant_reads_as_it_did_with_positions_renumbered_and_mapped(
    origin: str, target: str, tmp_path: Path, prefix: str
) -> None:
    source = _template(origin, tmp_path, prefix, "o")
    destination = _template(target, tmp_path, prefix, "n")
    with Tenants(source, most_open=2) as tenants:
        fill(tenants.for_tenant("acme"))
        fill(tenants.for_tenant("globex"))  # a neighbour, not moved
    moved = move_tenant("acme", source, destination)
    assert (moved.tenant, moved.resumed, moved.written) == ("acme", False, 7)
    assert (moved.events, moved.deletions, moved.snapshots) == (7, 3, 2)
    with Tenants(source) as old, Tenants(destination) as new:
        acme, copy = old.for_tenant("acme"), new.for_tenant("acme")
        _same_tenant(acme, copy)
        by_id = {e.id: e.position for e in copy.read_all()}
        assert list(moved.positions.pairs()) == [(e.position, by_id[e.id]) for e in acme.read_all()]
        if origin == "schema":  # the refused append left a gap, which the copy closes
            assert [old for old, _ in moved.positions.pairs()] != list(range(1, 8))
        assert [new for _, new in moved.positions.pairs()] == list(range(1, 8))
        assert new.known() == ["acme"]
        # The source is left as it was.
        assert len(list(acme.read_all())) == 7 and old.known() == ["acme", "globex"]


def test_a_tenant_moves_in_and_out_of_the_side_by_side_placement(
    tmp_path: Path, prefix: str
) -> None:
    files = _template("sqlite", tmp_path, prefix, "o")
    shared = f"{PG_URL}?schema={prefix}_shared&tenancy=shared"
    schemas = _template("schema", tmp_path, prefix, "n")
    try:
        with Tenants(files) as tenants:
            fill(tenants.for_tenant("acme"))
        with Tenants(shared) as tenants:
            tenants.for_tenant("globex").append("order-0", [NewEvent("Placed", {"n": -1})])
        inward = move_tenant("acme", files, shared)
        assert [new for _, new in inward.positions.pairs()] == list(range(1, 8))  # its own
        outward = move_tenant("acme", shared, schemas)
        # Bob, forgotten before, holds no sealed field after the first move: Ada's two.
        assert (inward.events, outward.events, outward.resealed) == (7, 7, 2)
        with Tenants(files) as old, Tenants(shared) as side, Tenants(schemas) as new:
            _same_tenant(old.for_tenant("acme"), side.for_tenant("acme"))
            _same_tenant(old.for_tenant("acme"), new.for_tenant("acme"))
            globex = side.for_tenant("globex")  # its neighbour's log as it was
            assert [e.data for e in globex.read_all()] == [{"n": -1}]
            with pytest.raises(InvalidTenant, match="not the source's"):
                move_tenant_log(globex, side.for_tenant("acme"))
    finally:
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(
                f'DROP SCHEMA IF EXISTS "{prefix}_shared", "{prefix}_shared__rows" CASCADE'
            )


def test_personal_fields_are_sealed_again_with_the_destinations_keys(
    tmp_path: Path, prefix: str
) -> None:
    source = _template("sqlite", tmp_path, prefix, "o")
    destination = _template("schema", tmp_path, prefix, "n")
    with Tenants(source) as tenants:
        fill(tenants.for_tenant("acme"))
    moved = move_tenant("acme", source, destination)
    assert moved.resealed == 3  # Ada's event and snapshot, Bob's (forgotten) event
    copy_url = destination.replace("{tenant}", "acme")
    with EventStore.open(copy_url, sealed=True) as stored:
        (ada,) = stored.read_stream("customer-c1")
        (bob,) = stored.read_stream("customer-c2")
        snapshot = stored.load_snapshot("customer-c1")
    (entry,) = ada.data["$personal"]
    assert "name" not in ada.data and entry["subject"] == "c1"
    assert snapshot is not None and snapshot.data["$personal"][0]["key"] == entry["key"]
    assert "$personal" not in bob.data and bob.data["name"] == FORGOTTEN  # gone at the source
    with EventStore.open(copy_url) as copy:
        assert [key.subject for key in copy.keys.of_subject("c1")] == ["c1"]
        assert copy.forget("c1") == 1  # a forget at the destination reaches the copy
        (ada,) = copy.read_stream("customer-c1")
        assert ada.data["name"] == FORGOTTEN
    with Tenants(source) as tenants:  # and the source is untouched
        (ada,) = tenants.for_tenant("acme").read_stream("customer-c1")
        assert ada.data["name"] == "Ada"


def test_a_destination_holding_another_log_is_refused_with_nothing_written(
    tmp_path: Path, prefix: str
) -> None:
    source = _template("sqlite", tmp_path, prefix, "o")
    destination = _template("schema", tmp_path, prefix, "n")
    with Tenants(source) as old, Tenants(destination) as new:
        fill(old.for_tenant("acme"))
        new.for_tenant("acme").append("cart-1", [NewEvent("ItemAdded", {})])
        with pytest.raises(InvalidTenant, match="holds events that are not the source's"):
            move_tenant("acme", source, destination)
        copy = new.for_tenant("acme")
        assert [e.stream_id for e in copy.read_all()] == ["cart-1"]
        assert copy.load_snapshot("order-0") is None
        assert copy.stream_deletion("spam-1") is None


def test_a_destination_with_only_another_logs_deletion_is_refused(tmp_path: Path) -> None:
    with (
        EventStore.open(f"sqlite:///{tmp_path}/old.db") as old,
        EventStore.open(f"sqlite:///{tmp_path}/new.db") as new,
    ):
        old.append("order-1", [NewEvent("Placed", {})])
        new.delete_stream("cart-1", tombstone=True)
        assert move_tenant_log(old, new).events == 1  # placed at 0: taken for the copy's
        new.append("cart-2", [NewEvent("ItemAdded", {})])
        with pytest.raises(InvalidTenant, match="not the source's"):
            move_tenant_log(old, new)


def test_a_move_run_again_writes_nothing_and_copies_what_came_since(tmp_path: Path) -> None:
    with (
        EventStore.open(f"sqlite:///{tmp_path}/old.db") as old,
        EventStore.open(f"sqlite:///{tmp_path}/new.db") as new,
    ):
        fill(old)
        first = move_tenant_log(old, new)
        again = move_tenant_log(old, new)
        assert (again.written, again.deletions, again.resumed) == (0, 0, True)
        assert list(again.positions.pairs()) == list(first.positions.pairs())
        old.append("order-0", [NewEvent("Shipped", {})])  # served meanwhile
        old.delete_stream("order-0")
        rest = move_tenant_log(old, new)
        assert (rest.written, rest.deletions, rest.events) == (1, 1, first.events + 1)
        _same_tenant(old, new)


def test_the_position_map_carries_any_position_up_to_the_copy(tmp_path: Path) -> None:
    with (
        EventStore.open(f"sqlite:///{tmp_path}/old.db") as old,
        EventStore.open(f"sqlite:///{tmp_path}/new.db") as new,
    ):
        new.append("elsewhere", [NewEvent("Noted", {})])
        with pytest.raises(InvalidTenant):
            move_tenant_log(old, new)
    with (
        EventStore.open(f"sqlite:///{tmp_path}/old2.db") as old,
        EventStore.open(f"sqlite:///{tmp_path}/new2.db") as new,
    ):
        old.append("order-1", [NewEvent("Placed", {}), NewEvent("Paid", {})])
        positions = move_tenant_log(old, new).positions
        assert [positions.new_position(p) for p in range(3)] == [0, 1, 2]
        with pytest.raises(InvalidEvent, match="past the copy"):
            positions.new_position(3)
        with pytest.raises(InvalidEvent, match="whole number"):
            positions.new_position(-1)


def test_one_place_under_both_resolvers_is_refused(tmp_path: Path) -> None:
    (tmp_path / "t").mkdir()
    template = f"sqlite:///{tmp_path}/t/{{tenant}}.db"
    with Tenants(template) as tenants:
        tenants.for_tenant("acme").append("order-1", [NewEvent("Placed", {})])
    with pytest.raises(InvalidTenant, match="under both"):
        move_tenant("acme", template, f"sqlite:///{tmp_path}/t/../t/{{tenant}}.db")
    with (
        EventStore.open(f"sqlite:///{tmp_path}/t/acme.db") as store,
        Tenants(template) as tenants,
    ):
        for source, destination in [(store, store), (tenants.for_tenant("acme"), store)]:
            with pytest.raises(InvalidTenant, match="one place"):
                move_tenant_log(source, destination)


def test_a_tenant_without_a_store_is_refused_and_no_place_is_made(tmp_path: Path) -> None:
    (tmp_path / "old").mkdir()
    (tmp_path / "new").mkdir()
    with pytest.raises(InvalidTenant, match="nothing to move"):
        move_tenant(
            "initech",
            f"sqlite:///{tmp_path}/old/{{tenant}}.db",
            f"sqlite:///{tmp_path}/new/{{tenant}}.db",
        )
    assert list((tmp_path / "old").iterdir()) == list((tmp_path / "new").iterdir()) == []


@pytest.mark.parametrize(
    "hostile", ["", "Acme", "../billing", "acme'; DROP SCHEMA public; --", "a" * 60, "acme\x00"]
)
def test_hostile_tenant_ids_are_refused_before_anything_is_opened(
    hostile: str, tmp_path: Path
) -> None:
    with pytest.raises(InvalidTenant, match=r"^tenant id "):
        move_tenant(hostile, f"sqlite:///{tmp_path}/{{tenant}}.db", f"{PG_URL}?schema=x_{{tenant}}")
    assert list(tmp_path.iterdir()) == []


def test_a_template_that_cannot_place_tenants_is_refused(tmp_path: Path) -> None:
    with pytest.raises(UnsupportedStoreURL):
        move_tenant("acme", f"sqlite:///{tmp_path}/{{tenant}}.db", f"{PG_URL}?schema={{tenant}}")


def test_a_log_retention_cut_is_refused(tmp_path: Path) -> None:
    with (
        EventStore.open(f"sqlite:///{tmp_path}/old.db") as old,
        EventStore.open(f"sqlite:///{tmp_path}/new.db") as new,
    ):
        old.append("order-1", [NewEvent("Placed", {}), NewEvent("Paid", {})])
        keep = [RetentionPolicy("order", max_count=1)]
        retention.apply(old, keep, [], str(tmp_path / "archive"))
        with pytest.raises(InvalidTenant, match="retention removed"):
            move_tenant_log(old, new)
        assert new.high_water_mark() == 0


# --- a move killed part-way -------------------------------------------------------------


STREAMS = 400
"""Streams of the log a killed move copies: an append each, so the copy takes many."""


def _move_and_stop(source: str, destination: str, marker: str) -> None:
    """Move acme, and once part of its log is copied, say so and wait to be killed."""

    def progress(done: int) -> None:
        if done > 20_000 and not os.path.exists(marker):  # past the first few appends
            Path(marker).write_text(str(done))
            while True:  # killed here, mid-copy
                time.sleep(0.05)

    move_tenant("acme", source, destination, progress=progress)
    sys.exit(3)  # never reached: the test kills it first


@pytest.mark.slow
@pytest.mark.parametrize("target", ["schema", "sqlite"])
def test_a_move_killed_mid_copy_resumes_and_copies_each_event_once(
    target: str, tmp_path: Path, prefix: str
) -> None:
    source = _template("sqlite", tmp_path, prefix, "o")
    destination = _template(target, tmp_path, prefix, "n")
    with Tenants(source) as tenants:
        acme = tenants.for_tenant("acme")
        fill(acme)
        for n in range(STREAMS):
            acme.append(f"item-{n}", [NewEvent("Made", {"n": n}), NewEvent("Sold", {})])
        total = acme.high_water_mark()
    marker = str(tmp_path / "copying")
    process = PROCESSES.Process(target=_move_and_stop, args=(source, destination, marker))
    process.start()
    deadline = time.monotonic() + 60
    while not os.path.exists(marker):
        assert process.is_alive() and time.monotonic() < deadline, "the move never began"
        time.sleep(0.01)
    assert process.pid is not None
    os.kill(process.pid, signal.SIGKILL)
    process.join()
    assert process.exitcode == -signal.SIGKILL
    with Tenants(destination) as new:
        held = new.for_tenant("acme").high_water_mark()
    assert 0 < held < total  # killed part-way through the copy
    moved = move_tenant("acme", source, destination)
    assert moved.resumed and moved.events == total
    with Tenants(source) as old, Tenants(destination) as new:
        copy = new.for_tenant("acme")
        ids = [e.id for e in copy.read_all()]
        assert len(ids) == len(set(ids)) == len(list(old.for_tenant("acme").read_all()))
        assert moved.written == len(ids) - held
        _same_tenant(old.for_tenant("acme"), copy)
