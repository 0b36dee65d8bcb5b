"""Reading the log from the command line: streams, show, log, event, trace, stats."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import uuid
from pathlib import Path

import orjson
import pytest
from eventcraft.eventstore import EventStore, NewEvent

from eventcraft.operations import NotFound
from eventcraft.operations import log as operations
from eventcraft.operations.documents import event_document
from eventcraft.operations.log import LogFilter

from .conftest import HISTORY, Run

ROOT = Path(__file__).resolve().parents[2]


def _ndjson(text: str) -> list[dict[str, object]]:
    return [json.loads(line) for line in text.splitlines()]


# The operations, on every backend.


def test_streams_list_each_stream_with_its_version_and_times(known: EventStore) -> None:
    found = operations.streams(known, category="order", after=None, limit=10)
    assert [(s.stream_id, s.version) for s in found] == [("order-1", 2), ("order-2", 2)]
    first, last = found[0].first_recorded_at, found[0].last_recorded_at
    assert first is not None and last is not None and first <= last
    paged = operations.streams(known, category=None, after="order-2", limit=1)
    assert [s.stream_id for s in paged] == ["payment-1"]


def test_streams_are_found_by_id_prefix(known: EventStore) -> None:
    def ids(prefix: str, **options: object) -> list[str]:
        found = operations.stream_search(
            known, prefix=prefix, category=None, after=None, limit=10, **options
        )
        return [s.stream_id for s in found]

    assert ids("order-") == ["order-1", "order-2"]
    assert ids("order-2") == ["order-2"]
    assert ids("p") == ["payment-1"]
    assert ids("zzz") == []
    after = operations.stream_search(known, prefix="order", category=None, after="order-1", limit=5)
    assert [s.stream_id for s in after] == ["order-2"]
    assert [s.version for s in after] == [2]


def test_the_log_filters_by_category_type_and_correlation(known: EventStore) -> None:
    def types(**where: object) -> list[str]:
        chosen = LogFilter(**where)  # type: ignore[arg-type]
        return [e.type for e in operations.log_events(known, after=0, limit=None, where=chosen)]

    assert types() == [row[1] for row in HISTORY]
    assert types(categories=["order"], types=["OrderPlaced"]) == ["OrderPlaced", "OrderPlaced"]
    assert types(correlation_id="checkout-2") == ["OrderPlaced", "OrderCancelled"]
    limited = operations.log_events(known, after=2, limit=2, where=LogFilter())
    assert [e.position for e in limited] == [3, 4]


def test_the_log_filters_by_tags_carried_all_with_the_other_filters(
    known: EventStore, monkeypatch: pytest.MonkeyPatch
) -> None:
    def positions(**where: object) -> list[int]:
        chosen = LogFilter(**where)  # type: ignore[arg-type]
        found = operations.log_events(known, after=0, limit=None, where=chosen)
        return [e.position for e in found]

    monkeypatch.setattr(operations, "TAGGED_PAGE", 2)  # several reads by query
    assert positions(tags=["customer:ann"]) == [1, 2, 3]
    assert positions(tags=["customer:bob", "order:2"]) == [4, 6]
    assert positions(tags=["customer:bob", "order:1"]) == []
    assert positions(tags=["customer:ann"], types=["OrderPaid", "PaymentTaken"]) == [2, 3]
    assert positions(tags=["customer:ann"], categories=["order"]) == [1, 3]
    assert positions(tags=["customer:ann"], correlation_id="checkout-2") == []
    limited = operations.log_events(known, after=1, limit=1, where=LogFilter(tags=["order:1"]))
    assert [e.position for e in limited] == [2]


def test_an_event_is_found_by_position_or_id(known: EventStore) -> None:
    by_position = operations.find_event(known, "3")
    assert operations.find_event(known, str(by_position.id)) == by_position
    assert by_position.type == "OrderPaid"
    with pytest.raises(NotFound, match="no event at position 99"):
        operations.find_event(known, "99")
    with pytest.raises(NotFound, match="no event with id"):
        operations.find_event(known, str(uuid.uuid4()))


def test_a_trace_is_the_correlations_causation_tree(known: EventStore) -> None:
    (root,) = operations.trace(known, "checkout-1")
    shape = []
    node = root
    while True:
        shape.append(node.event.type)
        if not node.caused:
            break
        (node,) = node.caused
    assert shape == ["OrderPlaced", "PaymentTaken", "OrderPaid", "ParcelSent"]
    with pytest.raises(NotFound):
        operations.trace(known, "no-such-correlation")


def test_stats_count_the_log_by_category_and_type(known: EventStore) -> None:
    found = operations.stats(known)
    assert (found.head, found.high_water_mark, found.events) == (6, 6, 6)
    assert found.by_category == {"order": 4, "payment": 1, "shipment": 1}
    assert found.by_type["OrderPlaced"] == 2 and sum(found.by_type.values()) == 6


def test_following_the_log_sees_later_appends_and_stops_when_told(known: EventStore) -> None:
    stop = threading.Event()
    followed = operations.follow(
        known, after=5, where=LogFilter(categories=["order"]), stopped=stop.is_set
    )
    assert next(followed).position == 6  # already there

    def append_later() -> None:
        known.append("invoice-9", [NewEvent("Ignored", {})])  # filtered out, passed
        known.append("order-9", [NewEvent("OrderPlaced", {})])

    threading.Thread(target=append_later).start()
    later = next(followed)
    assert (later.stream_id, later.position) == ("order-9", 8)
    stop.set()
    assert list(followed) == []


# The commands, against stores the command opens by URL.


def test_show_and_log_print_tables_and_json_that_match_the_store(known_url: str, run: Run) -> None:
    shown = run("--store", known_url, "show", "order-1")
    assert shown.code == 0 and "OrderPlaced" in shown.out and "OrderPaid" in shown.out
    with EventStore.open(known_url) as store:
        stored = [orjson.loads(orjson.dumps(event_document(e))) for e in store.read_all()]
    as_json = run("--store", known_url, "log", "--json")
    assert as_json.code == 0 and _ndjson(as_json.out) == stored
    one = run("--store", known_url, "event", "2", "--json")
    assert _ndjson(one.out) == [stored[1]]
    streams = run("--store", known_url, "streams", "--json")
    listed = json.loads(streams.out)
    assert [s["stream_id"] for s in listed][:2] == ["order-1", "order-2"]
    stats = json.loads(run("--store", known_url, "stats", "--json").out)
    assert (stats["events"], stats["by_category"]["order"]) == (6, 4)
    tree = run("--store", known_url, "trace", "checkout-1")
    assert tree.code == 0
    assert (
        tree.out.index("OrderPlaced")
        < tree.out.index("PaymentTaken")
        < tree.out.index("ParcelSent")
    )


def test_event_and_log_show_tags_and_log_takes_tags_to_filter_by(
    known_url: str, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "200")  # a table row on one line
    one = run("--store", known_url, "event", "4")
    assert one.code == 0 and '"tags": [' in one.out and '"customer:bob"' in one.out
    assert _ndjson(run("--store", known_url, "event", "4", "--json").out)[0]["tags"] == [
        "customer:bob",
        "order:2",
    ]
    table = run("--store", known_url, "log", "--tag", "customer:bob")
    assert table.code == 0
    assert "OrderPlaced [customer:bob, order:2]" in table.out
    assert "OrderCancelled [customer:bob, order:2]" in table.out
    assert "PaymentTaken" not in table.out
    both = run("--store", known_url, "log", "--tag", "order:1", "--tag", "customer:ann", "--json")
    assert [d["type"] for d in _ndjson(both.out)] == ["OrderPlaced", "PaymentTaken", "OrderPaid"]
    bad = run("--store", known_url, "log", "--tag", "")
    assert bad.code == 2 and "must not be empty" in bad.err and bad.err.count("\n") == 1


def test_streams_by_prefix_and_the_log_by_time_from_the_command_line(
    known_url: str, run: Run
) -> None:
    found = run("--store", known_url, "streams", "--prefix", "order-", "--json")
    assert [s["stream_id"] for s in json.loads(found.out)] == ["order-1", "order-2"]
    everything = run("--store", known_url, "log", "--since", "2000-01-01", "--json")
    assert len(_ndjson(everything.out)) == len(HISTORY)
    nothing = run("--store", known_url, "log", "--until", "2000-01-01T00:00", "--json")
    assert (nothing.code, nothing.out) == (0, "")
    bad = run("--store", known_url, "log", "--since", "yesterday")
    assert bad.code == 2 and "'yesterday' is not a time" in bad.err


@pytest.mark.parametrize(
    ("arguments", "message", "code"),
    [
        (["show", "nope-1"], "error: no stream 'nope-1' in the store", 2),
        (["event", "99"], "error: no event at position 99", 2),
        (["event", "x"], "error: 'x' is neither a position nor an event id", 2),
        (["trace", "none"], "error: no event with correlation id 'none'", 2),
        (["log", "--limit", "0"], "error: Invalid value for '--limit'", 2),
        (["log", "--after", "-1"], "error: Invalid value for '--after'", 2),
        (["shw", "order-1"], "error: No such command 'shw'.", 2),
    ],
)
def test_each_usage_error_is_one_line_and_exit_2(
    known_url: str, run: Run, arguments: list[str], message: str, code: int
) -> None:
    outcome = run("--store", known_url, *arguments)
    assert outcome.code == code
    assert outcome.err.startswith(message) and outcome.err.count("\n") == 1
    assert outcome.out == ""


def test_only_the_debug_option_shows_a_traceback_not_an_argument_spelled_like_it(
    known_url: str, run: Run
) -> None:
    named = run("--store", known_url, "show", "--", "--debug")  # a stream called "--debug"
    assert (named.code, named.err) == (2, "error: no stream '--debug' in the store\n")
    with pytest.raises(LookupError):  # asked for: the error itself, traceback and all
        run("--debug", "--store", known_url, "show", "order-44")


def test_a_store_must_be_named_and_reachable(run: Run, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("EVENTCRAFT_STORE", raising=False)
    monkeypatch.delenv("EVENTCRAFT_APP", raising=False)
    unnamed = run("stats")
    assert (unnamed.code, unnamed.err) == (
        2,
        "error: name the store: give --store URL or set EVENTCRAFT_STORE\n",
    )
    bogus = run("--store", "bogus://x", "stats")
    assert bogus.code == 2 and bogus.err.startswith("error: no backend for 'bogus://x'")
    down = run("--store", "postgresql://postgres@127.0.0.1:1/none", "stats")
    assert down.code == 1 and down.err.startswith("error: the store cannot be reached:")
    assert down.err.count("\n") == 1


def test_the_store_url_may_come_from_the_environment(
    known_url: str, run: Run, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("EVENTCRAFT_STORE", known_url)
    assert json.loads(run("stats", "--json").out)["events"] == 6


@pytest.mark.slow
def test_the_installed_command_prints_ndjson_and_one_line_errors(known_url: str) -> None:
    def eventcraft(*arguments: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-m", "eventcraft", "--store", known_url, *arguments],
            capture_output=True,
            text=True,
            cwd=ROOT,
        )

    listed = eventcraft("log", "--category", "order", "--json")
    assert listed.returncode == 0
    assert [e["type"] for e in _ndjson(listed.stdout)] == [
        "OrderPlaced",
        "OrderPaid",
        "OrderPlaced",
        "OrderCancelled",
    ]
    missing = eventcraft("show", "nope-1")
    assert (missing.returncode, missing.stderr) == (2, "error: no stream 'nope-1' in the store\n")
    assert "Traceback" not in missing.stderr
    helped = eventcraft("log", "--help")
    assert helped.returncode == 0 and "eventcraft log --category order" in helped.stdout


def test_a_sqlite_store_that_does_not_exist_is_refused_unless_the_command_writes(
    run: Run, tmp_path: Path
) -> None:
    missing = tmp_path / "typo" / "evnets.db"
    url = f"sqlite:///{missing}"
    for command in (("verify",), ("stats",), ("log",), ("event", "1"), ("console", "--port", "0")):
        outcome = run("--store", url, *command)
        assert outcome.code == 2, command
        assert outcome.err == (
            f"error: no SQLite store at '{missing}': check the path (only import creates a store)\n"
        )
    assert not (tmp_path / "typo").exists()
    empty = tmp_path / "empty.ndjson"
    empty.write_bytes(b"")
    assert run("--store", url, "import", str(empty)).code == 0
    assert not (tmp_path / "typo").exists()  # nothing to import: no store (test_import_wording)


def test_numbers_beyond_what_the_store_holds_are_usage_errors(run: Run, known_url: str) -> None:
    for arguments, expected in (
        (("event", "²"), "error: '²' is neither a position nor an event id"),
        (
            ("event", "99999999999999999999"),
            "error: a position must be a whole number from 0 to 9223372036854775807, "
            "not '99999999999999999999'",
        ),
    ):
        outcome = run("--store", known_url, *arguments)
        assert (outcome.code, outcome.err) == (2, expected + "\n")
