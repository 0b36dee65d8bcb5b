"""`eventcraft delete-stream STREAM [--tombstone]`: shows what it will do, asks unless
--yes, re-checks the version it showed, and never shows a traceback for bad input; the
operations it calls, on every backend."""

from __future__ import annotations

import orjson
import pytest
from eventcraft.eventstore import EventStore, NewEvent, StreamTombstoned, WrongExpectedVersion

from eventcraft.operations import deletion as operations
from eventcraft.operations.errors import InputError, NotFound

from .conftest import Run


def test_the_operations_plan_then_delete_what_the_plan_showed(known: EventStore) -> None:
    planned = operations.plan(known, "order-1")
    assert (planned.version, planned.tombstone, planned.deleted) == (2, False, None)
    assert "Delete stream 'order-1' at version 2" in operations.describe(planned)
    known.append("order-1", [NewEvent("OrderShipped", {})])  # written since it was shown
    with pytest.raises(WrongExpectedVersion):
        operations.delete(known, "order-1", expected_version=planned.version)
    assert known.stream_version("order-1") == 3

    done = operations.delete(known, "order-1", expected_version=3)
    assert (done.version, done.tombstone) == (3, False)
    with pytest.raises(NotFound, match="deleted already"):
        operations.plan(known, "order-1")
    closing = operations.plan(known, "order-1", tombstone=True)
    assert (closing.version, closing.deleted) == (0, done)
    assert "can never be written again" in operations.describe(closing)
    operations.delete(known, "order-1", expected_version=closing.version, tombstone=True)
    with pytest.raises(InputError, match="tombstoned already"):
        operations.plan(known, "order-1", tombstone=True)
    with pytest.raises(NotFound, match="no events"):
        operations.plan(known, "order-9")


def test_delete_stream_asks_then_hides_the_stream(known_url: str, run: Run) -> None:
    store_option = ("--store", known_url)
    asked = run(*store_option, "delete-stream", "order-1")
    assert asked.code == 2 and "pass --yes" in asked.err
    assert "order-1" in run(*store_option, "streams").out

    done = run(*store_option, "delete-stream", "order-1", "--yes")
    assert done.code == 0, done.err
    assert "deleted 'order-1' at version 2" in done.out
    assert "order-1" not in run(*store_option, "streams").out
    assert "order-1" in run(*store_option, "log", "--json").out  # the log keeps it
    again = run(*store_option, "delete-stream", "order-1", "--yes")
    assert again.code == 2 and "deleted already" in again.err
    assert "Traceback" not in again.err


def test_delete_stream_tombstone_json_and_bad_input(known_url: str, run: Run) -> None:
    store_option = ("--store", known_url)
    done = run(*store_option, "delete-stream", "order-2", "--tombstone", "--yes", "--json")
    assert done.code == 0, done.err
    shown = orjson.loads(done.out)
    assert (shown["stream_id"], shown["version"], shown["tombstone"]) == ("order-2", 2, True)
    with EventStore.open(known_url) as store, pytest.raises(StreamTombstoned):
        store.append("order-2", [NewEvent("OrderPlaced", {})])

    refused = [
        (("delete-stream", "order-2", "--tombstone", "--yes"), "tombstoned already", 2),
        (("delete-stream", "", "--yes"), "stream id", 2),
        (("delete-stream", "payment-1", "--expected-version", "7", "--yes"), "version", 1),
        (("delete-stream", "payment-1", "--expected-version", "-1", "--yes"), "-1", 2),
    ]
    for arguments, complaint, code in refused:
        outcome = run(*store_option, *arguments)
        assert (outcome.code, complaint in outcome.err) == (code, True), outcome.err
        assert "Traceback" not in outcome.err
    with EventStore.open(known_url) as store:
        assert store.stream_version("payment-1") == 1
