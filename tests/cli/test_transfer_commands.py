"""export and import as commands: files, pipes, the real entry point, refusals and exit
codes, and exports shared among worker processes."""

from __future__ import annotations

import io
import subprocess
import sys
from pathlib import Path

import orjson
import pytest
from eventcraft.eventstore import EventStore, NewEvent

from eventcraft.operations import InputError
from eventcraft.operations.transfer import export_events

from .conftest import Run, fill
from .transfer_files import exported, without_positions


def test_an_import_into_a_store_with_a_tombstoned_stream_of_the_file_exits_1(
    run: Run, known_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "events.ndjson"
    assert run("--store", known_url, "export", "--out", str(path)).code == 0
    target = f"sqlite:///{tmp_path / 'copy.db'}"
    with EventStore.open(target) as copy:
        copy.append("shipment-1", [NewEvent("ParcelSent", {})])
        copy.delete_stream("shipment-1", tombstone=True)
    refused = run("--store", target, "import", str(path), "--yes")
    assert refused.code == 1
    assert "line 5: shipment-1 is tombstoned" in refused.err


def test_export_to_stdout_and_import_from_a_file(run: Run, known_url: str, tmp_path: Path) -> None:
    exported_ = run("--store", known_url, "export", "--out", "-")
    assert exported_.code == 0 and exported_.err == ""
    path = tmp_path / "events.ndjson"
    path.write_text(exported_.out)
    target = f"sqlite:///{tmp_path / 'copy.db'}"
    done = run("--store", target, "import", str(path), "--json")
    assert done.code == 0
    assert orjson.loads(done.out) == {"events": 6, "written": 6, "skipped": 0, "deletions": 0}
    shared = run("--store", known_url, "export", "--jobs", "2", "--out", "-")
    assert (shared.code, shared.out) == (0, exported_.out)
    refused = run("--store", known_url, "export", "--jobs", "0", "--out", "-")
    assert refused.code == 2 and "--jobs" in refused.err


def test_import_into_a_store_with_events_needs_yes_without_a_terminal(
    run: Run, known_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "events.ndjson"
    path.write_text(run("--store", known_url, "export", "--out", "-").out)
    refused = run("--store", known_url, "import", str(path))
    assert refused.code == 2
    assert "pass --yes" in refused.err and len(refused.err.splitlines()) == 1
    again = run("--store", known_url, "import", str(path), "--yes", "--json")
    assert again.code == 0
    assert orjson.loads(again.out) == {"events": 6, "written": 0, "skipped": 6, "deletions": 0}


def test_a_malformed_line_exits_2_naming_it(run: Run, sqlite_url: str, tmp_path: Path) -> None:
    path = tmp_path / "events.ndjson"
    path.write_bytes(b"\n\n{not json}\n")
    outcome = run("--store", sqlite_url, "import", str(path))
    assert outcome.code == 2
    assert outcome.err.startswith("error: line 3: not JSON")
    assert len(outcome.err.splitlines()) == 1


def test_export_and_import_refuse_unusable_files(run: Run, known_url: str, tmp_path: Path) -> None:
    missing = run("--store", known_url, "import", str(tmp_path / "none.ndjson"))
    assert (missing.code, missing.err.splitlines()[0][:22]) == (2, "error: cannot read '/t")
    unwritable = run("--store", known_url, "export", "--out", str(tmp_path / "no" / "x.ndjson"))
    assert unwritable.code == 2 and "cannot write" in unwritable.err
    backwards = run("--store", known_url, "export", "--after", "5", "--until", "2", "--out", "-")
    assert backwards.code == 2 and "--until 2 is before --after 5" in backwards.err
    no_out = run("--store", known_url, "export")
    assert no_out.code == 2 and "--out" in no_out.err


@pytest.mark.slow
def test_export_piped_into_import_through_the_real_entry_point(
    known_url: str, tmp_path: Path
) -> None:
    target = f"sqlite:///{tmp_path / 'copy.db'}"
    command = [sys.executable, "-m", "eventcraft"]
    exporter = subprocess.Popen(
        [*command, "--store", known_url, "export", "--out", "-"], stdout=subprocess.PIPE
    )
    importer = subprocess.run(
        [*command, "--store", target, "import", "-"],
        stdin=exporter.stdout,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert exporter.stdout is not None
    exporter.stdout.close()
    assert exporter.wait(timeout=60) == 0
    assert importer.returncode == 0, importer.stderr
    assert "6 written" in importer.stdout
    assert importer.stderr == ""  # no progress bar without a terminal
    with EventStore.open(known_url) as source, EventStore.open(target) as copy:
        assert without_positions(exported(copy)) == without_positions(exported(source))


@pytest.mark.slow
def test_an_export_shared_among_worker_processes_is_the_same_file(
    known_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    from eventcraft.eventstore import parallel_export

    monkeypatch.setattr(parallel_export, "SPAN", 2)  # three ranges for six events, and a gap
    with EventStore.open(known_url) as store:
        store.append("order-9", [NewEvent("OrderPlaced", {"n": n}) for n in range(3)])
        alone = exported(store)
        shared = exported(store, jobs=2)
        part = exported(store, jobs=3, after=2, until=7, categories=["order"])
        assert part == exported(store, after=2, until=7, categories=["order"])
    assert shared == alone and len(alone.splitlines()) == 9
    out = io.BytesIO()
    with EventStore.open(known_url) as store:
        report = export_events(store, out, jobs=2)
    assert (report.events, report.last_position) == (
        9,
        orjson.loads(alone.splitlines()[-1])["position"],
    )


def test_an_export_of_a_memory_store_cannot_be_shared() -> None:
    with EventStore.open("memory://") as store:
        fill(store)
        with pytest.raises(InputError, match="--jobs needs a store other processes can open"):
            exported(store, jobs=2)
        with pytest.raises(InputError, match="--jobs must be 1 or more"):
            exported(store, jobs=0)


def test_a_refused_export_leaves_the_file_it_would_have_replaced(
    run: Run, known_url: str, tmp_path: Path
) -> None:
    target = tmp_path / "backup.ndjson"
    assert run("--store", known_url, "export", "--out", str(target)).code == 0
    backup = target.read_bytes()
    for bounds in (("--after", "5", "--until", "2"), ("--until", "99999999999999999999")):
        refused = run("--store", known_url, "export", *bounds, "--out", str(target))
        assert refused.code == 2, refused.err
        assert len(refused.err.splitlines()) == 1
        assert target.read_bytes() == backup
    left = [p.name for p in tmp_path.iterdir() if not p.name.startswith("events.db")]
    assert left == ["backup.ndjson"]  # nothing half-written beside it


def test_an_event_the_store_refuses_is_named_by_its_line(
    run: Run, known: EventStore, tmp_path: Path
) -> None:
    copy_url = f"sqlite:///{tmp_path / 'copy.db'}"
    lines = exported(known).splitlines()
    lines[3] = lines[3].replace(b'"type":"OrderPlaced"', b'"type":""')
    path = tmp_path / "events.ndjson"
    path.write_bytes(b"\n".join(lines))
    outcome = run("--store", copy_url, "import", str(path))
    assert outcome.code == 2
    assert outcome.err.startswith("error: line 4: ") and "type must not be empty" in outcome.err
    assert len(outcome.err.splitlines()) == 1
