"""Order fulfilment as a saga: reserve stock, charge the card, book the courier.

There is no transaction across the three services, so each step has a
compensation (release, refund, cancel) that the orchestrator runs, in
reverse, for the steps already done when a later one fails. The services
here are fakes that keep what they did, honour idempotency keys like real
ones should, and can be told to fail, to be slow, or to kill the process.
"""

from __future__ import annotations

import os
import signal
import time
from dataclasses import dataclass, field
from typing import Any

from sagas import RetryPolicy, Saga, Step, StepContext


@dataclass
class FakeService:
    """A remote service: each call is kept; a key seen before returns the first answer."""

    name: str
    fail: int = 0
    """How many of the next calls raise (then it works again)."""
    delay: float = 0.0
    """Seconds each call takes."""
    crash: bool = False
    """Kill the calling process (SIGKILL) after the next call takes effect."""
    calls: list[str] = field(default_factory=list)
    done: dict[str, Any] = field(default_factory=dict)

    def __call__(self, operation: str, key: str, **details: Any) -> Any:
        self.calls.append(f"{operation} {details}")
        if self.delay:
            time.sleep(self.delay)
        if self.fail:
            self.fail -= 1
            raise ConnectionError(f"{self.name} is unavailable")
        if key not in self.done:  # an idempotent service applies a key once
            self.done[key] = f"{operation}-{len(self.done) + 1}"
        if self.crash:
            os.kill(os.getpid(), signal.SIGKILL)
        return self.done[key]


inventory = FakeService("inventory")
payments = FakeService("payments")
shipping = FakeService("shipping")


def reserve(data: dict[str, Any], context: StepContext) -> dict[str, str]:
    reservation = inventory("reserve", context.idempotency_key, sku=data["sku"], qty=data["qty"])
    return {"reservation": reservation}


def release(data: dict[str, Any], context: StepContext) -> None:
    inventory("release", context.idempotency_key, sku=data["sku"], qty=data["qty"])


def charge(data: dict[str, Any], context: StepContext) -> dict[str, str]:
    reservation = context.results["reserve_inventory"]["reservation"]
    charged = payments("charge", context.idempotency_key, cents=data["cents"], for_=reservation)
    return {"charge": charged}


def refund(data: dict[str, Any], context: StepContext) -> None:
    payments("refund", context.idempotency_key, cents=data["cents"])


def book(data: dict[str, Any], context: StepContext) -> dict[str, str]:
    return {"parcel": shipping("book", context.idempotency_key, to=data["address"])}


def cancel(data: dict[str, Any], context: StepContext) -> None:
    shipping("cancel", context.idempotency_key, to=data["address"])


order_fulfilment = Saga(
    "order_fulfilment",
    [
        Step("reserve_inventory", reserve, release),
        Step("charge_payment", charge, refund, retry=RetryPolicy(attempts=3, backoff=0.05)),
        Step("arrange_shipping", book, cancel, timeout=5.0),
    ],
    timeout=60.0,
)
