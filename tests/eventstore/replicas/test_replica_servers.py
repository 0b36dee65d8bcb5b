"""The test's own primary and standby: what the replica tests stand on."""

from __future__ import annotations

import psycopg
import pytest

from ...replica_server import caught_up, in_recovery, pause_replay, resume_replay
from .conftest import Pair

# slow: A primary and a hot standby of their own, started for the module.
pytestmark = pytest.mark.slow


def test_the_standby_replays_what_the_primary_commits_and_pauses_when_told(pair: Pair) -> None:
    assert in_recovery(pair.standby_url) and not in_recovery(pair.primary_url)
    with psycopg.connect(pair.primary_url, autocommit=True) as conn:
        conn.execute("CREATE TABLE seen (n int)")
        conn.execute("INSERT INTO seen VALUES (1)")
    caught_up(pair.primary, pair.standby)
    pause_replay(pair.standby)
    try:
        with psycopg.connect(pair.primary_url, autocommit=True) as conn:
            conn.execute("INSERT INTO seen VALUES (2)")
        with psycopg.connect(pair.standby_url, autocommit=True) as conn:
            assert conn.execute("SELECT array_agg(n) FROM seen").fetchone() == ([1],)
    finally:
        resume_replay(pair.standby)
    caught_up(pair.primary, pair.standby)
    with psycopg.connect(pair.standby_url, autocommit=True) as conn:
        assert conn.execute("SELECT array_agg(n ORDER BY n) FROM seen").fetchone() == ([1, 2],)
