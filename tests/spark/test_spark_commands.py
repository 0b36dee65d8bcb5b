"""`eventcraft spark export | replay`: every argument checked before a JVM starts."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from eventcraft.eventstore import EventStore
from eventcraft.projections import ProjectionRunner

from eventcraft.cli.main import main
from eventcraft.operations import spark as operations
from eventcraft.operations.errors import InputError
from examples.read_models import account_balances

from .histories import append, balance_rows

HISTORY = [[(n % 5, kind, 100 + n)] for n, kind in enumerate(["open", "deposit"] * 10)]
ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent
FOLD = "examples.read_models:account_balances"


@dataclass(frozen=True)
class Outcome:
    code: int
    out: str
    err: str


Run = Callable[..., Outcome]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str]) -> Run:
    """`eventcraft ARGS...` in this process: its exit code and output."""

    def run_command(*arguments: str) -> Outcome:
        code = main(list(arguments))
        captured = capsys.readouterr()
        return Outcome(code, captured.out, captured.err)

    return run_command


@pytest.fixture
def no_jvm(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """Fails the test if a command asks for a SparkSession; the masters it was asked for."""
    import eventcraft.projections.spark

    asked: list[str] = []

    def refused(master: str = "local[*]", **settings: Any) -> Any:
        asked.append(master)
        pytest.fail(f"a SparkSession ({master}) was asked for before the arguments were checked")

    monkeypatch.setattr(eventcraft.projections.spark, "spark_session", refused)
    return asked


@pytest.fixture
def known_url(sqlite_url: str) -> str:
    """A SQLite store holding HISTORY."""
    with EventStore.open(sqlite_url) as store:
        append(store, HISTORY)
    return sqlite_url


def segment(archive: Path, first: int, last: int, committed: bool = True) -> None:
    folder = archive / f"from-{first:015d}-to-{last:015d}"
    folder.mkdir(parents=True)
    if committed:
        (folder / "_SUCCESS").write_text("")


def one_error_line(outcome: Outcome, code: int, *fragments: str) -> None:
    assert outcome.code == code, outcome
    assert outcome.out == ""
    lines = outcome.err.splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: "), outcome.err
    for fragment in fragments:
        assert fragment in lines[0], lines[0]


@pytest.mark.parametrize(
    "master",
    ["local", "local[1]", "local[*]", "local[4,2]", "local[*,3]", "local-cluster[2,1,1024]",
     "spark://head:7077", "spark://a:7077,b:7077", "yarn", "k8s://https://api:6443"],
)  # fmt: skip
def test_spark_master_urls_are_taken(master: str) -> None:
    assert operations.check_master(master) == master


@pytest.mark.parametrize(
    "master",
    ["local[0]", "local[]", "local[two]", "localhost", "spark://head", "spark://", "mesos://m:5050",
     "yarn-cluster", "k8s://", "", "local[*] "],
)  # fmt: skip
def test_other_masters_are_refused_by_name_before_a_jvm_starts(
    run: Run, known_url: str, tmp_path: Path, no_jvm: list[str], master: str
) -> None:
    outcome = run(
        "--store", known_url, "spark", "export", "--archive", str(tmp_path / "a"),
        "--master", master,
    )  # fmt: skip
    one_error_line(outcome, 2, f"--master {master!r} is not a Spark master URL")
    assert no_jvm == []


@pytest.mark.parametrize(
    ("url", "code", "message"),
    [
        ("postgress://db/app", 2, "no backend for 'postgress://db/app'"),
        ("postgresql://", 2, "a PostgreSQL store URL is"),
        ("events.db", 2, "no backend for 'events.db'"),
        ("memory://", 2, "executors, which cannot see 'memory://'"),
        ("sqlite:///:memory:", 2, "executors, which cannot see"),
        ("sqlite:///{tmp}/no/such/events.db", 2, "no SQLite store at"),
        ("postgresql://nobody@127.0.0.1:1/app", 1, "the store cannot be reached"),
    ],
)
def test_a_store_is_opened_before_a_jvm_starts(
    run: Run, tmp_path: Path, no_jvm: list[str], url: str, code: int, message: str
) -> None:
    url = url.format(tmp=tmp_path)
    archive = str(tmp_path / "archive")
    segment(tmp_path / "archive", 1, 5)
    for command in (["export"], ["replay", FOLD]):
        outcome = run("--store", url, "spark", *command, "--archive", archive)
        one_error_line(outcome, code, message)
    assert no_jvm == []
    assert not (tmp_path / "no").exists(), "a missing SQLite store was created"


def test_a_command_without_a_store_says_how_to_name_one(
    run: Run, tmp_path: Path, no_jvm: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("EVENTCRAFT_STORE", raising=False)
    monkeypatch.delenv("EVENTCRAFT_APP", raising=False)
    outcome = run("spark", "export", "--archive", str(tmp_path))
    one_error_line(outcome, 2, "give --store URL or set EVENTCRAFT_STORE")


def test_a_missing_or_empty_archive_is_an_error_never_an_empty_log(
    run: Run, known_url: str, tmp_path: Path, no_jvm: list[str]
) -> None:
    def replay(archive: Path | str) -> Outcome:
        return run("--store", known_url, "spark", "replay", FOLD, "--archive", str(archive))

    one_error_line(replay(tmp_path / "missing"), 2, "missing' does not exist")
    (tmp_path / "file").write_text("")
    one_error_line(replay(tmp_path / "file"), 2, "file' is not a folder")
    (tmp_path / "empty").mkdir()
    one_error_line(replay(tmp_path / "empty"), 2, "holds no committed segment")
    segment(tmp_path / "crashed", 1, 5, committed=False)
    one_error_line(replay(tmp_path / "crashed"), 2, "holds no committed segment")
    segment(tmp_path / "gap", 1, 5)
    segment(tmp_path / "gap", 7, 9)
    one_error_line(replay(tmp_path / "gap"), 2, "segment from 7 to 9 leaves a gap")
    segment(tmp_path / "ahead", 1, len(HISTORY) + 1)
    one_error_line(replay(tmp_path / "ahead"), 2, "it is not an archive of this store")
    one_error_line(replay(f"file://{tmp_path}/missing"), 2, "does not exist")
    assert no_jvm == []


def test_an_export_needs_the_archive_folders_parent(
    run: Run, known_url: str, tmp_path: Path, no_jvm: list[str]
) -> None:
    def export(archive: Path) -> Outcome:
        return run("--store", known_url, "spark", "export", "--archive", str(archive))

    one_error_line(export(tmp_path / "no" / "archive"), 2, "parent folder", "does not exist")
    (tmp_path / "file").write_text("")
    one_error_line(export(tmp_path / "file"), 2, "is a file, not a folder")
    assert no_jvm == []
    plan = operations.check_export(known_url, str(tmp_path / "new"))
    assert plan.archive == str(tmp_path / "new") and plan.high_water_mark == len(HISTORY)
    assert not (tmp_path / "new").exists(), "the check writes nothing"


def test_hadoop_archives_are_passed_through_unchecked(known_url: str) -> None:
    plan = operations.check_replay(FOLD, known_url, archive="hdfs://nn/log")
    assert plan.archive == "hdfs://nn/log"
    assert operations.check_export(known_url, "s3a://bucket/log").archive == "s3a://bucket/log"


@pytest.mark.parametrize(
    ("fold", "message"),
    [
        ("account_balances", "name the fold as module:attribute, not 'account_balances'"),
        ("examples.read_models:nothing", "cannot load the fold 'examples.read_models:nothing'"),
        ("examples.nowhere:balances", "cannot load the fold 'examples.nowhere:balances'"),
        ("examples.read_models:READ_MODELS", "is list, not a projection definition"),
        ("examples.read_models:orders_by_customer", "a Spark replay runs a Fold"),
    ],
)
def test_the_fold_is_imported_and_checked_before_a_jvm_starts(
    run: Run, known_url: str, no_jvm: list[str], fold: str, message: str
) -> None:
    one_error_line(run("--store", known_url, "spark", "replay", fold), 2, message)
    assert no_jvm == []


def test_a_fold_is_found_in_the_folder_the_command_runs_in(
    known_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "userfolds.py").write_text(
        "from examples.read_models import account_balances as balances\n"
    )
    monkeypatch.setattr("sys.path", [p for p in sys.path if p not in ("", str(ROOT), os.getcwd())])
    monkeypatch.syspath_prepend(str(ROOT))  # for `examples`, which userfolds imports
    monkeypatch.chdir(tmp_path)
    assert operations.check_replay("userfolds:balances", known_url).fold is account_balances


@pytest.mark.parametrize(
    ("arguments", "message"),
    [
        (["--partitions", "0"], "Invalid value for '--partitions': 0 is not in the range x>=1"),
        (["--partitions", "many"], "'many' is not a valid integer"),
        (["--database", "mysql://h/reads"], "--database 'mysql://h/reads': the executors"),
        (["--database", "sqlite:///:memory:"], "the executors write the read model"),
        (["--database", "postgresql://h/db?schema=a-b"], "schema must be letters"),
        (["--database", "postgresql://"], "a PostgreSQL store URL is"),
    ],
)
def test_partitions_and_the_database_url_are_checked_before_a_jvm_starts(
    run: Run, known_url: str, no_jvm: list[str], arguments: list[str], message: str
) -> None:
    outcome = run("--store", known_url, "spark", "replay", FOLD, *arguments)
    one_error_line(outcome, 2, message)
    assert no_jvm == []
    with pytest.raises(InputError, match="at least 1"):
        operations.check_replay(FOLD, known_url, partitions=0)


def test_a_postgresql_store_is_opened_and_its_high_water_mark_read(pg_url: str) -> None:
    with EventStore.open(pg_url) as store:
        append(store, HISTORY[:3])
    plan = operations.check_replay(FOLD, pg_url, database=pg_url)
    assert (plan.store, plan.database, plan.high_water_mark) == (pg_url, pg_url, 3)


def test_export_and_replay_through_the_command(
    run: Run, spark: Any, known_url: str, tmp_path: Path
) -> None:
    archive = str(tmp_path / "archive")
    head = len(HISTORY)
    export = ("--store", known_url, "spark", "export", "--archive", archive, "--master", "local[2]")
    outcome = run(*export)
    assert outcome.code == 0, outcome.err
    path = "jdbc" if known_url.startswith("postgresql") else "python"
    assert outcome.out == (
        f"exported {head} events (positions 1-{head}) to {archive}, read through {path}\n"
    )
    again = run(*export, "--json")
    assert again.code == 0 and '"events": 0' in again.out and f'"upto": {head}' in again.out
    with EventStore.open(known_url) as store:
        append(store, HISTORY[:2])
    assert run(*export, "--no-parsed-data").code == 0
    segments = sorted(Path(archive).iterdir())
    assert [(s / "_DATA_VARIANT").exists() for s in segments] == [True, False]

    replay = ("--store", known_url, "spark", "replay", FOLD, "--archive", archive, "--quiet")
    outcome = run(*replay, "--master", "local[2]", "--partitions", "2")
    assert outcome.code == 0, outcome.err
    head += 2
    assert outcome.out.startswith(f"replayed account-balances: {head} events up to position {head}")
    with EventStore.open(known_url) as store, ProjectionRunner(store, [account_balances]) as r:
        replayed = balance_rows(r)
        r.rebuild(account_balances.name)
        assert balance_rows(r) == replayed and len(replayed) == 5


def _python(code: str, *, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], cwd=cwd, capture_output=True, text=True, timeout=60
    )


def test_a_usage_error_through_the_installed_command_is_one_line(
    known_url: str, tmp_path: Path
) -> None:
    done = subprocess.run(
        [str(BIN / "eventcraft"), "--store", known_url, "spark", "replay", FOLD, "--archive",
         str(tmp_path / "missing")],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 2 and done.stdout == ""
    assert done.stderr.count("\n") == 1 and "does not exist: nothing to replay" in done.stderr


BLOCKED = "import sys; sys.modules['pyspark'] = None; from eventcraft.cli.main import main; "


def test_help_and_argument_errors_need_no_pyspark(tmp_path: Path) -> None:
    done = _python(BLOCKED + "sys.exit(main(['spark', '--help']))", cwd=ROOT)
    assert done.returncode == 0, done.stderr
    assert "export" in done.stdout and "replay" in done.stdout
    done = _python(BLOCKED + "sys.exit(main(['spark', 'replay', '--help']))", cwd=ROOT)
    assert done.returncode == 0 and "--partitions" in done.stdout, done.stderr
    done = _python(BLOCKED + "sys.exit(main(['spark', 'export', '--master', 'x']))", cwd=ROOT)
    assert done.returncode == 2 and "Missing option '--archive'" in done.stderr


def test_without_the_spark_extra_a_command_names_it(known_url: str, tmp_path: Path) -> None:
    arguments = ["--store", known_url, "spark", "export", "--archive", str(tmp_path / "a")]
    done = _python(BLOCKED + f"sys.exit(main({arguments!r}))", cwd=ROOT)
    assert done.returncode == 2, done.stderr
    assert done.stderr == (
        "error: Spark commands need the spark extra: pip install 'eventcraft[spark]'\n"
    )


@pytest.mark.parametrize(
    ("before", "after"),
    [
        (["--master", "local[2]", "export", "--store", "sqlite:///e", "--archive", "a"],
         ["--store", "sqlite:///e", "spark", "export", "--master", "local[2]", "--archive", "a"]),
        (["replay", FOLD, "--store=sqlite:///e.db", "--quiet", "--master", "yarn"],
         ["--store=sqlite:///e.db", "spark", "replay", FOLD, "--quiet", "--master", "yarn"]),
        (["--help"], ["spark", "--help"]),
    ],
)  # fmt: skip
def test_eventcraft_spark_is_an_alias_taking_todays_arguments(
    before: list[str], after: list[str]
) -> None:
    from eventcraft.cli.spark_alias import _translated

    assert _translated(before) == after


def test_the_alias_checks_before_a_jvm_starts(
    known_url: str, tmp_path: Path, no_jvm: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from eventcraft.cli.spark_alias import alias_main

    arguments = ["replay", FOLD, "--store", known_url, "--archive", str(tmp_path / "missing")]
    assert alias_main(arguments) == 2
    note, error = capsys.readouterr().err.splitlines()
    assert note.startswith("note: eventcraft-spark is now `eventcraft [--store URL] spark")
    assert error.startswith("error: the archive") and "does not exist" in error
    assert no_jvm == []


def test_the_deprecated_module_refuses_a_missing_archive(
    known_url: str, tmp_path: Path, no_jvm: list[str], capsys: pytest.CaptureFixture[str]
) -> None:
    from eventcraft.projections.spark.cli import main

    arguments = ["replay", FOLD, "--store", known_url, "--archive", str(tmp_path / "missing")]
    assert main(arguments) == 2
    note, error = capsys.readouterr().err.splitlines()
    assert "deprecated" in note and "does not exist: nothing to replay" in error
