"""`eventcraft messaging ...`: relays, and the error store seen, resent and discarded from
a terminal, and the operations the commands call."""

from __future__ import annotations

import orjson
import pytest
from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.messaging import Inbox, IncomingMessage, RabbitMQPublisher, Relay

from eventcraft.cli.main import main
from eventcraft.operations import messaging as operations
from eventcraft.operations.errors import NotFound

from ..ports import free_port
from .brokers import wait_for
from .workers import order_received


def run(capsys: pytest.CaptureFixture[str], *arguments: str) -> tuple[int, str, str]:
    code = main(list(arguments))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def test_failed_lists_the_messages_an_inbox_could_not_store(
    with_failures: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, "--store", with_failures, "messaging", "failed")
    assert (code, err) == (0, "")
    assert "bad-1" in out and "odd-1" in out and "good-1" not in out
    code, out, _ = run(capsys, "--store", with_failures, "messaging", "failed", "--json")
    listed = orjson.loads(out)
    assert [m["message_id"] for m in listed] == ["bad-1", "odd-1"]
    assert listed[0]["body"] == "not json" and listed[0]["headers"] == {"x-source": "shop"}
    assert listed[1]["error"] == "InvalidMessage: not an order: {}"
    code, out, _ = run(capsys, "--store", with_failures, "messaging", "show", "orders-in", "bad-1")
    assert code == 0 and "x-source: shop" in out and "not json" in out


def test_resend_marks_the_message_for_the_running_inbox_which_stores_it(
    with_failures: str, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(
        capsys, "--store", with_failures, "messaging", "resend", "orders-in", "odd-1", "--yes"
    )
    assert (code, err) == (0, "")
    assert "resend asked" in out
    with EventStore.open(with_failures) as store:
        assert [f.resend for f in operations.failed(store, "orders-in")] == [False, True]
        # The inbox, its mapping now able to read it, stores it when it next looks.
        inbox = Inbox(
            "orders-in",
            store,
            lambda m: order_received(IncomingMessage(m.message_id, b'{"order": 9}')),
        )
        with inbox:
            inbox.take_resends()
        assert [f.message_id for f in operations.failed(store)] == ["bad-1"]
        assert [e.metadata["message_id"] for e in store.read_all()] == ["good-1", "odd-1"]


def test_discard_erases_the_message_and_lists_its_record_apart_with_its_reason(
    with_failures: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # the tables unwrapped
    store = ("--store", with_failures)
    code, out, err = run(
        capsys, *store, "messaging", "discard", "orders-in", "bad-1", "--reason", "spam", "--yes"
    )
    assert (code, err) == (0, "")
    assert "discarded: message 'bad-1' of inbox 'orders-in', its content erased" in out
    code, out, _ = run(capsys, *store, "messaging", "failed")
    assert code == 0 and "odd-1" in out and "bad-1" not in out
    code, out, _ = run(capsys, *store, "messaging", "failed", "--discarded")
    assert code == 0 and "bad-1" in out and "spam" in out and "odd-1" not in out
    code, out, _ = run(capsys, *store, "messaging", "failed", "orders-in", "--discarded", "--json")
    [kept] = orjson.loads(out)
    assert (kept["message_id"], kept["discard_reason"], kept["body"], kept["headers"]) == (
        "bad-1",
        "spam",
        "",
        {},
    )
    assert kept["discarded_at"] is not None and kept["error"] == "InvalidMessage: <discarded>"
    code, out, _ = run(capsys, *store, "messaging", "show", "orders-in", "bad-1")
    assert code == 0 and "discarded at " in out and ": spam" in out and "not json" not in out


def test_a_discarded_message_is_refused_and_unknown_ones_are_named(
    with_failures: str, capsys: pytest.CaptureFixture[str]
) -> None:
    store = ("--store", with_failures)
    code, _, _ = run(capsys, *store, "messaging", "discard", "orders-in", "bad-1", "--yes")
    assert code == 0
    # Refused before any question is asked: there is nothing to confirm.
    for action in ("discard", "resend"):
        code, out, err = run(capsys, *store, "messaging", action, "orders-in", "bad-1")
        assert (code, out) == (1, "")
        assert err.startswith("error: message 'bad-1' of inbox 'orders-in' was discarded at ")
        assert err.endswith(" UTC: it is settled, not resent or discarded again\n")
    code, out, err = run(capsys, *store, "messaging", "discard", "orders-in", "nope", "--yes")
    assert code == 2
    assert err == "error: inbox 'orders-in' has no failed message with id 'nope'\n"
    code, _, err = run(capsys, *store, "messaging", "resend", "orders-in", "odd-1")
    assert code == 2 and "pass --yes" in err


def test_a_store_no_inbox_used_has_nothing_failed(sqlite_url: str) -> None:
    with EventStore.open(sqlite_url) as store:
        assert operations.failed(store) == []
        with pytest.raises(NotFound, match="no failed message with id 'x'"):
            operations.resend(store, "orders-in", "x")


def test_relays_shows_a_relay_paused_by_a_broker_it_cannot_reach(
    sqlite_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "300")  # the table unwrapped
    nowhere = f"amqp://guest:secret@127.0.0.1:{free_port()}/"  # nothing listens there
    with EventStore.open(sqlite_url) as store:
        store.append("order-1", [NewEvent("OrderPlaced", {"n": 1})])
        with Relay("orders-out", store, RabbitMQPublisher(nowhere, timeout=1)) as relay:
            relay.start()
            wait_for(lambda: relay.status().state == "paused", 20, "the relay to pause")
            code, out, err = run(capsys, "--store", sqlite_url, "messaging", "relays", "--json")
            _, table, _ = run(capsys, "--store", sqlite_url, "messaging", "relays")
    assert (code, err) == (0, "")
    assert "orders-out" in table and "paused" in table
    [shown] = orjson.loads(out)
    assert shown["name"] == "orders-out" and shown["state"] == "paused"
    assert (shown["position"], shown["head"], shown["lag_events"]) == (0, 1, 1)
    assert "is unavailable" in shown["last_error"] and "secret" not in out
    code, out, _ = run(capsys, "--store", sqlite_url, "messaging", "relays", "--json")
    assert orjson.loads(out)[0]["state"] == "stopped"
