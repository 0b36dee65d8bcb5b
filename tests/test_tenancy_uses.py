"""What is built on a store works on a tenant's store unchanged, each tenant seeing its
own: a repository, decisions, a projection runner following live, and a saga's
orchestrator, for two tenants of one `Tenants` with one store open at a time."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest
import sqlalchemy as sa
from eventcraft.domain import (
    Aggregate,
    DecisionProjection,
    Decisions,
    DomainError,
    DomainEvent,
    EventRegistry,
    Repository,
    State,
    evolves,
)
from eventcraft.eventstore import NewEvent, Tenants
from eventcraft.projections import Fold, ProjectionRunner, StreamKey
from eventcraft.projections.database import engine_for
from eventcraft.sagas import Orchestrator, Saga, Step

bank = EventRegistry()


@bank.event("MoneyDeposited")
class MoneyDeposited(DomainEvent):
    amount: int


class AccountState(State):
    balance: int = 0

    @evolves
    def deposited(self, event: MoneyDeposited) -> AccountState:
        return self.replace(balance=self.balance + event.amount)


class BankAccount(Aggregate[AccountState]):
    category = "account"
    registry = bank

    def deposit(self, amount: int) -> None:
        self.record(MoneyDeposited(amount=amount))


school = EventRegistry()


@school.event("StudentSubscribed")
class StudentSubscribed(DomainEvent):
    student_id: str

    def event_tags(self) -> list[str]:
        return ["course:c1"]


@pytest.fixture
def tenants(tmp_path: Path) -> Tenants:
    return Tenants(f"sqlite:///{tmp_path}/{{tenant}}.db", most_open=1)


def test_a_repository_loads_each_tenants_account_of_the_same_id(tenants: Tenants) -> None:
    with tenants:
        for tenant, amount in [("acme", 500), ("globex", 7)]:
            accounts = Repository(tenants.for_tenant(tenant), BankAccount)
            accounts.execute("7", partial(BankAccount.deposit, amount=amount), create=True)
        for tenant, balance in [("acme", 500), ("globex", 7)]:
            account = Repository(tenants.for_tenant(tenant), BankAccount).load("7")
            assert (account.version, account.state.balance) == (1, balance)


def test_decisions_count_seats_per_tenant(tenants: Tenants) -> None:
    taken = DecisionProjection(0, {StudentSubscribed: lambda n, _: n + 1}, tags=["course:c1"])

    def subscribe(student: str):  # type: ignore[no-untyped-def]
        def decide(decision):  # type: ignore[no-untyped-def]
            if decision["taken"] >= 1:  # a course of one seat, in each tenant
                raise DomainError("full")
            return StudentSubscribed(student_id=student)

        return decide

    with tenants:
        for tenant in ["acme", "globex"]:
            Decisions(tenants.for_tenant(tenant), school).execute(
                {"taken": taken}, subscribe("ann"), stream_id="course-c1"
            )
        with pytest.raises(DomainError, match="full"):
            Decisions(tenants.for_tenant("acme"), school).execute(
                {"taken": taken}, subscribe("bob"), stream_id="course-c1"
            )


def test_a_runner_follows_a_tenants_log_into_the_tenants_own_read_model(
    tenants: Tenants,
) -> None:
    totals = sa.Table(
        "totals",
        sa.MetaData(),
        sa.Column("order_id", sa.Text, primary_key=True),
        sa.Column("cents", sa.BigInteger, nullable=False),
    )
    fold = Fold(
        "order-totals",
        table=totals,
        key=StreamKey("order-"),
        initial=lambda key: {"order_id": key, "cents": 0},
        apply=lambda row, event: {**row, "cents": row["cents"] + event.data["cents"]},
    )
    with tenants:
        acme, globex = tenants.for_tenant("acme"), tenants.for_tenant("globex")
        globex.append("order-1", [NewEvent("Placed", {"cents": 90})])
        with ProjectionRunner(acme, [fold]) as runner:
            runner.start()
            written = acme.append("order-1", [NewEvent("Placed", {"cents": 1250})])
            runner.wait_until(written.positions[-1])
        engine = engine_for(acme.url)
        with engine.connect() as conn:
            assert conn.execute(sa.select(totals)).all() == [("1", 1250)]
        engine.dispose()


def test_an_orchestrator_runs_each_tenants_sagas(tenants: Tenants) -> None:
    stock = {"acme": 10, "globex": 10}

    def reserve(data: dict[str, str], context: object) -> None:
        stock[data["tenant"]] -= 1

    fulfilment = Saga("fulfilment", [Step("reserve", reserve)])
    with tenants:
        for tenant in ["acme", "globex", "acme"]:
            orchestrator = Orchestrator(tenants.for_tenant(tenant), [fulfilment])
            saga_id = str(stock[tenant])
            orchestrator.start(fulfilment, {"tenant": tenant}, saga_id=saga_id)
            assert orchestrator.run_pending() == 0
            assert orchestrator.state("fulfilment", saga_id).status == "completed"
    assert stock == {"acme": 8, "globex": 9}
