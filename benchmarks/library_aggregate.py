"""The reference library's aggregate for the benchmarks, written its own way."""

from __future__ import annotations

from eventsourcing.domain import Aggregate, event


class Account(Aggregate):
    @event("Opened")
    def __init__(self) -> None:
        self.balance = 0

    @event("Deposited")
    def deposit(self, amount_cents: int, note: str) -> None:
        self.balance += amount_cents
