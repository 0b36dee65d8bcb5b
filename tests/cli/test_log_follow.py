"""`log --follow` ends after `--limit` events, as `log` does, and refuses `--until`: a
follower waits for what is appended next, which is never before a time already past.
`--since`/`--until` take ISO times with a zone too, and `--after` a number the store can
hold, refused naming the flag."""

from __future__ import annotations

import subprocess
import sys

import pytest

from .conftest import Run

FOLLOW_TIMEOUT = 30.0


def _eventcraft(*arguments: str) -> subprocess.CompletedProcess[str]:
    """Run the command in a process of its own: a follower that does not stop is a
    timeout here, not a test run that hangs."""
    return subprocess.run(
        [sys.executable, "-m", "eventcraft", *arguments],
        capture_output=True,
        text=True,
        timeout=FOLLOW_TIMEOUT,
        check=False,
    )


@pytest.mark.slow
def test_following_stops_after_the_limit(known_url: str) -> None:
    done = _eventcraft("--store", known_url, "log", "--follow", "--limit", "2", "--json")
    assert done.returncode == 0, done.stderr
    assert [line.count('"position"') for line in done.stdout.splitlines()] == [1, 1]
    assert '"position":2' in done.stdout.splitlines()[1]


@pytest.mark.slow
def test_following_with_a_filter_counts_only_the_events_it_shows(known_url: str) -> None:
    done = _eventcraft(
        "--store", known_url, "log", "--follow", "--category", "order", "--limit", "3"
    )
    assert done.returncode == 0, done.stderr
    assert len(done.stdout.splitlines()) == 3
    assert all("order-" in line for line in done.stdout.splitlines())


def test_until_and_follow_are_refused_together(known_url: str) -> None:
    done = _eventcraft("--store", known_url, "log", "--follow", "--until", "2020-01-01")
    assert done.returncode == 2
    assert done.stderr.count("\n") == 1
    assert "--until" in done.stderr and "--follow" in done.stderr


@pytest.mark.parametrize(
    "moment",
    ["2020-01-31T12:00:00Z", "2020-01-31T12:00:00+00:00", "2020-01-31T13:00:00+01:00"],
)
def test_a_time_with_a_zone_is_taken_and_read_in_utc(run: Run, known_url: str, moment: str) -> None:
    since = run("--store", known_url, "log", "--since", moment, "--json")
    assert since.code == 0, since.err
    assert len(since.out.splitlines()) == 6  # the events were all recorded after 2020
    until = run("--store", known_url, "log", "--until", moment, "--json")
    assert (until.code, until.out) == (0, ""), until.err


def test_a_time_that_is_not_one_names_the_flag(run: Run, known_url: str) -> None:
    outcome = run("--store", known_url, "log", "--since", "yesterday")
    assert outcome.code == 2
    assert "'--since'" in outcome.err and "2026-01-31T12:00:00Z" in outcome.err


@pytest.mark.parametrize("flag", ["--after", "--limit"])
def test_a_number_beyond_the_store_names_the_flag(run: Run, known_url: str, flag: str) -> None:
    outcome = run("--store", known_url, "log", flag, "99999999999999999999")
    assert outcome.code == 2
    assert f"'{flag}'" in outcome.err
    assert "must be an int" not in outcome.err
