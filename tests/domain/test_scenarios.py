"""The examples' business rules, tested the way domain developers will: given/when/then."""

from __future__ import annotations

import pytest
from eventcraft.domain import scenario

from examples.bank import (
    AccountAlreadyOpen,
    AccountClosed,
    AccountIsClosed,
    AccountNotOpen,
    AccountOpened,
    BalanceNotZero,
    BankAccount,
    InsufficientFunds,
    MoneyDeposited,
    MoneyWithdrawn,
)
from examples.orders import (
    LineAdded,
    Order,
    OrderCancelled,
    OrderError,
    OrderPaid,
    OrderPlaced,
    OrderShipped,
)

OPENED = AccountOpened(owner="ann", overdraft_limit_cents=100)


def test_an_account_opens_once() -> None:
    scenario(BankAccount).when(lambda a: a.open("ann", 100)).then(OPENED)
    scenario(BankAccount).given(OPENED).when(lambda a: a.open("ann")).then_raises(
        AccountAlreadyOpen
    )


def test_money_moves_only_in_an_open_account() -> None:
    scenario(BankAccount).when(lambda a: a.deposit(5)).then_raises(AccountNotOpen)
    (
        scenario(BankAccount)
        .given(OPENED, AccountClosed())
        .when(lambda a: a.withdraw(1))
        .then_raises(AccountIsClosed, match="closed")
    )


def test_a_withdrawal_may_use_the_overdraft_but_not_pass_it() -> None:
    deposit = MoneyDeposited(amount_cents=50)
    account = (
        scenario(BankAccount)
        .given(OPENED, deposit)
        .when(lambda a: a.withdraw(150))
        .then(MoneyWithdrawn(amount_cents=150))
    )
    assert account.state.balance_cents == -100
    (
        scenario(BankAccount)
        .given(OPENED, deposit)
        .when(lambda a: a.withdraw(151))
        .then_raises(InsufficientFunds, match="overdraft limit of 100")
    )


def test_closing_with_a_payout_records_both_events_or_neither() -> None:
    (
        scenario(BankAccount)
        .given(OPENED, MoneyDeposited(amount_cents=30))
        .when(lambda a: a.close(payout_to_zero=True))
        .then(MoneyWithdrawn(amount_cents=30), AccountClosed())
    )
    # Overdrawn: the payout records nothing, and the refusal undoes nothing else.
    refused = (
        scenario(BankAccount)
        .given(OPENED, MoneyWithdrawn(amount_cents=30))
        .when(lambda a: a.close(payout_to_zero=True))
    )
    refused.then_raises(BalanceNotZero)
    assert refused.aggregate.state.balance_cents == -30


def test_an_order_goes_from_placed_to_shipped() -> None:
    placed = OrderPlaced(customer_id="c1")
    line = LineAdded(sku="tea", quantity=2, unit_price_cents=350)
    scenario(Order).when(lambda o: o.place("c1")).then(placed)
    scenario(Order).given(placed).when(lambda o: o.add_line("tea", 2, 350)).then(line)
    scenario(Order).given(placed, line).when(lambda o: o.pay(700)).then(OrderPaid(amount_cents=700))
    scenario(Order).given(placed, line, OrderPaid(amount_cents=700)).when(
        lambda o: o.ship("post")
    ).then(OrderShipped(carrier="post"))


@pytest.mark.parametrize(
    ("history", "command", "match"),
    [
        ([], lambda o: o.add_line("tea", 1, 1), "it is new, not placed"),
        (["placed"], lambda o: o.pay(0), "no lines"),
        (["placed", "line"], lambda o: o.pay(699), "costs 700, not 699"),
        (["placed", "line"], lambda o: o.ship("post"), "it is placed, not paid"),
        (["placed", "line", "paid", "shipped"], lambda o: o.cancel("late"), "shipped"),
        (["placed", "cancelled"], lambda o: o.add_line("tea", 1, 1), "cancelled"),
    ],
)
def test_an_order_refuses_what_its_status_forbids(
    history: list[str], command: object, match: str
) -> None:
    known = {
        "placed": OrderPlaced(customer_id="c1"),
        "line": LineAdded(sku="tea", quantity=2, unit_price_cents=350),
        "paid": OrderPaid(amount_cents=700),
        "shipped": OrderShipped(carrier="post"),
        "cancelled": OrderCancelled(reason="changed mind"),
    }
    (
        scenario(Order)
        .given(*(known[name] for name in history))
        .when(command)  # type: ignore[arg-type]
        .then_raises(OrderError, match=match)
    )


def test_the_helper_reports_the_wrong_events() -> None:
    with pytest.raises(AssertionError, match="expected events"):
        scenario(BankAccount).when(lambda a: a.open("ann")).then(OPENED)


def test_the_helper_reports_an_unexpected_error_and_a_missing_one() -> None:
    with pytest.raises(AssertionError, match="raised AccountNotOpen"):
        scenario(BankAccount).when(lambda a: a.deposit(5)).then(MoneyDeposited(amount_cents=5))
    with pytest.raises(AssertionError, match=r"recorded \[AccountOpened\]"):
        scenario(BankAccount).when(lambda a: a.open("ann")).then_raises(AccountAlreadyOpen)


def test_the_helper_needs_a_when_before_a_then() -> None:
    with pytest.raises(AssertionError, match="call when"):
        scenario(BankAccount).given(OPENED).then()
