"""The Spark replay hands over to the incremental projector, and fails without harm."""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Any

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore
from eventcraft.projections import DefinitionError, Fold, ProjectionRunner

from examples.read_models import account_balances, balances, orders_by_customer

from ..processes import PROCESSES
from .histories import append, balance_rows
from .workers import keep_appending

HISTORY = [[(n % 9, kind, 100 + n)] for n, kind in enumerate(["open", "deposit"] * 30)]


def test_a_replay_while_writers_append_hands_over_to_the_live_projector(
    spark: Any, shared_store_url: str
) -> None:
    from eventcraft.projections.spark import replay

    url = shared_store_url
    with EventStore.open(url) as store:
        append(store, HISTORY)
    started = [PROCESSES.Event() for _ in range(2)]
    stop = PROCESSES.Event()
    writers = [
        PROCESSES.Process(target=keep_appending, args=(url, n, started[n], stop)) for n in range(2)
    ]
    with EventStore.open(url) as store, ProjectionRunner(store, [account_balances]) as live:
        live.start()  # follows the log in its own thread while Spark replays
        for writer in writers:
            writer.start()
        try:
            for event in started:
                assert event.wait(60), "a writer did not start"
            report = replay(account_balances, url, spark=spark)
            stop.set()
        finally:
            stop.set()
            for writer in writers:
                writer.join(60)
        assert all(writer.exitcode == 0 for writer in writers)
        head = store.high_water_mark()
        assert head > report.replayed_to, "the writers appended nothing during the replay"
        live.wait_until(head, timeout=60)
        live.stop()
        after_replay = balance_rows(live)
        (status,) = live.status()
        assert status.generation == report.generation
        live.rebuild(account_balances.name)
        assert balance_rows(live) == after_replay


def test_only_folds_are_replayed_and_only_from_stores_executors_can_reach(spark: Any) -> None:
    from eventcraft.projections.spark import replay

    with pytest.raises(DefinitionError, match="runs a Fold"):
        replay(orders_by_customer, "sqlite:///x.db", spark=spark)
    with pytest.raises(DefinitionError, match="cannot see 'memory://'"):
        replay(account_balances, "memory://", spark=spark)


@pytest.mark.parametrize("failure", ["key", "apply"])
def test_a_failing_replay_swaps_nothing_and_leaves_no_tables(
    spark: Any, shared_store_url: str, failure: str
) -> None:
    from eventcraft.projections.spark import ReplayFailed, replay

    def bad_key(event: Any) -> Any:
        return (event.stream_id,)  # a tuple: not a key Spark can carry

    def bad_apply(state: Any, event: Any) -> Any:
        if event.position == 7:
            raise ValueError("poisoned event")
        return account_balances.evolve(state, event)

    broken = Fold(
        account_balances.name,
        table=balances,
        categories="account",
        key=bad_key if failure == "key" else account_balances.key,
        initial=account_balances.initial,
        apply=bad_apply if failure == "apply" else account_balances.evolve,
    )
    with EventStore.open(shared_store_url) as store:
        append(store, HISTORY)
        with ProjectionRunner(store, [account_balances]) as runner:
            runner.catch_up()
            before, (status,) = balance_rows(runner), runner.status()
        expected = "keys that are str, int or float" if failure == "key" else "poisoned event"
        with pytest.raises(ReplayFailed, match=expected):
            replay(broken, shared_store_url, spark=spark)
        with ProjectionRunner(store, [account_balances]) as runner:
            assert balance_rows(runner) == before
            assert runner.status() == [status]
            with runner.database.reading() as connection:
                tables = sa.inspect(connection).get_table_names()
        assert [t for t in tables if t.startswith("account_balances__g")] == [
            "account_balances__g1"
        ]


def test_the_command_line_exports_and_replays(
    spark: Any, sqlite_url: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # `eventcraft-spark`, today's arguments: an alias of `eventcraft spark` now.
    from eventcraft.cli.spark_alias import alias_main as main

    with EventStore.open(sqlite_url) as store:
        append(store, HISTORY)
        head = store.high_water_mark()
    archive = str(tmp_path / "archive")
    assert (
        main(["--master", "local[2]", "export", "--store", sqlite_url, "--archive", archive]) == 0
    )
    assert f"exported {head} events (positions 1-{head})" in capsys.readouterr().out
    definition = "examples.read_models:account_balances"
    command = ["replay", definition, "--store", sqlite_url, "--archive", archive, "--quiet"]
    command += ["--master", "local[2]"]  # the option is taken after the command too
    assert main(command) == 0
    out = capsys.readouterr().out
    assert f"replayed account-balances: {head} events up to position {head}" in out
    with EventStore.open(sqlite_url) as store, ProjectionRunner(store, [account_balances]) as r:
        replayed = balance_rows(r)
        r.rebuild(account_balances.name)
        assert balance_rows(r) == replayed and len(replayed) == 9

    assert main(["replay", "examples.read_models:nothing", "--store", sqlite_url]) == 2
    assert "cannot load the fold 'examples.read_models:nothing'" in capsys.readouterr().err


def test_a_fold_is_found_in_the_folder_the_command_runs_in(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eventcraft.projections.spark.cli import load_definition

    (tmp_path / "userfolds.py").write_text(
        "from examples.read_models import account_balances as balances\n"
    )
    # A console script's path: neither the folder it runs in nor the project root.
    root = str(Path(__file__).resolve().parents[2])
    monkeypatch.setattr("sys.path", [p for p in sys.path if p not in ("", root, os.getcwd())])
    monkeypatch.syspath_prepend(root)  # for `examples`, which userfolds imports
    monkeypatch.chdir(tmp_path)
    assert load_definition("userfolds:balances").name == "account-balances"
