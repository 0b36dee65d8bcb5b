"""One runner for many tenants: each tenant's read models current and in its own place,
with a bounded number of threads, open stores and connected databases, taken in turns."""

from __future__ import annotations

import os
import threading
import time
from collections import Counter
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import InvalidTenant, NewEvent, RecordedEvent, Tenants
from eventcraft.projections import (
    Definition,
    DefinitionError,
    ErrorPolicy,
    Projection,
    ProjectionStopped,
    ProjectionTimeout,
    ReadModel,
    Subscription,
    TenantsRunner,
)

from ..conftest import missing
from ..processes import PROCESSES
from .tenant_writers import append_to_tenants

placed_table = sa.Table(
    "tenant_placed",
    sa.MetaData(),
    sa.Column("position", sa.BigInteger, nullable=False),
    sa.Column("tenant", sa.Text, nullable=False),
    sa.Column("writer", sa.Integer, nullable=False),
    sa.Column("n", sa.Integer, nullable=False),
)


def placed_list(*, failing_at: tuple[str, int] | None = None) -> Projection:
    """Every Placed event as a row (no key: an event applied twice shows twice)."""
    projection = Projection(
        "placed",
        tables=[placed_table],
        on_error=ErrorPolicy(attempts=1, backoff=0, then="stop"),
    )

    @projection.on("Placed")
    def placed(read_model: ReadModel, event: RecordedEvent) -> None:
        if failing_at == (event.data["tenant"], event.data["n"]):
            raise ValueError("this one fails")
        row = {key: event.data[key] for key in ("tenant", "writer", "n")}
        read_model.execute(
            sa.insert(read_model[placed_table]).values(position=event.position, **row)
        )

    return projection


def rows_of(folder: Path, tenant: str) -> list[tuple[int, str, int, int]]:
    """The tenant's read model, read from its own file."""
    engine = sa.create_engine(f"sqlite:///{folder}/{tenant}.db")
    try:
        with engine.connect() as connection:
            found = connection.execute(sa.select(placed_table).order_by("position")).all()
    finally:
        engine.dispose()
    return [(int(r[0]), str(r[1]), int(r[2]), int(r[3])) for r in found]


def placed(tenant: str, n: int, writer: int = 0) -> NewEvent:
    return NewEvent("Placed", {"tenant": tenant, "writer": writer, "n": n})


class Sampler:
    """Watches, in a thread of its own, what the runner holds: the tenant stores open,
    the read-model databases connected, the runner's threads, and the tenants' files this
    process has open (`/proc/self/fd`), keeping the most of each it saw."""

    def __init__(self, tenants: Tenants, runner: TenantsRunner, folder: Path) -> None:
        self.tenants, self.runner, self.folder = tenants, runner, str(folder)
        self.most: Counter[str] = Counter()
        self.samples = 0
        self._done = threading.Event()
        self._thread = threading.Thread(target=self._watch, name="sampler", daemon=True)

    def __enter__(self) -> Sampler:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._done.set()
        self._thread.join()

    def _watch(self) -> None:
        while not self._done.wait(0.0005):
            seen = {
                "stores": len(self.tenants.open_tenants()),
                "databases": len(self.runner.databases.connected()),
                "threads": sum(
                    t.name.startswith(("tenants-runner", "keeping")) for t in threading.enumerate()
                ),
                "files": len(self._open_files()),
            }
            for what, count in seen.items():
                self.most[what] = max(self.most[what], count)
            self.samples += 1

    def _open_files(self) -> set[str]:
        """The tenants whose database files this process has open now."""
        found = set()
        for fd in os.listdir("/proc/self/fd"):
            try:
                target = os.readlink(f"/proc/self/fd/{fd}")
            except OSError:
                continue  # closed meanwhile
            if target.startswith(self.folder) and target.endswith(".db"):
                found.add(target)
        return found


def _need_proc() -> None:
    """The bound is observed in /proc (open files, sockets): in CI a test fails without it."""
    if not os.path.isdir("/proc/self/fd"):
        missing("this test counts open files and sockets in /proc/self/fd (Linux)")


@pytest.mark.slow
def test_fifty_tenants_are_kept_current_by_two_threads_and_four_open_stores(
    tmp_path: Path,
) -> None:
    _need_proc()
    names = [f"t{n:02d}" for n in range(50)]
    expected: dict[str, list[int]] = {name: [] for name in names}
    with Tenants(f"sqlite:///{tmp_path}/{{tenant}}.db", most_open=4) as tenants:
        runner = TenantsRunner(tenants, [placed_list()], workers=2, discover=None, idle=0.2)
        with runner, Sampler(tenants, runner, tmp_path) as sampler:
            runner.start()
            for round_ in range(1, 4):  # appended while the runner serves the tenants
                for number, name in enumerate(names):
                    if number % 3 < round_:
                        tenants.for_tenant(name).append(f"order-{round_}", [placed(name, round_)])
                        expected[name].append(round_)
                    runner.serve(name)
            heads = {name: tenants.for_tenant(name).high_water_mark() for name in names}
            for name in names:
                runner.wait_until(name, heads[name], timeout=60)
            checkpoints = {name: runner.checkpoints(name) for name in names}
            most_databases = runner.databases.most_connected
        assert sampler.samples > 100
    for name in names:
        rows = rows_of(tmp_path, name)
        assert [(tenant, n) for _, tenant, _, n in rows] == [(name, n) for n in expected[name]]
        assert [position for position, *_ in rows] == list(range(1, len(expected[name]) + 1))
        assert checkpoints[name] == {"placed": len(expected[name])}
    # What it held at once, as observed: never above the bound, and the bound was reached.
    assert sampler.most["stores"] == 4
    assert 2 <= most_databases <= 4 and sampler.most["databases"] <= 4
    assert sampler.most["threads"] == 2
    assert 2 <= sampler.most["files"] <= 4 + 4  # the open stores' and databases' files


def server_connections(port: int) -> int:
    """The connections this process holds to the server on `port` now: its sockets (by
    their inodes in /proc/self/fd) that the kernel lists as established to that port."""
    inodes = set()
    for fd in os.listdir("/proc/self/fd"):
        try:
            target = os.readlink(f"/proc/self/fd/{fd}")
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[len("socket:[") : -1])
    found = 0
    for table in ("/proc/self/net/tcp", "/proc/self/net/tcp6"):
        with open(table) as lines:
            next(lines)
            for line in lines:
                fields = line.split()
                remote_port = int(fields[2].rsplit(":", 1)[1], 16)
                if remote_port == port and fields[3] == "01" and fields[9] in inodes:
                    found += 1
    return found


@pytest.mark.slow
def test_tenants_in_schemas_hold_no_more_connections_than_the_bound(pg_url: str) -> None:
    _need_proc()
    template = pg_url + "_{tenant}"  # ?schema=t_<hex>_{tenant}: a schema per tenant
    port = urlsplit(pg_url).port or 5432
    names = [f"s{n:02d}" for n in range(30)]
    most = 0
    with Tenants(template, most_open=3, pool_size=2) as tenants:
        bound = tenants.most_connections + 3 * tenants.pool_size  # stores, read models
        try:
            with TenantsRunner(tenants, [placed_list()], workers=2, idle=0.2) as runner:
                runner.start()
                done = threading.Event()

                def sample() -> None:
                    nonlocal most
                    while not done.wait(0.001):
                        most = max(most, server_connections(port))

                sampler = threading.Thread(target=sample, name="sampler", daemon=True)
                sampler.start()
                for round_ in (1, 2):
                    for name in names:
                        tenants.for_tenant(name).append("order-1", [placed(name, round_)])
                for name in names:  # discovered in the placement (schemas), or served here
                    runner.wait_until(name, 2, timeout=120)
                done.set()
                sampler.join()
                counts = {name: runner.checkpoints(name) for name in names}
        finally:
            for name in tenants.known():
                tenants.for_tenant(name).drop_tenant()
    assert counts == {name: {"placed": 2} for name in names}
    assert 2 <= most <= bound < len(names)  # observed; no connection per tenant


@pytest.mark.slow
def test_one_busy_tenant_waits_its_turn_behind_the_others(tmp_path: Path) -> None:
    applied: list[tuple[str, int]] = []

    def log_of(tenant: str) -> list[Definition]:
        def note(event: RecordedEvent) -> None:
            applied.append((tenant, event.position))

        return [Subscription("log", note)]

    small = [f"small-{n}" for n in range(8)]
    with Tenants(f"sqlite:///{tmp_path}/{{tenant}}.db", most_open=3) as tenants:
        busy = tenants.for_tenant("busy")
        for n in range(20):
            busy.append(f"order-{n}", [placed("busy", m) for m in range(50)])
        for name in small:
            tenants.for_tenant(name).append("order-1", [placed(name, 1)])
        with TenantsRunner(
            tenants, log_of, workers=1, batch_size=10, tenant_ids=["busy", *small], discover=None
        ) as runner:
            runner.start()
            for name in small:
                runner.wait_until(name, 1)
            runner.wait_until("busy", 1000, timeout=60)
    busy_before = [tenant for tenant, _ in applied[: applied.index(("small-7", 1))]]
    # The busy tenant had one turn (a batch of 10) before the small ones had theirs.
    assert busy_before.count("busy") == 10
    assert sorted(tenant for tenant in busy_before if tenant != "busy") == small[:-1]
    assert [position for tenant, position in applied if tenant == "busy"] == list(range(1, 1001))


def test_a_tenants_first_append_gets_it_served(tmp_path: Path) -> None:
    with (
        Tenants(f"sqlite:///{tmp_path}/{{tenant}}.db", most_open=2) as tenants,
        TenantsRunner(tenants, [placed_list()], discover_every=0.05, idle=0.1) as runner,
    ):
        runner.start()
        assert runner.served() == []
        tenants.for_tenant("newcomer").append("order-1", [placed("newcomer", 1)])
        deadline = time.monotonic() + 30
        while runner.checkpoints("newcomer") != {"placed": 1}:  # no serve(), no nudge
            assert time.monotonic() < deadline, "the new tenant was never served"
            time.sleep(0.01)
        assert runner.served() == ["newcomer"]
    assert rows_of(tmp_path, "newcomer") == [(1, "newcomer", 0, 1)]


def test_a_projection_is_rebuilt_for_one_tenant(tmp_path: Path) -> None:
    with Tenants(f"sqlite:///{tmp_path}/{{tenant}}.db", most_open=2) as tenants:
        for name in ["acme", "globex"]:
            tenants.for_tenant(name).append("order-1", [placed(name, 1), placed(name, 2)])
        with TenantsRunner(tenants, [placed_list()]) as runner:
            runner.catch_up()
            report = runner.rebuild("acme", "placed")
            tenants.for_tenant("acme").append("order-2", [placed("acme", 3)])
            runner.catch_up("acme")
            generations = {
                name: [status.generation for status in runner.status(name)]
                for name in ["acme", "globex"]
            }
    assert (report.generation, report.events) == (2, 2)
    assert generations == {"acme": [2], "globex": [1]}
    assert [n for *_, n in rows_of(tmp_path, "acme")] == [1, 2, 3]
    assert [n for *_, n in rows_of(tmp_path, "globex")] == [1, 2]


def test_a_projection_stopped_in_one_tenant_leaves_the_others_served(tmp_path: Path) -> None:
    with Tenants(f"sqlite:///{tmp_path}/{{tenant}}.db", most_open=2) as tenants:
        for name in ["acme", "globex"]:
            tenants.for_tenant(name).append("order-1", [placed(name, 1), placed(name, 2)])
        failing = placed_list(failing_at=("acme", 2))
        with TenantsRunner(tenants, [failing], tenant_ids=["acme", "globex"]) as runner:
            runner.start()
            with pytest.raises(ProjectionStopped) as stopped:
                runner.wait_until("acme", 2)
            runner.wait_until("globex", 2)
            tenants.for_tenant("globex").append("order-2", [placed("globex", 3)])
            runner.wait_until("globex", 3)
            assert runner.checkpoints("acme") == {"placed": 1}
    assert stopped.value.position == 2
    assert [n for *_, n in rows_of(tmp_path, "globex")] == [1, 2, 3]


def read_model_of(runner: TenantsRunner, tenant: str) -> list[tuple[int, str, int, int]]:
    """The tenant's read model, read from its own database, wherever its place is."""
    store = runner.tenants.for_tenant(tenant)
    with runner.databases.using(tenant, store) as database, database.reading() as connection:
        found = connection.execute(sa.select(placed_table).order_by("position")).all()
    return [(int(r[0]), str(r[1]), int(r[2]), int(r[3])) for r in found]


@pytest.mark.parametrize("leases", [None, 0.5], ids=["no-lease", "lease"])
@pytest.mark.parametrize("backend", ["sqlite", "postgres"])
@pytest.mark.slow
def test_writer_processes_and_two_runners_apply_each_event_once_in_its_tenant(
    tmp_path: Path, request: pytest.FixtureRequest, backend: str, leases: float | None
) -> None:
    if backend == "sqlite":
        template = f"sqlite:///{tmp_path}/{{tenant}}.db"
    else:  # a schema per tenant
        template = str(request.getfixturevalue("pg_url")) + "_{tenant}"
    names = ["acme", "globex", "initech", "umbrella", "hooli"]
    writers = [
        PROCESSES.Process(target=append_to_tenants, args=(template, names, writer, 40))
        for writer in range(3)
    ]
    with Tenants(template, most_open=3) as tenants:
        runners = [
            TenantsRunner(
                tenants,
                [placed_list()],
                workers=2,
                batch_size=7,
                lease_ttl=leases,
                tenant_ids=names,
                discover=None,
                idle=0.05,
            )
            for _ in range(2)
        ]
        try:
            for runner in runners:
                runner.start()  # following while the writers append
            for writer in writers:
                writer.start()
            for writer in writers:
                writer.join(120)
                assert writer.exitcode == 0
            logs, read_models = {}, {}
            for name in names:
                logs[name] = [e.position for e in tenants.for_tenant(name).read_all()]
                for runner in runners:
                    runner.wait_until(name, logs[name][-1], timeout=60)
                read_models[name] = read_model_of(runners[0], name)
        finally:
            for runner in runners:
                runner.close()
            if backend == "postgres":
                for name in tenants.known():
                    tenants.for_tenant(name).drop_tenant()
    for name in names:
        rows = read_models[name]
        assert len(logs[name]) == 3 * 40
        assert [position for position, *_ in rows] == logs[name]  # each event once
        assert {tenant for _, tenant, _, _ in rows} == {name}
        assert sorted((writer, n) for _, _, writer, n in rows) == [
            (writer, n) for writer in range(3) for n in range(1, 41)
        ]


def test_a_tenant_no_longer_served_can_be_dropped_while_the_others_are_served(
    tmp_path: Path,
) -> None:
    with Tenants(f"sqlite:///{tmp_path}/{{tenant}}.db", most_open=2) as tenants:
        for name in ["acme", "globex"]:
            tenants.for_tenant(name).append("order-1", [placed(name, 1)])
        with TenantsRunner(tenants, [placed_list()], discover=None, idle=0.05) as runner:
            runner.start()
            runner.wait_until("acme", 1)
            runner.wait_until("globex", 1)
            runner.stop_serving("globex")
            dropped = tenants.for_tenant("globex").drop_tenant()
            tenants.for_tenant("acme").append("order-2", [placed("acme", 2)])
            runner.wait_until("acme", 2)
            assert runner.served() == ["acme"]
    assert dropped.existed and not (tmp_path / "globex.db").exists()
    assert [n for *_, n in rows_of(tmp_path, "acme")] == [1, 2]


def test_a_tenant_dropped_while_served_is_no_longer_served(tmp_path: Path) -> None:
    with Tenants(f"sqlite:///{tmp_path}/{{tenant}}.db", most_open=2) as tenants:
        for name in ["acme", "globex"]:
            tenants.for_tenant(name).append("order-1", [placed(name, 1)])
        with TenantsRunner(tenants, [placed_list()], idle=0.05) as runner:
            runner.start()
            runner.wait_until("globex", 1)
            tenants.for_tenant("globex").drop_tenant()  # no stop_serving first
            deadline = time.monotonic() + 30
            while "globex" in runner.served():  # its next turn finds it gone
                assert time.monotonic() < deadline, "the dropped tenant is still served"
                time.sleep(0.01)
            runner.wait_until("acme", 1)
    assert not (tmp_path / "globex.db").exists()


def test_a_wait_that_times_out_names_the_tenant_and_its_laggards(tmp_path: Path) -> None:
    with Tenants(f"sqlite:///{tmp_path}/{{tenant}}.db") as tenants:
        tenants.for_tenant("acme").append("order-1", [placed("acme", 1)])
        runner = TenantsRunner(tenants, [placed_list()], discover=None)  # never started
        with runner, pytest.raises(ProjectionTimeout) as waited:
            runner.wait_until("acme", 1, timeout=0.05)
    assert (waited.value.tenant, waited.value.behind) == ("acme", {"placed": 0})
    assert str(waited.value).startswith("tenant 'acme': position 1 not reached within 0.05 s")


def test_bad_arguments_are_refused_with_what_was_wrong() -> None:
    with Tenants("memory://") as tenants:
        for kwargs, message in [
            ({"workers": 0}, "workers must be an int >= 1, not 0"),
            ({"idle": -1}, "idle must be seconds > 0, not -1"),
            ({"discover": "everywhere"}, "discover is a function"),
        ]:
            with pytest.raises(DefinitionError, match=message):
                TenantsRunner(tenants, [placed_list()], **kwargs)  # type: ignore[arg-type]
        with pytest.raises(DefinitionError, match="projection names must be unique"):
            TenantsRunner(tenants, [placed_list(), placed_list()])
        with pytest.raises(InvalidTenant, match="tenant id 'Acme' has capital letters"):
            TenantsRunner(tenants, [placed_list()], tenant_ids=["Acme"])
