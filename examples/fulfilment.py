"""Order fulfilment as a saga: reserve stock, charge the card, book the courier.

There is no transaction across the three services, so each step has a
compensation (release, refund, cancel) that the orchestrator runs, in
reverse, for the steps already done when a later one fails. The services
here are fakes that keep what they did, honour idempotency keys like real
ones should, and can be told to fail, to be slow, or to kill the process.
"""

from __future__ import annotations

import json
import os
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from eventcraft.sagas import RetryPolicy, Saga, Step, StepContext


@dataclass
class FakeService:
    """A remote service: each call is kept; a key seen before returns the first answer.

    With a `journal` file, what it did outlives the process (one JSON line an
    effect), as a real service's database would.
    """

    name: str
    fail: int = 0
    """How many of the next calls raise (then it works again)."""
    refuse: str | None = None
    """An operation that always raises (a courier that will not deliver there)."""
    delay: float = 0.0
    """Seconds each call takes."""
    crash_on: str | None = None
    """Kill the calling process (SIGKILL) once this operation has taken effect."""
    journal: Path | None = None
    calls: list[str] = field(default_factory=list)
    done: dict[str, Any] = field(default_factory=dict)

    def __call__(self, operation: str, key: str, **details: Any) -> Any:
        self.calls.append(f"{operation} {details}")
        if self.delay:
            time.sleep(self.delay)
        if self.fail:
            self.fail -= 1
            raise ConnectionError(f"{self.name} is unavailable")
        if operation == self.refuse:
            raise ValueError(f"{self.name} refuses to {operation} {details}")
        done = self.effects()
        if key not in done:  # an idempotent service applies a key once
            answer = f"{operation}-{len(done) + 1}"
            self.done[key] = answer
            if self.journal is not None:
                with self.journal.open("a") as file:
                    file.write(json.dumps({"key": key, "operation": operation, "answer": answer}))
                    file.write("\n")
        if operation == self.crash_on:
            os.kill(os.getpid(), signal.SIGKILL)
        return self.effects()[key]

    def effects(self) -> dict[str, Any]:
        """Idempotency key -> answer, of every effect it applied."""
        if self.journal is None:
            return self.done
        if not self.journal.exists():
            return {}
        lines = [json.loads(line) for line in self.journal.read_text().splitlines()]
        return {line["key"]: line["answer"] for line in lines}

    def operations(self) -> list[str]:
        """The operations it applied, in order (from the journal, if it has one)."""
        if self.journal is None:
            return [answer.rsplit("-", 1)[0] for answer in self.done.values()]
        if not self.journal.exists():
            return []
        return [json.loads(line)["operation"] for line in self.journal.read_text().splitlines()]


inventory = FakeService("inventory")
payments = FakeService("payments")
shipping = FakeService("shipping")
SERVICES = (inventory, payments, shipping)


def reset_services(journals: Path | None = None) -> None:
    """Forget every call and failure; keep effects in `journals/<name>.jsonl` from now on."""
    for service in SERVICES:
        service.fail, service.refuse, service.crash_on, service.delay = 0, None, None, 0.0
        service.calls.clear()
        service.done.clear()
        service.journal = None if journals is None else journals / f"{service.name}.jsonl"


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


# A service's refusal (ValueError) is a business failure, its outage (ConnectionError)
# transient; anything else a step raises is a bug, and parks the saga.
REFUSED, UNAVAILABLE = (ValueError,), (ConnectionError,)

order_fulfilment = Saga(
    "order_fulfilment",
    [
        Step("reserve_inventory", reserve, release, fails_on=REFUSED, retry_on=UNAVAILABLE),
        Step(
            "charge_payment",
            charge,
            refund,
            retry=RetryPolicy(attempts=3, backoff=0.05),
            fails_on=REFUSED,
            retry_on=UNAVAILABLE,
        ),
        Step(
            "arrange_shipping",
            book,
            cancel,
            retry=RetryPolicy(attempts=2),
            timeout=5.0,
            fails_on=REFUSED,
            retry_on=UNAVAILABLE,
        ),
    ],
    timeout=60.0,
)
