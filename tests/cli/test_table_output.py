"""Tables never cut a value: piped, a row is a line of whole values separated by tabs; on
a terminal too narrow for a value, the value folds onto its column's next lines."""

from __future__ import annotations

from io import StringIO

import pytest
from eventcraft.eventstore import EventStore, NewEvent
from rich.console import Console

from eventcraft.cli.output import table

from .conftest import Run
from .terminal import columns_of, on_terminal

LONG_ID = "saga-order_fulfilment-0b0e8c1c-5d7a-4f39-9c61-2f3e4d5a6b7c"
CORRELATION = "checkout-7f0c2b1e-9a8d-4c3b-8e7f-6a5b4c3d2e1f"


def _with_a_long_stream(url: str) -> None:
    with EventStore.open(url) as store:
        store.append(
            LONG_ID,
            [
                NewEvent("StepCompleted", {}, {"correlation_id": CORRELATION}),
                NewEvent("SagaCompleted", {}, {"correlation_id": "a\ttab_and_a\nnewline"}),
            ],
        )


def test_piped_tables_are_tab_separated_with_every_value_whole(run: Run, known_url: str) -> None:
    _with_a_long_stream(known_url)
    shown = run("--store", known_url, "log", "--after", "6")
    assert shown.code == 0, shown.err
    header, first, second = (line.split("\t") for line in shown.out.splitlines())
    assert header == [
        "position",
        "stream",
        "version",
        "type",
        "recorded at (UTC)",
        "correlation",
    ]
    assert [first[n] for n in (0, 1, 2, 3, 5)] == ["7", LONG_ID, "1", "StepCompleted", CORRELATION]
    assert second[5] == "a\\ttab_and_a\\nnewline"  # one line, its columns where they were

    streams = run("--store", known_url, "streams", "--prefix", "saga-")
    assert [line.split("\t")[:2] for line in streams.out.splitlines()] == [
        ["stream", "version"],
        [LONG_ID, "2"],
    ]
    one = run("--store", known_url, "show", LONG_ID)
    assert [line.split("\t")[1] for line in one.out.splitlines()] == ["stream", LONG_ID, LONG_ID]


@pytest.mark.slow
def test_a_narrow_terminal_folds_a_value_and_never_cuts_it(known_url: str) -> None:
    _with_a_long_stream(known_url)
    shown = on_terminal(["--store", known_url, "log", "--after", "6"], columns=60)
    assert "…" not in shown
    assert all(len(line) <= 60 for line in shown.splitlines())
    rows = columns_of(shown)
    assert [row[1] for row in rows] == [LONG_ID, LONG_ID]
    assert [row[5] for row in rows] == [CORRELATION, "a\\ttab_and_a\\nnewline"]


def test_every_table_folds_its_values_to_the_terminals_width() -> None:
    out = Console(width=40, force_terminal=True, file=StringIO(), color_system=None)
    out.print(
        table(("#", "saga", "id", "status"), [(1, "order_fulfilment", LONG_ID, "done")], title="t")
    )
    shown = out.file.getvalue()  # type: ignore[attr-defined]
    assert "…" not in shown
    assert all(len(line) <= 40 for line in shown.splitlines())
    assert columns_of(shown) == [["1", "order_fulfilment", LONG_ID, "done"]]
