"""Files and folders the commands write where their user says: never over the store's own
files, however the path is spelled; never over an existing file without --force; and a
file replaced with --force is replaced whole, or not at all."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from eventcraft.eventstore import EventStore

from eventcraft.operations import output_files
from eventcraft.operations.transfer import export_events

from .conftest import Outcome, Run, fill

STORE = "events.db"
STORE_URL = f"sqlite:///{STORE}"  # relative: the tests run in the store's folder
COMPANIONS = ["", "-wal", "-shm", "-journal", ".retention.lock"]
"""The store's database, and the files SQLite (and the retention lock) keep beside it."""
TRANSIENT = {f"{STORE}-wal", f"{STORE}-shm"}
"""What SQLite makes beside an open store and removes as it closes it."""

Spelling = Callable[[Path, str], str]


def relative(folder: Path, name: str) -> str:
    return name


def through_dot_dot(folder: Path, name: str) -> str:
    (folder / "sub").mkdir(exist_ok=True)
    return f"{folder}/sub/../{name}"


def through_a_symlink(folder: Path, name: str) -> str:
    (folder / "pointer").symlink_to(name)
    return "pointer"


def through_a_linked_folder(folder: Path, name: str) -> str:
    (folder / "alias").symlink_to(folder, target_is_directory=True)
    return f"alias/{name}"


SPELLINGS = [relative, through_dot_dot, through_a_symlink, through_a_linked_folder]


@pytest.fixture
def in_store_folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """The current folder, holding a SQLite store (`STORE_URL`) with HISTORY, closed."""
    monkeypatch.chdir(tmp_path)
    with EventStore.open(STORE_URL) as store:
        fill(store)
    return tmp_path


def listing(folder: Path) -> list[str]:
    return sorted(name for name in os.listdir(folder) if name not in TRANSIENT)


def events_in(url: str) -> list[str]:
    with EventStore.open(url) as store:
        return [str(event.id) for event in store.read_all()]


def refused_for_the_store(outcome: Outcome) -> None:
    assert outcome.code == 2, outcome
    assert len(outcome.err.splitlines()) == 1, outcome.err
    assert "the store's own" in outcome.err, outcome.err
    assert "Traceback" not in outcome.err


@pytest.mark.parametrize("spelling", SPELLINGS)
@pytest.mark.parametrize("companion", COMPANIONS)
@pytest.mark.parametrize("options", [(), ("--force",), ("--jobs", "2")])
def test_an_export_refuses_the_stores_own_files_however_spelled(
    run: Run, in_store_folder: Path, spelling: Spelling, companion: str, options: tuple[str, ...]
) -> None:
    events = events_in(STORE_URL)
    target = spelling(in_store_folder, STORE + companion)
    before = listing(in_store_folder)
    refused_for_the_store(run("--store", STORE_URL, "export", "--out", target, *options))
    assert listing(in_store_folder) == before, "nothing written, nothing left half-written"
    assert events_in(STORE_URL) == events


@pytest.mark.parametrize("options", [(), ("--force",)])
def test_an_export_refuses_a_hard_link_to_the_stores_database(
    run: Run, in_store_folder: Path, options: tuple[str, ...]
) -> None:
    os.link(STORE, "twin.db")
    events = events_in(STORE_URL)
    refused_for_the_store(run("--store", STORE_URL, "export", "--out", "twin.db", *options))
    assert events_in(STORE_URL) == events


def test_an_export_refuses_the_store_named_by_its_absolute_url(
    run: Run, sqlite_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with EventStore.open(sqlite_url) as store:
        fill(store)
    monkeypatch.chdir(tmp_path)
    events = events_in(sqlite_url)
    refused_for_the_store(run("--store", sqlite_url, "export", "--out", "./events.db"))
    assert events_in(sqlite_url) == events


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_an_export_refuses_an_existing_file_without_force(
    run: Run, known_url: str, tmp_path: Path, jobs: str
) -> None:
    target = tmp_path / "backup.ndjson"
    target.write_bytes(b"precious\n")
    before = listing(tmp_path)
    refused = run("--store", known_url, "export", "--jobs", jobs, "--out", str(target))
    assert refused.code == 2, refused
    assert len(refused.err.splitlines()) == 1
    assert "already exists" in refused.err and "--force" in refused.err
    assert target.read_bytes() == b"precious\n"
    assert listing(tmp_path) == before
    # A device is written as it is: there is no file to lose.
    assert run("--store", known_url, "export", "--jobs", jobs, "--out", os.devnull).code == 0


@pytest.mark.parametrize("jobs", ["1", "2"])
def test_an_export_with_force_replaces_an_existing_file(
    run: Run, known_url: str, tmp_path: Path, jobs: str
) -> None:
    target = tmp_path / "backup.ndjson"
    target.write_bytes(b"old\n")
    target.chmod(0o640)
    done = run("--store", known_url, "export", "--jobs", jobs, "--out", str(target), "--force")
    assert done.code == 0, done.err
    assert target.read_bytes() == run("--store", known_url, "export", "--out", "-").out.encode()
    assert target.stat().st_mode & 0o777 == 0o640
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("events.db")) == [
        "backup.ndjson"
    ]


def test_an_export_with_force_through_a_symlink_replaces_the_file_it_points_to(
    run: Run, known_url: str, tmp_path: Path
) -> None:
    real = tmp_path / "real.ndjson"
    real.write_bytes(b"old\n")
    (tmp_path / "latest.ndjson").symlink_to(real.name)
    done = run("--store", known_url, "export", "--out", str(tmp_path / "latest.ndjson"), "--force")
    assert done.code == 0, done.err
    assert (tmp_path / "latest.ndjson").is_symlink()
    assert real.read_bytes() == run("--store", known_url, "export", "--out", "-").out.encode()


def test_an_export_with_force_from_a_missing_store_leaves_the_file(
    run: Run, tmp_path: Path
) -> None:
    target = tmp_path / "backup.ndjson"
    target.write_bytes(b"precious\n")
    missing = f"sqlite:///{tmp_path / 'none.db'}"
    refused = run("--store", missing, "export", "--out", str(target), "--force")
    assert refused.code == 2 and "no SQLite store" in refused.err, refused
    assert target.read_bytes() == b"precious\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["backup.ndjson"]


@pytest.mark.slow
def test_an_export_to_dev_stdout_writes_the_file_the_shell_opened_but_never_the_stores(
    in_store_folder: Path,
) -> None:
    command = [sys.executable, "-m", "eventcraft", "--store", STORE_URL, "export"]
    events = events_in(STORE_URL)
    with open("out.ndjson", "wb") as redirected:
        done = subprocess.run(
            [*command, "--out", "/dev/stdout"],
            stdout=redirected,
            stderr=subprocess.PIPE,
            timeout=60,
        )
    assert done.returncode == 0, done.stderr
    with EventStore.open(STORE_URL) as store:
        whole = io.BytesIO()
        export_events(store, whole)
    assert Path("out.ndjson").read_bytes() == whole.getvalue()
    for spelling in ("/dev/stdout", "/dev/fd/1"):
        with open(STORE, "ab") as appended:  # `>>`: the shell itself keeps what was there
            refused = subprocess.run(
                [*command, "--out", spelling], stdout=appended, stderr=subprocess.PIPE, timeout=60
            )
        assert refused.returncode == 2, refused.stderr
        assert b"the store's own database" in refused.stderr
        assert events_in(STORE_URL) == events


def test_an_export_that_fails_part_way_leaves_the_file_it_would_replace(
    known_url: str, tmp_path: Path
) -> None:
    target = tmp_path / "backup.ndjson"
    target.write_bytes(b"precious\n")

    def interrupted(done: int) -> None:
        if done:
            raise KeyboardInterrupt

    with (
        EventStore.open(known_url) as store,
        pytest.raises(KeyboardInterrupt),
        output_files.new_file(str(target), store.url, force=True) as out,
    ):
        export_events(store, out, progress=interrupted)
    assert target.read_bytes() == b"precious\n"
    assert sorted(p.name for p in tmp_path.iterdir() if not p.name.startswith("events.db")) == [
        "backup.ndjson"
    ]


ARCHIVES: list[Callable[[Path], str]] = [
    lambda folder: ".",
    lambda folder: through_dot_dot(folder, "").rstrip("/"),
    lambda folder: through_a_linked_folder(folder, "").rstrip("/"),
    lambda folder: STORE,
    lambda folder: f"{STORE}-wal",
    lambda folder: through_dot_dot(folder, f"{STORE}-wal"),
    lambda folder: through_a_symlink(folder, f"{STORE}-shm"),
    lambda folder: through_a_linked_folder(folder, f"{STORE}-journal"),
]
"""Archive folders among the store's files: its own folder, and its files' names (which a
new archive folder would take), spelled in each way."""
ARCHIVE_IDS = [
    "folder",
    "folder-dot-dot",
    "folder-linked",
    "database",
    "wal",
    "wal-dot-dot",
    "shm-symlink",
    "journal-linked-folder",
]


@pytest.mark.parametrize("archive", ARCHIVES, ids=ARCHIVE_IDS)
@pytest.mark.parametrize("command", ["plan", "apply"])
def test_a_retention_run_refuses_an_archive_among_the_stores_files(
    run: Run, in_store_folder: Path, archive: Callable[[Path], str], command: str
) -> None:
    events = events_in(STORE_URL)
    folder = archive(in_store_folder)
    before = listing(in_store_folder)
    rules = ("--keep", "order:count=1", *(("--yes",) if command == "apply" else ()))
    refused = run("--store", STORE_URL, "retention", command, "--archive", folder, *rules)
    refused_for_the_store(refused)
    assert listing(in_store_folder) == before
    assert events_in(STORE_URL) == events
    # A folder beside the store is an archive as any other.
    done = run("--store", STORE_URL, "retention", command, "--archive", "archive", *rules)
    assert done.code == 0, done.err


@pytest.fixture
def no_jvm(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fails the test if a command starts Spark: every refusal here comes before it."""
    spark = pytest.importorskip("eventcraft.projections.spark")

    def refused(master: str = "local[*]", **settings: Any) -> Any:
        pytest.fail("a SparkSession was asked for: the archive was not refused")

    monkeypatch.setattr(spark, "spark_session", refused)


@pytest.mark.parametrize("archive", ARCHIVES, ids=ARCHIVE_IDS)
@pytest.mark.parametrize("as_url", [False, True], ids=["path", "file-url"])
def test_a_spark_export_refuses_an_archive_among_the_stores_files(
    run: Run,
    in_store_folder: Path,
    no_jvm: None,
    archive: Callable[[Path], str],
    as_url: bool,
) -> None:
    folder = archive(in_store_folder)
    if as_url:
        folder = f"file://{os.path.abspath(folder)}"
    before = listing(in_store_folder)
    refused_for_the_store(run("--store", STORE_URL, "spark", "export", "--archive", folder))
    assert listing(in_store_folder) == before
