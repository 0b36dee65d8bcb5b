"""What a user typed or stored is printed as it is: ids, names and message bodies holding
[brackets] are text, never rich markup; and a password in a URL is never printed."""

from __future__ import annotations

from eventcraft.eventstore import EventStore, NewEvent
from eventcraft.messaging import Inbox, IncomingMessage

from ..messaging.workers import order_received
from .conftest import Run

BODY = "[bold]amount[/bold] is [link=http://evil.example]here[/link] [/oops]"


def _failed_messages(url: str) -> None:
    with EventStore.open(url) as store, Inbox("orders-in", store, order_received) as inbox:
        inbox.take(IncomingMessage("m-[/x]", b"not json", subject="orders"))
        inbox.take(IncomingMessage("m-[b]2", BODY.encode(), subject="[red]orders"))


def test_message_ids_and_bodies_print_as_they_are(run: Run, known_url: str) -> None:
    _failed_messages(known_url)
    listed = run("--store", known_url, "messaging", "failed")
    assert listed.code == 0 and "m-[/x]" in listed.out and "m-[b]2" in listed.out
    shown = run("--store", known_url, "messaging", "show", "orders-in", "m-[b]2")
    assert shown.code == 0, shown.err
    assert "message m-[b]2" in shown.out and "'[red]orders'" in shown.out
    assert BODY in shown.out
    discarded = run("--store", known_url, "messaging", "discard", "orders-in", "m-[/x]", "--yes")
    assert (discarded.code, discarded.err) == (0, "")
    assert "discarded: message 'm-[/x]' of inbox 'orders-in'" in discarded.out
    resent = run("--store", known_url, "messaging", "resend", "orders-in", "m-[b]2", "--yes")
    assert (resent.code, resent.err) == (0, "")
    assert "stores 'm-[b]2' when it next looks" in resent.out


def test_stream_ids_and_subjects_print_as_they_are(run: Run, known_url: str) -> None:
    with EventStore.open(known_url) as store:
        store.append("doc-[/x]", [NewEvent("Noted", {"a": 1})])
    shown = run("--store", known_url, "show", "doc-[/x]")
    assert shown.code == 0 and "doc-[/x]" in shown.out
    deleted = run("--store", known_url, "delete-stream", "doc-[/x]", "--yes")
    assert (deleted.code, deleted.err) == (0, "")
    assert "deleted 'doc-[/x]' at version 1" in deleted.out
    forgotten = run("--store", known_url, "forget", "customer-[/x]", "--yes")
    assert (forgotten.code, forgotten.err) == (0, "")
    assert "'customer-[/x]' has no key to erase" in forgotten.out


def test_a_password_in_the_read_model_database_url_is_never_printed(
    run: Run, known_url: str
) -> None:
    app = ("--store", known_url, "--app", "tests.cli.apps:shop")
    for database in (
        "mysql://admin:TopSecret1@db/reads",
        "postgresql://admin:TopSecret1@db/reads?schema=1bad",
    ):
        outcome = run(*app, "spark", "replay", "orders", "--database", database)
        assert outcome.code == 2, outcome.err
        assert "TopSecret1" not in outcome.err + outcome.out
        assert "admin:***@db" in outcome.err
