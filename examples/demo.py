"""The end-to-end example on an embedded SQLite file: `make demo`.

    python -m examples.demo [DIRECTORY]     (default: var/demo)

It writes only inside DIRECTORY: the store `events.db` (with its read
models) and a marker that says the folder is the demo's. A later run
starts again from an empty log there; a folder that holds anything else
is refused, so a mistyped path never costs a user a file.

Bank accounts and orders as aggregates: commands that keep their rules,
a lost race retried, snapshots and an old event upcast on load; then the
log they left, read by stream, by category and as a whole; then two read
models (balances, orders by customer and status) kept live by projections;
then order fulfilment as a saga, once completed and once compensated;
then course subscriptions, whose rules span streams, kept by decisions
with conditional appends (`examples/courses.py`).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from functools import partial
from pathlib import Path

import sqlalchemy as sa
from eventcraft.domain import EVENT_VERSION, DomainError, Repository, caused_by, command_context
from eventcraft.eventstore import EventStore, NewEvent, WrongExpectedVersion
from eventcraft.projections import ProjectionRunner
from eventcraft.sagas import Orchestrator

from examples import courses
from examples.bank import BankAccount
from examples.fulfilment import (
    inventory,
    order_fulfilment,
    payments,
    reset_services,
    shipping,
)
from examples.orders import Order
from examples.read_models import READ_MODELS, balances, orders

DEFAULT_DIRECTORY = Path("var/demo")
MARKER = ".eventcraft-demo"
"""The file that marks a folder as the demo's own."""
DATABASE_FILES = ("events.db", "events.db-wal", "events.db-shm", "events.db-journal")


class NotTheDemosFolder(Exception):
    """The folder given to the demo holds files the demo did not write."""


def prepare(directory: Path) -> Path:
    """The demo's database in `directory`, the folder made or emptied of the demo's files only."""
    if directory.exists():
        if not directory.is_dir():
            raise NotTheDemosFolder(f"{directory} is a file, not a folder for the demo")
        ours = (MARKER, *DATABASE_FILES) if (directory / MARKER).is_file() else ()
        others = sorted(p.name for p in directory.iterdir() if p.name not in ours)
        if others:
            raise NotTheDemosFolder(
                f"{directory} holds files the demo did not write ({', '.join(others)}); "
                "name a new or empty folder"
            )
    directory.mkdir(parents=True, exist_ok=True)
    (directory / MARKER).write_text("written by python -m examples.demo\n")
    for name in DATABASE_FILES:
        (directory / name).unlink(missing_ok=True)  # each run starts from an empty log
    return directory / "events.db"


def main(directory: Path = DEFAULT_DIRECTORY) -> None:
    db = prepare(directory)
    with EventStore.open(f"sqlite:///{db}") as store:
        accounts = Repository(store, BankAccount, snapshot_every=5)
        orders = Repository(store, Order)

        with command_context(correlation_id="signup-ann", user="ann"):
            accounts.execute(
                "ann", lambda a: a.open("Ann", overdraft_limit_cents=1000), create=True
            )
            for amount in (2500, 1200, 300):
                accounts.execute("ann", partial(BankAccount.deposit, amount_cents=amount))
        try:
            accounts.execute("ann", lambda a: a.withdraw(99_000))
        except DomainError as error:
            print(f"refused by the rules: {error}")

        # Two clerks load the same account; the second save loses the race...
        first, second = accounts.load("ann"), accounts.load("ann")
        first.withdraw(500)
        accounts.save(first)
        second.withdraw(700)
        try:
            accounts.save(second)
        except WrongExpectedVersion as error:
            print(f"refused as it should be: {error}")
        # ...and `execute` runs the command again on the fresh state instead.
        accounts.execute("ann", lambda a: a.withdraw(700))

        # An event written years ago by schema version 1 (euros as a float).
        legacy = NewEvent("MoneyDeposited", {"amount": 12.5}, {EVENT_VERSION: 1})
        store.append("account-ann", [legacy], expected_version=accounts.load("ann").version)
        ann = accounts.load("ann")
        snapshot = store.load_snapshot("account-ann")
        print(
            f"account-ann: balance {ann.state.balance_cents} cents at version {ann.version} "
            f"(loaded from the snapshot at version {snapshot.version if snapshot else '-'})"
        )

        with command_context(correlation_id="checkout-42", user="bob"):
            orders.execute("42", lambda o: o.place("bob"), create=True)
            orders.execute("42", lambda o: o.add_line("tea", 2, 350))
            orders.execute("42", lambda o: o.add_line("cup", 1, 900))
            orders.execute("42", lambda o: o.pay(1600))
        paid = list(store.read_stream("order-42"))[-1]
        with caused_by(paid, user="warehouse"):
            orders.execute("42", lambda o: o.ship("post"))
        orders.execute("43", lambda o: o.place("cat"), create=True)
        orders.execute("43", lambda o: o.cancel("changed mind"))
        print(
            f"order-42 is {orders.load('42').state.status}, order-43 is "
            f"{orders.load('43').state.status}"
        )

        print("\norder-42, by version:")
        for event in store.read_stream("order-42"):
            meta = event.metadata
            print(
                f"  v{event.version} {event.type:<15} {event.data}  "
                f"correlation={meta['correlation_id']} user={meta.get('user', '-')}"
            )
        print("\nthe order category:")
        for event in store.read_all(categories=["order"]):
            print(f"  @{event.position} {event.stream_id:<10} {event.type}")
        print("\nthe whole log:")
        for event in store.read_all():
            print(f"  @{event.position} {event.stream_id:<12} v{event.version} {event.type}")
        streams = ", ".join(f"{s.stream_id} (v{s.version})" for s in store.list_streams())
        print(f"\nstreams: {streams}")
        print(f"high-water mark: {store.high_water_mark()}  (stored in {db})")
        show_read_models(store, accounts)
        show_sagas(store)
        courses.show(store)


def show_read_models(store: EventStore, accounts: Repository[BankAccount]) -> None:
    """The read side: projections follow the log live, in the same SQLite file."""
    with ProjectionRunner(store, READ_MODELS) as runner:
        runner.start()
        accounts.execute("bob", lambda a: a.open("Bob", overdraft_limit_cents=0), create=True)
        accounts.execute("bob", partial(BankAccount.deposit, amount_cents=4200))
        runner.wait_until(store.high_water_mark(), timeout=30)  # read your own writes
        with runner.database.reading() as connection:
            print("\naccount balances (a fold):")
            for row in connection.execute(sa.select(balances).order_by(balances.c.account_id)):
                print(f"  {row.account_id:<5} {row.owner:<5} {row.balance_cents:>6} cents")
            print("orders by customer and status (handlers):")
            query = sa.select(orders).order_by(orders.c.customer_id, orders.c.status)
            for row in connection.execute(query):
                print(
                    f"  {row.customer_id:<5} {row.status:<10} order {row.order_id} "
                    f"({row.lines} lines, {row.total_cents} cents)"
                )
        runner.stop()
        for status in runner.status():
            print(
                f"projection {status.name}: checkpoint {status.position} of {status.head}, "
                f"lag {status.lag_events} events, generation {status.generation}"
            )
        report = runner.rebuild("account-balances", progress=True)
        print(
            f"rebuilt {report.name} from {report.events} events into generation "
            f"{report.generation}, checkpoint {report.position}"
        )


def show_sagas(store: EventStore) -> None:
    """Orchestration: each move recorded in the saga's stream before it is made."""
    reset_services()
    orchestrator = Orchestrator(store, [order_fulfilment])
    order = {"sku": "book-1", "qty": 2, "cents": 1600, "address": "1 Main St"}
    orchestrator.start(order_fulfilment, order, saga_id="order-42")
    orchestrator.run_pending()
    shipping.refuse = "book"  # the courier refuses order 43: the saga undoes what it did
    orchestrator.start(order_fulfilment, {**order, "address": "nowhere"}, saga_id="order-43")
    orchestrator.run_pending()
    print()
    for saga_id in ("order-42", "order-43"):
        state = orchestrator.state(order_fulfilment.name, saga_id)
        why = f" because {state.failure}" if state.failure else ""
        print(f"saga {saga_id}: {state.status}{why}")
        moves = [e.type for e in store.read_stream(state.stream_id)]
        print(f"  {len(moves)} transitions: {' > '.join(moves)}")
    for service in (inventory, payments, shipping):
        print(f"  {service.name} was asked: {'; '.join(service.calls)}")


def cli(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m examples.demo",
        description="Run eventcraft's end-to-end example on an embedded SQLite file.",
    )
    parser.add_argument(
        "directory",
        nargs="?",
        type=Path,
        default=DEFAULT_DIRECTORY,
        help=f"a new or empty folder, or one an earlier run made (default: {DEFAULT_DIRECTORY})",
    )
    arguments = parser.parse_args(argv)
    try:
        main(arguments.directory)
    except NotTheDemosFolder as error:
        print(f"error: {error}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(cli())
