"""The primary and hot standby the replica tests share (one pair a session, started when
the first test asks for it), and a database of each test's own on it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

import psycopg
import pytest

from ...postgres_server import PostgresServer
from ...replica_server import StandbyServer, caught_up, replica_pair


@dataclass(frozen=True)
class Pair:
    """A test's database on the primary, and the same database on the standby."""

    primary: PostgresServer
    standby: StandbyServer
    primary_url: str
    standby_url: str


@pytest.fixture(scope="session")
def replica_servers() -> Iterator[tuple[PostgresServer, StandbyServer]]:
    with replica_pair() as servers:
        yield servers


@pytest.fixture
def pair(replica_servers: tuple[PostgresServer, StandbyServer]) -> Pair:
    """A new database made on the primary, replayed on the standby before the test runs."""
    primary, standby = replica_servers
    name = f"replica_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(primary.url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    caught_up(primary, standby)
    return Pair(primary, standby, on_database(primary.url, name), on_database(standby.url, name))


def on_database(url: str, database: str) -> str:
    return urlunsplit(urlsplit(url)._replace(path=f"/{database}"))
