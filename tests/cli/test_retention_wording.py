"""`retention plan|apply` as a person reads it: rules shown as typed (`90d`, not a
timedelta), rules refused naming the flag and what was typed, a warning when no App's
projections hold the mark, and an archive whose parent folder is missing refused."""

from __future__ import annotations

from pathlib import Path

import pytest
from eventcraft.eventstore import EventStore, NewEvent

from .conftest import Run

NOT_CONSULTED = (
    "warning: projections not consulted: give --app to keep the mark at or below their "
    "checkpoints\n"
)


@pytest.fixture
def url(sqlite_url: str) -> str:
    with EventStore.open(sqlite_url) as store:
        store.append("audit-1", [NewEvent("Seen", {"i": i}) for i in range(3)])
    return sqlite_url


@pytest.mark.parametrize(
    ("typed", "shown"),
    [
        ("90d", "older than 90d"),
        ("12h", "older than 12h"),
        ("30m", "older than 30m"),
        ("45s", "older than 45s"),
        ("36h", "older than 36h"),
        ("48h", "older than 2d"),
    ],
)
def test_an_age_is_shown_as_typed(
    run: Run, url: str, tmp_path: Path, typed: str, shown: str
) -> None:
    outcome = run(
        "--store", url, "retention", "plan", "--archive", str(tmp_path / "a"),
        "--keep", f"audit:age={typed}",
    )  # fmt: skip
    assert outcome.code == 0, outcome.err
    assert f"audit: {shown}\t" in outcome.out  # the rule whole, then its count
    assert "day," not in outcome.out and ":00" not in outcome.out


@pytest.mark.parametrize(
    ("keep", "said"),
    [
        ("audit:count=0", "--keep 'audit:count=0': count must be a whole number from 1"),
        ("audit:age=0s", "--keep 'audit:age=0s': age must be a whole number from 1"),
        ("audit:", "--keep 'audit:': give age=30d, count=N or both"),
        (f"{'c' * 300}:count=1", f"--keep '{'c' * 300}:count=1': category"),
    ],
)
def test_a_rule_the_store_refuses_names_the_flag_and_what_was_typed(
    run: Run, url: str, tmp_path: Path, keep: str, said: str
) -> None:
    outcome = run(
        "--store", url, "retention", "plan", "--archive", str(tmp_path / "a"), "--keep", keep
    )
    assert outcome.code == 2
    assert outcome.err.startswith(f"error: {said}"), outcome.err
    assert "max_" not in outcome.err and "timedelta" not in outcome.err


@pytest.mark.parametrize("command", ["plan", "apply"])
def test_without_an_app_the_projections_are_said_not_consulted(
    run: Run, url: str, tmp_path: Path, command: str
) -> None:
    yes = ("--yes",) if command == "apply" else ()
    outcome = run(
        "--store", url, "retention", command, "--archive", str(tmp_path / "a"),
        "--keep", "audit:count=1", *yes,
    )  # fmt: skip
    assert outcome.code == 0, outcome.err
    assert outcome.err == NOT_CONSULTED


def test_an_archive_whose_parent_is_missing_is_refused(run: Run, url: str, tmp_path: Path) -> None:
    archive = tmp_path / "missing" / "parent" / "archive"
    outcome = run(
        "--store", url, "retention", "apply", "--archive", str(archive),
        "--keep", "audit:count=1", "--yes",
    )  # fmt: skip
    assert outcome.code == 2
    assert "parent folder" in outcome.err and "does not exist" in outcome.err
    assert not (tmp_path / "missing").exists()
    with EventStore.open(url) as store:
        assert store.low_water_mark() == 0


def test_a_run_records_its_ages_as_typed(run: Run, url: str, tmp_path: Path) -> None:
    """The store's record of a run (`retention runs`, `store.retention.runs()`) spells the
    age as the plan did, not as a Python timedelta ("90 days, 0:00:00")."""
    outcome = run(
        "--store", url, "retention", "apply", "--archive", str(tmp_path / "a"),
        "--keep", "audit:age=36h", "--yes",
    )  # fmt: skip
    assert outcome.code == 0, outcome.err
    with EventStore.open(url) as store:
        [recorded] = store.retention.runs()
    assert recorded.rules == "audit: older than 36h"
