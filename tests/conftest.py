"""Fixtures shared by every test package: stores on each backend, real databases."""

from __future__ import annotations

import os
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

import psycopg
import pytest
from eventcraft.eventstore import EventStore

from . import otel_globals

PG_URL = os.environ.get("EVENTCRAFT_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")
IN_CI = os.environ.get("CI", "").lower() in ("1", "true", "yes")
TESTS = Path(__file__).resolve().parent

# What a test needs beyond PostgreSQL, marked here from where it is and what it uses rather
# than in each file (`make test-fast` leaves these out: -m "not spark and ...").
SPARK_FIXTURES = {"spark"}
BROKER_FIXTURES = {"rabbitmq", "jetstream", "target", "producer"}  # tests/messaging/conftest.py
BROKER_NAMES = {"check_rabbitmq", "check_nats", "RABBITMQ_URL", "NATS_URL", "PrivateNats"}
"""Names a test function reaches a broker through itself, not through a fixture."""
BROWSER_FIXTURES = {"browser", "page"}  # tests/console/test_browser.py
SHARED_SCOPES = {"session", "package", "module", "class"}
SPARK_GROUPS = 2
"""Workers the SparkSession's tests are shared among, a JVM each: on one, they were the
longest part of a parallel run."""


def _needs(item: pytest.Item) -> set[str]:
    """The markers `item` gets: `spark`, `broker`, `browser`."""
    path = Path(str(item.path))
    names = set(getattr(item, "fixturenames", ()))
    function = getattr(item, "function", None)
    code_names = set(function.__code__.co_names) if function is not None else set()
    found: set[str] = set()
    if path.is_relative_to(TESTS / "spark") or names & SPARK_FIXTURES:
        found.add("spark")
    if (path.is_relative_to(TESTS / "messaging") and names & BROKER_FIXTURES) or (
        code_names & BROKER_NAMES
    ):
        found.add("broker")
    if path == TESTS / "console" / "test_browser.py" or names & BROWSER_FIXTURES:
        found.add("browser")
    callspec = getattr(item, "callspec", None)
    if path == TESTS / "test_examples.py" and callspec and "index" in callspec.params:
        # The README's snippets, one test each: what a snippet reaches is in its text.
        snippet = item.module._readme_snippets()[callspec.params["index"]]  # type: ignore[attr-defined]
        found |= {"broker"} if re.search(r"amqp://|nats://", snippet) else set()
        found |= {"spark"} if re.search(r"pyspark|spark_session", snippet) else set()
    return found


def _uses_spark(item: pytest.Item) -> bool:
    return bool(set(getattr(item, "fixturenames", ())) & SPARK_FIXTURES)


def _group(item: pytest.Item, spark_modules: list[Path]) -> str | None:
    """The pytest-xdist group `item` runs in, on one worker (`--dist loadgroup`): the tests
    of the SparkSession share SPARK_GROUPS workers (a JVM each), a module's tests on one,
    the modules dealt out in turn; a module's tests sharing a fixture of a wider scope than
    the test (a built wheel, a browser, a server of the module's own, a process pool) set
    it up once, on one worker. Other tests, the Spark cluster's among them, go to whichever
    worker is free."""
    if _uses_spark(item):
        return f"spark-{spark_modules.index(item.path) % SPARK_GROUPS}"
    info = getattr(item, "_fixtureinfo", None)
    for definitions in info.name2fixturedefs.values() if info is not None else ():
        ours = definitions[-1]  # the one this test gets; pytest's own (tmp_path's) left out
        if ours.scope in SHARED_SCOPES and ours.func.__module__.startswith("tests."):
            return str(Path(str(item.path)).relative_to(TESTS.parent))
    return None


class _SlowFirst:
    """Hands the tests marked slow out first, in the order they came: a minute-long test
    given out last keeps one worker busy while the others have finished."""

    @pytest.hookimpl(trylast=True)  # after pytest-randomly's shuffle, which it keeps
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        items.sort(key=lambda item: item.get_closest_marker("slow") is None)


def pytest_configure(config: pytest.Config) -> None:
    config.pluginmanager.register(_SlowFirst(), "eventcraft-slow-first")
    # `-n N` alone sends tests to the workers one by one (`--dist load`): a module's shared
    # fixture would be set up on every worker, and the packaging test's build would run
    # twice at once in the same tree. With the groups (`loadgroup`) it is set up once.
    if config.pluginmanager.hasplugin("xdist") and config.getoption("dist", "no") == "load":
        config.option.dist = "loadgroup"
    # A worker reads --dist from the command line, where `-n N` alone does not give it:
    # told by pytest_configure_node below, it names its tests' groups all the same.
    if getattr(config, "workerinput", {}).get("eventcraft_loadgroup"):
        config.option.loadgroup = True


@pytest.hookimpl(optionalhook=True)  # pytest-xdist's hook: absent with `-p no:xdist`
def pytest_configure_node(node: Any) -> None:
    node.workerinput["eventcraft_loadgroup"] = node.config.getoption("dist") == "loadgroup"


@pytest.hookimpl(tryfirst=True)  # before pytest-xdist reads the groups
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    distributed = config.pluginmanager.hasplugin("xdist")  # not with `-p no:xdist`
    spark_modules = sorted({item.path for item in items if _uses_spark(item)})
    for item in items:
        needs = _needs(item)
        for name in sorted(needs):
            item.add_marker(name)
        group = _group(item, spark_modules) if distributed else None
        if group is not None and not any(item.iter_markers("xdist_group")):
            item.add_marker(pytest.mark.xdist_group(group))


def missing(message: str) -> NoReturn:
    """A service or tool a test needs is not there: the test fails in CI, which must run
    every test, and is skipped elsewhere, saying what to install (`make services`)."""
    if IN_CI:
        pytest.fail(f"{message} (CI must run this test)")
    pytest.skip(f"{message} (`make services` sets it up; CI fails here instead)")


def _need_postgres() -> None:
    try:
        psycopg.connect(PG_URL, connect_timeout=5).close()
    except psycopg.OperationalError as error:
        missing(f"PostgreSQL at {PG_URL} is not reachable: {error}")


@pytest.fixture(autouse=True)
def _no_telemetry_left() -> Iterator[None]:
    """A tracer or meter provider a test set (a README snippet's) does not outlive it."""
    yield
    otel_globals.reset()


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A store URL on the test server, in a schema of its own that is dropped afterwards."""
    _need_postgres()
    schema = f"t_{uuid.uuid4().hex[:12]}"
    yield f"{PG_URL}?schema={schema}"
    drop_schema(schema)


_dropping: list[psycopg.Connection[Any]] = []
"""One connection per test process for the schemas' drops: a new one each would cost a
connection's start for each of the suite's thousands of PostgreSQL tests."""


def pytest_sessionfinish(session: pytest.Session) -> None:
    for conn in _dropping:
        conn.close()
    _dropping.clear()


def drop_schema(schema: str) -> None:
    """Drop a test's `schema` (a name the suite made) with everything in it, and the
    tables' schema of tenants side by side in it (`{schema}__rows`), if it has one."""
    if _dropping and _dropping[0].closed:
        _dropping.clear()
    if not _dropping:
        _dropping.append(psycopg.connect(PG_URL, autocommit=True))
    try:
        _dropping[0].execute(f"DROP SCHEMA IF EXISTS {schema}, {schema}__rows CASCADE")
    except psycopg.OperationalError:  # the connection was lost: once more, on a new one
        _dropping.pop().close()
        with psycopg.connect(PG_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA IF EXISTS {schema}, {schema}__rows CASCADE")


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'events.db'}"


@pytest.fixture(params=["memory", "sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest) -> str:
    """A URL for a new, empty store on each backend in turn."""
    if request.param == "memory":
        return "memory://"
    name = "sqlite_url" if request.param == "sqlite" else "pg_url"
    return str(request.getfixturevalue(name))


@pytest.fixture(params=["sqlite", "postgres"])
def shared_store_url(request: pytest.FixtureRequest) -> str:
    """A URL several processes can open at once: the SQL backends."""
    name = "sqlite_url" if request.param == "sqlite" else "pg_url"
    return str(request.getfixturevalue(name))


@pytest.fixture
def store(store_url: str) -> Iterator[EventStore]:
    with EventStore.open(store_url) as opened:
        yield opened


@pytest.fixture(scope="session")
def spark() -> Iterator[Any]:
    """The test run's one SparkSession (local, two cores, settings for fast start)."""
    try:
        from eventcraft.projections.spark import LOCAL_SETTINGS, spark_session
    except ImportError as error:
        missing(f"pyspark is not installed: {error}")
    session = spark_session("local[2]", app_name="eventcraft-tests", settings=LOCAL_SETTINGS)
    yield session
    session.stop()
