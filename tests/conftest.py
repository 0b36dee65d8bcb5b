"""Fixtures shared by every test package: stores on each backend, real databases."""

from __future__ import annotations

import os
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
    with psycopg.connect(PG_URL, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA IF EXISTS {schema} CASCADE")


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
