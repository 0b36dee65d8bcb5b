"""An import checks the whole file before it writes: a fault anywhere in it, however
late, is one error naming its line, and the store is left as it was, on every backend,
from a file or from a pipe; what only the store can find still leaves an import that
resumes once the fault is fixed."""

from __future__ import annotations

import io
import os
import subprocess
import sys
import threading
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO

import orjson
import pytest
from eventcraft.eventstore import EventStore, NewEvent

from eventcraft.operations import InputError, Problems
from eventcraft.operations.transfer import export_events, import_events

from .conftest import Run

STREAMS, EACH = 40, 3
"""The export the tests break: 120 lines, 40 streams of 3, each stream one append on
import, so an import that wrote as it read would have written 39 appends before the
last stream."""

LATE = STREAMS * EACH - 1
"""The line the faults are put on: the second event of the last stream."""

Fault = Callable[[bytes], bytes]

FAULTS: dict[str, tuple[Fault, int, str]] = {
    "bad JSON": (lambda line: line[:-5], LATE, "not JSON"),
    "missing field": (lambda line: line.replace(b'"type"', b'"kind"'), LATE, "missing type"),
    "bad UUID": (lambda line: line.replace(b'"id":"', b'"id":"zz'), LATE, "hexadecimal UUID"),
    "not an object": (lambda line: b"[1, 2]", LATE, "JSON object"),
    "bad tags": (
        lambda line: line.replace(b'"tags":[]', b'"tags":[7]'),
        LATE,
        "tags must be a list of str",
    ),
    "empty type": (
        lambda line: line.replace(b'"type":"OrderNoted"', b'"type":""'),
        LATE,
        "type must not be empty",
    ),
    "version gap": (
        lambda line: line.replace(b'"version":2', b'"version":3'),
        LATE,
        r"'order-39' version 3 does not follow version 1 \(line 118\)",
    ),
    "line twice": (
        lambda line: line + b"\n" + line,
        LATE + 1,
        r"'order-39' version 2 does not follow version 2 \(line 119\)",
    ),
    "NUL in data": (
        lambda line: line.replace(b'"data":{', b'"data":{"x":"\\u0000",'),
        LATE,
        "NUL character",
    ),
    "too large": (
        lambda line: line.replace(b'"data":{', b'"data":{"x":"' + b"y" * 5000 + b'",'),
        LATE,
        r"limit is 4096 \(max_event_bytes\)",
    ),
}
"""Each fault, the line the error names, and what it says."""


@pytest.fixture
def export() -> list[bytes]:
    """The lines of an export of STREAMS streams of EACH events, stream after stream."""
    with EventStore.open("memory://") as source:
        for n in range(STREAMS):
            source.append(f"order-{n}", [NewEvent("OrderNoted", {"n": v}) for v in range(EACH)])
        out = io.BytesIO()
        export_events(source, out)
    return out.getvalue().splitlines(keepends=True)


def broken(lines: list[bytes], fault: Fault, at: int = LATE) -> bytes:
    """The export with line `at` (from 1) broken by `fault`."""
    changed = list(lines)
    changed[at - 1] = fault(lines[at - 1].rstrip(b"\n")) + b"\n"
    return b"".join(changed)


def open_target(url: str) -> EventStore:
    return EventStore.open(url, max_event_bytes=4096)


@pytest.mark.parametrize("fault", list(FAULTS), ids=list(FAULTS))
def test_a_fault_late_in_a_file_is_named_and_nothing_is_written(
    export: list[bytes], store_url: str, fault: str
) -> None:
    breaking, line, message = FAULTS[fault]
    with open_target(store_url) as target:
        with pytest.raises(InputError, match=f"^line {line}: .*{message}.*nothing was imported"):
            import_events(target, io.BytesIO(broken(export, breaking)))
        assert target.high_water_mark() == 0
        assert list(target.read_all()) == []


def test_the_first_fault_of_a_file_is_the_one_named(export: list[bytes]) -> None:
    # An event too large on line 5, whose append is made from lines 4 to 6, and bad JSON
    # on line 6: the check of line 5's batch comes first.
    data = broken(export, FAULTS["too large"][0], at=5)
    data = broken(data.splitlines(keepends=True), FAULTS["bad JSON"][0], at=6)
    with open_target("memory://") as target, pytest.raises(InputError, match=r"^line 5: "):
        import_events(target, io.BytesIO(data))


def test_a_fixed_file_then_imports_whole(export: list[bytes], sqlite_url: str) -> None:
    with open_target(sqlite_url) as target:
        with pytest.raises(InputError):
            import_events(target, io.BytesIO(broken(export, FAULTS["bad JSON"][0])))
        report = import_events(target, io.BytesIO(b"".join(export)))
        assert (report.events, report.written, report.skipped) == (120, 120, 0)


def test_a_stream_the_file_begins_part_way_is_left_to_the_store(export: list[bytes]) -> None:
    """The first line of a stream may have any version (an export --after cuts streams):
    whether the store holds what comes before is the store's to say."""
    tail = b"".join(export[LATE - 1 :])
    with open_target("memory://") as target:
        with pytest.raises(Problems, match=r"^line 1: order-39 version 2 cannot follow"):
            import_events(target, io.BytesIO(tail))
        target.append("order-39", [NewEvent("OrderNoted", {"n": 0})])
        assert import_events(target, io.BytesIO(tail)).written == 2


def test_an_id_the_store_holds_elsewhere_stops_the_import_which_resumes_once_fixed(
    export: list[bytes], shared_store_url: str
) -> None:
    """Found only by the store, while writing: what came before stays, and the same
    import run again once the fault is fixed completes the copy."""
    taken = uuid.UUID(orjson.loads(export[LATE - 1])["id"])
    with open_target(shared_store_url) as target:
        target.append("other-1", [NewEvent("Elsewhere", {}, id=taken)])
        with pytest.raises(Problems, match=f"^line {LATE}: event {taken} is already in the store"):
            import_events(target, io.BytesIO(b"".join(export)))
        assert target.high_water_mark() == LATE - 1  # other-1's event, and the lines before
        fixed = b"".join(export).replace(str(taken).encode(), str(uuid.uuid4()).encode())
        report = import_events(target, io.BytesIO(fixed))
        assert (report.written, report.skipped) == (EACH, LATE - 2)


@contextmanager
def piped(data: bytes) -> Iterator[IO[bytes]]:
    """`data` as the read end of a pipe, which cannot be read twice."""
    read, write = os.pipe()

    def feed() -> None:
        with os.fdopen(write, "wb") as sink:
            sink.write(data)

    feeder = threading.Thread(target=feed)
    feeder.start()
    with os.fdopen(read, "rb") as source:
        yield source
    feeder.join()


def test_a_pipe_is_checked_whole_before_anything_is_written(
    export: list[bytes], sqlite_url: str
) -> None:
    with open_target(sqlite_url) as target:
        with piped(broken(export, FAULTS["NUL in data"][0])) as source:
            assert not source.seekable()
            with pytest.raises(InputError, match=f"^line {LATE}: .*NUL"):
                import_events(target, source)
        assert target.high_water_mark() == 0
        checked: list[int] = []
        written: list[int] = []
        with piped(b"".join(export)) as source:
            report = import_events(target, source, checking=checked.append, progress=written.append)
        assert report.written == 120
        size = len(b"".join(export))
        assert checked[-1] == written[-1] == size
        assert checked == sorted(checked) and written == sorted(written)


def test_a_file_is_read_again_from_where_it_was_handed_over(export: list[bytes]) -> None:
    source = io.BytesIO(b"# not a line of the export\n" + b"".join(export))
    source.readline()
    with open_target("memory://") as target:
        assert import_events(target, source).written == 120


# --- the command ----------------------------------------------------------------------


def test_the_command_exits_2_naming_the_line_and_the_store_is_untouched(
    run: Run, export: list[bytes], shared_store_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "events.ndjson"
    path.write_bytes(broken(export, FAULTS["version gap"][0]))
    outcome = run("--store", shared_store_url, "import", str(path))
    assert outcome.code == 2
    assert outcome.err.startswith(f"error: line {LATE}: 'order-39' version 3 does not follow")
    assert len(outcome.err.splitlines()) == 1 and "Traceback" not in outcome.err
    with EventStore.open(shared_store_url) as store:
        assert store.high_water_mark() == 0


@pytest.mark.slow
def test_standard_input_is_checked_whole_by_the_real_entry_point(
    export: list[bytes], tmp_path: Path
) -> None:
    target = f"sqlite:///{tmp_path / 'copy.db'}"
    command = [sys.executable, "-m", "eventcraft", "--store", target, "import", "-"]
    refused = subprocess.run(
        command,
        input=broken(export, FAULTS["bad JSON"][0]),
        capture_output=True,
        timeout=60,
    )
    assert refused.returncode == 2
    err = refused.stderr.decode()
    assert err.startswith(f"error: line {LATE}: not JSON") and len(err.splitlines()) == 1
    with EventStore.open(target) as store:
        assert store.high_water_mark() == 0
    done = subprocess.run(command, input=b"".join(export), capture_output=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert b"120 written" in done.stdout


def test_the_command_says_the_file_is_checked_first(run: Run) -> None:
    shown = " ".join(run("import", "--help").out.split())  # as wrapped for any width
    assert "checked whole before anything is written" in shown
    assert "copied to a temporary file (in TMPDIR)" in shown


def test_without_the_check_an_import_writes_up_to_the_line_at_fault_and_resumes_once_fixed(
    run: Run, export: list[bytes], sqlite_url: str, tmp_path: Path
) -> None:
    path = tmp_path / "events.ndjson"
    path.write_bytes(broken(export, FAULTS["bad JSON"][0]))
    outcome = run("--store", sqlite_url, "import", str(path), "--no-check")
    assert outcome.code == 2
    assert outcome.err.startswith(f"error: line {LATE}: not JSON")
    with EventStore.open(sqlite_url) as store:
        written = store.high_water_mark()
    assert 0 < written < LATE  # the batches before the line's
    path.write_bytes(b"".join(export))
    again = run("--store", sqlite_url, "import", str(path), "--no-check", "--yes")
    assert again.code == 0, again.err
    with EventStore.open(sqlite_url) as store:
        assert store.high_water_mark() == len(export)
