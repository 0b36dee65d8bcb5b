"""`eventcraft log` streams its table: the first rows reach a pipe before the log is read
whole, a pipe closed early ends the command quietly (as `head` expects), and the memory
it takes does not grow with the log, to a pipe or to a terminal."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from eventcraft.eventstore import EventStore, NewEvent

from .terminal import WAIT, on_terminal


def fill_log(url: str, events: int) -> None:
    """`events` events in streams of 100, each with a correlation id."""
    with EventStore.open(url) as store:
        for stream in range(events // 100):
            store.append(
                f"order-{stream}",
                [
                    NewEvent("OrderNoted", {"n": n}, {"correlation_id": f"checkout-{stream}"})
                    for n in range(100)
                ],
            )


@pytest.mark.slow
def test_a_pipe_gets_the_first_row_and_closing_it_ends_the_command_quietly(
    shared_store_url: str,
) -> None:
    # Far more than a pipe holds (64 KiB): the command is still writing when it is closed.
    fill_log(shared_store_url, 20_000)
    command = subprocess.Popen(
        [sys.executable, "-m", "eventcraft", "--store", shared_store_url, "log"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert command.stdout is not None and command.stderr is not None
    first = command.stdout.readline()
    command.stdout.close()  # as `head -1` does once it has its line
    try:
        command.wait(timeout=WAIT)
    finally:
        command.kill()
    error = command.stderr.read().decode()
    command.stderr.close()
    assert error == ""
    assert first.split(b"\t")[0] == b"position"


PEAK = """
import sys, tracemalloc
from eventcraft.cli.main import main
tracemalloc.start()
code = main(sys.argv[2:])
sys.stdout.flush()
with open(sys.argv[1], "w") as peak:
    peak.write(str(tracemalloc.get_traced_memory()[1]))
raise SystemExit(code)
"""


def _peak_memory(url: str, to_terminal: bool, tmp_path: Path) -> int:
    """The most memory `eventcraft log` held at once, its output going to a pipe or to a
    terminal 120 columns wide."""
    measured = tmp_path / "peak"
    program = [sys.executable, "-c", PEAK, str(measured)]
    arguments = ["--store", url, "log"]
    if to_terminal:
        on_terminal(arguments, columns=120, program=program)
    else:
        command = [*program, *arguments]
        subprocess.run(command, stdout=subprocess.DEVNULL, check=True, timeout=WAIT)
    return int(measured.read_text())


@pytest.mark.parametrize("to_terminal", [False, True], ids=["pipe", "terminal"])
@pytest.mark.slow
def test_the_memory_a_table_takes_does_not_grow_with_the_log(
    shared_store_url: str, tmp_path: Path, to_terminal: bool
) -> None:
    fill_log(shared_store_url, 4_000)
    small = _peak_memory(shared_store_url, to_terminal, tmp_path)
    fill_log(shared_store_url, 20_000)  # 24,000 now: six times as many
    large = _peak_memory(shared_store_url, to_terminal, tmp_path)
    assert large < small * 1.5, (small, large)
