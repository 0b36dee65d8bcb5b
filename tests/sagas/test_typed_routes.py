"""A process manager given the application's registry routes typed, upcast events."""

from __future__ import annotations

from typing import Any

from eventcraft.eventstore import EVENT_VERSION, EventStore, NewEvent
from eventcraft.projections import ProjectionRunner, TypedEvent
from eventcraft.sagas import Orchestrator, ProcessManager, Route, Saga, Step, StepContext, wait_for

from examples.bank import AccountOpened, MoneyDeposited, bank_events


def _greeted(data: dict[str, Any], context: StepContext) -> str:
    return f"welcome, {data['owner']}"


first_deposit = Saga(
    "first_deposit",
    [Step("greet", _greeted), wait_for("deposit", "MoneyDeposited", timeout=30)],
)


def _account(event: TypedEvent[Any]) -> str:
    return event.stream_id.removeprefix("account-")


def _opened_by_someone(event: TypedEvent[AccountOpened]) -> bool:
    return isinstance(event.data, AccountOpened) and event.data.owner != ""


def _large(event: TypedEvent[MoneyDeposited]) -> bool:
    return isinstance(event.data, MoneyDeposited) and event.data.amount_cents >= 1000


def test_a_process_manager_given_the_registry_routes_upcast_typed_events(
    store: EventStore,
) -> None:
    orchestrator = Orchestrator(store, [first_deposit])
    manager = ProcessManager(
        "first-deposits",
        orchestrator,
        [
            Route("AccountOpened", first_deposit, "start", _account, when=_opened_by_someone),
            Route("MoneyDeposited", first_deposit, "signal", _account, when=_large),
        ],
        registry=bank_events,
    )
    opened = NewEvent("AccountOpened", {"owner": "ada", "overdraft_limit_cents": 0})
    store.append("account-1", [opened])
    with ProjectionRunner(store, [manager.subscription()]) as runner:
        runner.catch_up()
        assert orchestrator.run_pending() == 1  # greeted, waits for a deposit
        # Version 1 stored euros as a float: only the upcast event has amount_cents.
        small, large = ({"amount": euros} for euros in (9.99, 12.5))
        for data in (small, large):
            store.append("account-1", [NewEvent("MoneyDeposited", data, {EVENT_VERSION: 1})])
        runner.catch_up()
        assert orchestrator.run_pending() == 0
    done = orchestrator.state("first_deposit", "1")
    assert done.data == {"owner": "ada", "overdraft_limit_cents": 0}  # the typed event, as JSON
    assert done.status == "completed"
    assert done.results == {
        "greet": "welcome, ada",
        "deposit": {"amount_cents": 1250, "reference": ""},  # signalled upcast
    }
