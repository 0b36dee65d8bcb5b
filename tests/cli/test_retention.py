"""`eventcraft retention plan|apply`: the plan changes nothing, apply asks first, archives
and removes; rules that do not parse are a usage error."""

from __future__ import annotations

from pathlib import Path

import orjson
from eventcraft.eventstore import EventStore, NewEvent

from .conftest import Run


def _store(shared_store_url: str) -> str:
    with EventStore.open(shared_store_url) as store:
        store.append("audit-1", [NewEvent("Seen", {"i": i}) for i in range(10)])
        store.append("cart-1", [NewEvent("Added", {"i": i}) for i in range(4)])
    return shared_store_url


def test_plan_then_apply(shared_store_url: str, tmp_path: Path, run: Run) -> None:
    url = _store(shared_store_url)
    rules = (
        "--archive",
        str(tmp_path / "archive"),
        "--keep",
        "audit:count=3",
        "--truncate",
        "cart-1:3",
    )
    planned = run("--store", url, "retention", "plan", *rules, "--json")
    assert planned.code == 0, planned.err
    document = orjson.loads(planned.out)
    assert (document["up_to"], [r["events"] for r in document["removals"]]) == (14, [7, 2])
    shown = run("--store", url, "retention", "plan", *rules)
    assert "held by" not in shown.out and "audit: beyond the newest 3 of a stream" in shown.out

    asked = run("--store", url, "retention", "apply", *rules)
    assert asked.code == 2 and "pass --yes" in asked.err
    with EventStore.open(url) as store:
        assert store.low_water_mark() == 0 and len(list(store.read_all())) == 14

    done = run("--store", url, "retention", "apply", *rules, "--yes")
    assert done.code == 0, done.err
    assert "archived 14 events, removed 9" in done.out
    with EventStore.open(url) as store:
        assert store.low_water_mark() == 14 and len(list(store.read_all())) == 5


def test_rules_that_do_not_parse_are_usage_errors(
    sqlite_url: str, tmp_path: Path, run: Run
) -> None:
    url, archive = _store(sqlite_url), ("--archive", str(tmp_path / "a"))
    for rule in (("--keep", "audit:size=3"), ("--keep", "audit:age=3w"), ("--truncate", "cart")):
        failed = run("--store", url, "retention", "plan", *archive, *rule)
        assert failed.code == 2 and failed.err.startswith("error: --"), failed.err
    none = run("--store", url, "retention", "plan", *archive)
    assert none.code == 2 and "needs a policy" in none.err


def test_with_the_app_the_mark_stops_at_its_slowest_projection(
    sqlite_url: str, tmp_path: Path, run: Run
) -> None:
    from eventcraft.operations import projections

    from .apps import fill_shop, shop

    with EventStore.open(sqlite_url) as store:
        assert fill_shop(store) == 7  # order-notes stops before the event at 7
        projections.catch_up(store, shop)
    planned = run(
        "--store",
        sqlite_url,
        "--app",
        "tests.cli.apps:shop",
        "retention",
        "plan",
        "--archive",
        str(tmp_path / "a"),
        "--keep",
        "order:count=1",
        "--json",
    )
    assert planned.code == 0, planned.err
    document = orjson.loads(planned.out)
    assert (document["up_to"], document["held_by"]) == (6, "order-notes")


def test_counts_and_versions_beyond_what_the_store_holds_are_usage_errors(
    shared_store_url: str, tmp_path: Path, run: Run
) -> None:
    url, archive = _store(shared_store_url), str(tmp_path / "archive")
    for rule in (
        ("--keep", "order:count=99999999999999999999"),
        ("--keep", "order:count=²"),
        ("--truncate", "order-1:99999999999999999999"),
    ):
        outcome = run("--store", url, "retention", "plan", "--archive", archive, *rule)
        assert outcome.code == 2, outcome.err
        assert len(outcome.err.splitlines()) == 1 and rule[1] in outcome.err


def test_an_age_before_year_one_and_an_archive_that_is_a_file_are_usage_errors(
    sqlite_url: str, tmp_path: Path, run: Run
) -> None:
    url, afile = _store(sqlite_url), tmp_path / "afile"
    afile.touch()
    too_old = run(
        "--store", url, "retention", "plan", "--archive", str(tmp_path / "a"),
        "--keep", "audit:age=1000000d",
    )  # fmt: skip
    assert too_old.code == 2 and too_old.err.startswith("error: policy for 'audit'"), too_old.err
    assert "before the year 1" in too_old.err and "Traceback" not in too_old.err
    for command in ("plan", "apply"):
        filed = run(
            "--store", url, "retention", command, "--archive", str(afile),
            "--keep", "audit:count=1", *(("--yes",) if command == "apply" else ()),
        )  # fmt: skip
        assert (
            filed.code == 2
            and filed.err == f"error: the archive {afile} is a file: give a folder\n"
        )
