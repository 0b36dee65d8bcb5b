"""A tenant's checkpoints carried with it: a runner that applied part of the tenant's log
before the move goes on at the destination after it, each event applied exactly once;
parked events keep their events; a carry is made once, and refused while a runner runs
or when a checkpoint is past the copy."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest
import sqlalchemy as sa
from eventcraft.eventstore import (
    EventStore,
    NewEvent,
    PostgresTarget,
    RecordedEvent,
    Tenants,
    move_tenant,
    move_tenant_log,
)
from eventcraft.eventstore.sql.schema import POSITION_SEQUENCE
from eventcraft.projections import (
    Database,
    ErrorPolicy,
    Projection,
    ProjectionError,
    ProjectionRunner,
    ReadModel,
    Subscription,
    carry_checkpoints,
    checkpoint_positions,
)
from eventcraft.projections.database import engine_for

from ..conftest import PG_URL, _need_postgres

APPLIED = sa.Table(
    "applied",
    sa.MetaData(),
    sa.Column("event_id", sa.Text, primary_key=True),  # applied twice: refused by the key
    sa.Column("stream_id", sa.Text, nullable=False),
)


def _applied() -> Projection:
    projection = Projection("applied", tables=[APPLIED])

    def apply(read_model: ReadModel, event: RecordedEvent) -> None:
        read_model.execute(
            sa.insert(read_model[APPLIED]).values(event_id=str(event.id), stream_id=event.stream_id)
        )

    for event_type in ["Placed", "Paid", "Broken"]:
        projection.on(event_type)(apply)
    return projection


class Mailer:
    """A subscription that fails on `Broken` events while `failing`, so they are parked."""

    def __init__(self) -> None:
        self.failing = True
        self.mailed: list[str] = []

    def __call__(self, event: RecordedEvent) -> None:
        if event.type == "Broken" and self.failing:
            raise RuntimeError("the mail server is down")
        self.mailed.append(str(event.id))


def _runner(store: EventStore, database: Database, mailer: Mailer) -> ProjectionRunner:
    mail = Subscription("mail", mailer, on_error=ErrorPolicy(attempts=1, backoff=0, then="skip"))
    return ProjectionRunner(store, [_applied(), mail], database=database)


@pytest.fixture
def prefix() -> Iterator[str]:
    _need_postgres()
    prefix = f"c_{uuid.uuid4().hex[:6]}"
    yield prefix
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        for (schema,) in conn.execute(
            "SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (f"{prefix}\\_%",)
        ).fetchall():
            conn.execute(f'DROP SCHEMA "{schema}" CASCADE')


def _template(kind: str, tmp_path: Path, prefix: str, side: str) -> str:
    if kind == "sqlite":
        (tmp_path / side).mkdir(exist_ok=True)
        return f"sqlite:///{tmp_path}/{side}/{{tenant}}.db"
    return f"{PG_URL}?schema={prefix}_{side}_{{tenant}}"


def _append(store: EventStore, first: int, last: int) -> None:
    """Orders `first` to `last`, a gap in the positions between them on PostgreSQL."""
    for n in range(first, last):
        store.append(f"order-{n}", [NewEvent("Placed", {"n": n}), NewEvent("Paid", {})])
        if n % 3 == 0:
            store.append(f"order-{n}", [NewEvent("Broken", {})])
        if n % 4 == 0 and store.url.startswith("postgresql"):
            schema = PostgresTarget.from_url(store.url).schema
            with psycopg.connect(PG_URL, autocommit=True) as conn:
                conn.execute("SELECT nextval(%s::regclass)", (f"{schema}.{POSITION_SEQUENCE}",))


def _read_models(kind: str, tmp_path: Path, prefix: str) -> Database:
    """The tenant's read models in a database of their own, which the move leaves where
    it is (as `App.database` keeps them)."""
    if kind == "sqlite":
        return Database(sa.create_engine(f"sqlite:///{tmp_path}/read-models.db"))
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {prefix}_read_models")
    return Database(engine_for(f"{PG_URL}?schema={prefix}_read_models"))


@pytest.mark.parametrize(
    ("origin", "target", "models"),
    [
        ("sqlite", "schema", "sqlite"),
        ("schema", "sqlite", "postgres"),
        ("schema", "schema", "postgres"),
    ],
)
def test_a_runner_goes_on_after_the_move_applying_each_event_exactly_once(
    origin: str, target: str, models: str, tmp_path: Path, prefix: str
) -> None:
    source = _template(origin, tmp_path, prefix, "o")
    destination = _template(target, tmp_path, prefix, "n")
    database = _read_models(models, tmp_path, prefix)
    mailer = Mailer()
    with Tenants(source) as tenants:
        acme = tenants.for_tenant("acme")
        _append(acme, 0, 10)
        with _runner(acme, database, mailer) as runner:
            runner.catch_up()  # part of the log, before the move
            parked_before = [p.event_id for p in runner.parked("mail")]
        _append(acme, 10, 16)  # the rest, after it
        everything = [str(e.id) for e in acme.read_all()]
        before = checkpoint_positions(database, ["applied", "mail"])
    assert before is not None and len(parked_before) == 4

    moved = move_tenant("acme", source, destination)
    carried = carry_checkpoints(database, moved.positions)
    assert not carried.already and carried.parked == 4
    assert {name: old for name, (old, _) in carried.checkpoints.items()} == before
    assert checkpoint_positions(database, ["applied", "mail"]) == {
        name: new for name, (_, new) in carried.checkpoints.items()
    }

    with Tenants(destination) as tenants:
        copy = tenants.for_tenant("acme")
        with _runner(copy, database, mailer) as runner:
            runner.catch_up()
            # Each parked event is at its event's new position, and retried from there.
            parked = runner.parked("mail")
            assert [p.event_id for p in parked][:4] == parked_before
            new_of = {str(e.id): e.position for e in copy.read_all()}
            assert all(new_of[str(p.event_id)] == p.position for p in parked)
            mailer.failing = False
            for entry in parked:
                runner.retry_parked("mail", entry.position)
            assert runner.parked("mail") == []
            with database.reading() as connection:
                applied = connection.execute(sa.select(APPLIED.c.event_id)).scalars().all()
            assert checkpoint_positions(database, ["applied", "mail"]) == {
                "applied": copy.high_water_mark(),
                "mail": copy.high_water_mark(),
            }
    assert sorted(applied) == sorted(everything)  # each event once: the key refuses twice
    assert sorted(mailer.mailed) == sorted(everything) and len(set(mailer.mailed)) == len(
        everything
    )
    database.engine.dispose()


def _moved_with_a_runner(tmp_path: Path, prefix: str) -> tuple[str, str, Database, Mailer]:
    """Acme in a schema whose log begins at position 3 (positions 1 and 2 taken by appends
    that failed), and a runner that applied its first event; the sqlite place it moves to."""
    (tmp_path / "b").mkdir()
    a, b = _template("schema", tmp_path, prefix, "a"), f"sqlite:///{tmp_path}/b/{{tenant}}.db"
    database = Database(sa.create_engine(f"sqlite:///{tmp_path}/read-models.db"))
    mailer = Mailer()
    with Tenants(a) as tenants:
        acme = tenants.for_tenant("acme")
        acme.stream_version("order-0")  # its schema made
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            sequence = f"{prefix}_a_acme.{POSITION_SEQUENCE}"
            conn.execute("SELECT nextval(%s::regclass), nextval(%s::regclass)", (sequence,) * 2)
        acme.append("order-0", [NewEvent("Placed", {})])
        with _runner(acme, database, mailer) as runner:
            runner.catch_up()
    assert checkpoint_positions(database, ["applied"]) == {"applied": 3}
    return a, b, database, mailer


def test_a_carry_is_made_once_and_a_move_back_is_carried_back(tmp_path: Path, prefix: str) -> None:
    a, b, database, _ = _moved_with_a_runner(tmp_path, prefix)
    there = move_tenant("acme", a, b)
    assert carry_checkpoints(database, there.positions).checkpoints["applied"] == (3, 1)
    again = carry_checkpoints(database, there.positions)  # a second carry would make it 0
    assert again.already and again.checkpoints == {}
    assert checkpoint_positions(database, ["applied"]) == {"applied": 1}
    with Tenants(a) as tenants:  # the old place dropped; then the tenant moves back to it
        tenants.for_tenant("acme").drop_tenant()
    with Tenants(a) as tenants:
        tenants.for_tenant("acme").stream_version("order-0")  # made again, positions ahead
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            sequence = f"{prefix}_a_acme.{POSITION_SEQUENCE}"
            conn.execute("SELECT setval(%s::regclass, 40)", (sequence,))
    back = move_tenant("acme", b, a)
    assert carry_checkpoints(database, back.positions).checkpoints["applied"] == (1, 41)
    assert carry_checkpoints(database, back.positions).already
    with (
        EventStore.open(f"sqlite:///{tmp_path}/x.db") as x,
        EventStore.open(f"sqlite:///{tmp_path}/y.db") as y,
    ):
        x.append("order-0", [NewEvent("Placed", {})])
        elsewhere = move_tenant_log(x, y).positions
    with pytest.raises(ProjectionError, match="numbered by the log at"):
        carry_checkpoints(database, elsewhere)  # from a log they do not follow
    assert checkpoint_positions(database, ["applied"]) == {"applied": 41}
    database.engine.dispose()


def test_a_carry_while_a_runner_runs_is_refused_and_changes_nothing(
    tmp_path: Path, prefix: str
) -> None:
    a, b, database, mailer = _moved_with_a_runner(tmp_path, prefix)
    positions = move_tenant("acme", a, b).positions
    with Tenants(a) as tenants, _runner(tenants.for_tenant("acme"), database, mailer) as runner:
        runner.start()
        runner.wait_until(3)
        with pytest.raises(ProjectionError, match="stop the runners"):
            carry_checkpoints(database, positions)
        runner.stop()
    with database.reading() as connection:
        assert not sa.inspect(connection).has_table("eventcraft_checkpoint_log")
    assert carry_checkpoints(database, positions).checkpoints["applied"] == (3, 1)
    database.engine.dispose()


def test_a_checkpoint_past_the_copy_is_refused(tmp_path: Path, prefix: str) -> None:
    a, b, database, mailer = _moved_with_a_runner(tmp_path, prefix)
    positions = move_tenant("acme", a, b).positions
    with Tenants(a) as tenants:
        acme = tenants.for_tenant("acme")
        acme.append("order-9", [NewEvent("Placed", {})])  # served after the move began
        with _runner(acme, database, mailer) as runner:
            runner.catch_up()
    with pytest.raises(ProjectionError, match="past the copy"):
        carry_checkpoints(database, positions)
    assert checkpoint_positions(database, ["applied"]) == {"applied": 4}
    rest = move_tenant("acme", a, b)  # moved again: the rest copied, then carried
    assert rest.resumed
    assert carry_checkpoints(database, rest.positions).checkpoints["applied"] == (4, 2)
    database.engine.dispose()


def test_a_database_where_no_runner_ran_has_nothing_to_carry(tmp_path: Path) -> None:
    database = Database(sa.create_engine(f"sqlite:///{tmp_path}/read-models.db"))
    with (
        EventStore.open(f"sqlite:///{tmp_path}/old.db") as old,
        EventStore.open(f"sqlite:///{tmp_path}/new.db") as new,
    ):
        old.append("order-1", [NewEvent("Placed", {})])
        carried = carry_checkpoints(database, move_tenant_log(old, new).positions)
    assert (carried.checkpoints, carried.parked, carried.already) == ({}, 0, False)
    with database.reading() as connection:
        assert sa.inspect(connection).get_table_names() == []  # nothing made
    database.engine.dispose()
