"""Fake services for the saga tests: they record calls, honour idempotency keys, fail on cue."""

from __future__ import annotations

import hashlib
import json
import os
import signal
import threading
import time
from pathlib import Path
from typing import Any

from eventcraft.sagas import RetryPolicy, Saga, Step, StepContext


class Ledger:
    """Effects kept in a JSON-lines file, so that several processes share them.

    Each applied effect is a line {"key", "effect"}; a key already present is
    not applied again, as a real service honouring idempotency keys would.
    """

    def __init__(self, path: Path) -> None:
        self.path = path

    def apply(self, key: str, effect: str) -> None:
        if key in self.keys():
            return
        with self.path.open("a") as file:
            file.write(json.dumps({"key": key, "effect": effect}) + "\n")
            file.flush()
            os.fsync(file.fileno())

    def keys(self) -> set[str]:
        return {line["key"] for line in self.lines()}

    def lines(self) -> list[dict[str, str]]:
        if not self.path.exists():
            return []
        return [json.loads(line) for line in self.path.read_text().splitlines() if line]

    def effects(self) -> list[str]:
        return [line["effect"] for line in self.lines()]


def fulfilment(
    ledger: Path,
    *,
    fail: str | None = None,
    crash_in: str | None = None,
    hang_in: str | None = None,
    timeout: float | None = None,
    attempts: int = 2,
) -> Saga:
    """Reserve, charge, ship; `fail` names a step whose action raises, `crash_in` an
    action or compensation that kills the process (SIGKILL) after taking effect."""
    book = Ledger(ledger)

    def effect(name: str) -> Any:
        def run(data: dict[str, Any], context: StepContext) -> dict[str, str]:
            what = f"{name}:{data['order']}"
            if fail == name:
                raise RuntimeError(f"{name} refused")
            book.apply(context.idempotency_key, what)
            if hang_in == name:
                # Done, then stuck: the marker tells the test it may kill us now.
                (ledger.parent / "hanging").touch()
                threading.Event().wait()
            if crash_in == name and context.attempt == 1:
                # Done, but the orchestrator never hears of it.
                os.kill(os.getpid(), signal.SIGKILL)
            return {"done": what}

        return run

    steps = [
        Step(
            n,
            effect(n),
            effect(u),
            retry=RetryPolicy(attempts=attempts),
            timeout=timeout,
            retry_on=(RuntimeError,),
        )
        for n, u in (("reserve", "release"), ("charge", "refund"), ("ship", "cancel"))
    ]
    return Saga("fulfilment", steps)


def _roll(*parts: object) -> float:
    """A number in [0, 1) fixed by `parts`, the same in every process."""
    digest = hashlib.sha256(":".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def flaky_fulfilment(ledger: Path, calls: Path) -> Saga:
    """Fulfilment whose services fail at random (decided by saga id, step and try).

    charge fails a first try 30% of the time (the retry succeeds), ship fails
    for good 25% of the time (the saga compensates), refund fails for good 10%
    of the time (the saga parks). Every call is logged in `calls` with its
    process id, to count how often each step ran.
    """
    book = Ledger(ledger)

    def service(name: str) -> Any:
        def run(data: dict[str, Any], context: StepContext) -> None:
            with calls.open("a") as file:  # one short line per write: atomic with O_APPEND
                record = {"key": context.idempotency_key, "try": context.attempt}
                file.write(json.dumps({**record, "pid": os.getpid()}) + "\n")
            roll = _roll(context.saga_id, name, context.attempt)
            odds = {"ship": 0.25, "refund": 0.4}.get(name, 0.0)  # refund: 40% of failed ships
            if (name == "charge" and context.attempt == 1 and roll < 0.3) or (
                _roll(context.saga_id, name) < odds
            ):
                raise RuntimeError(f"{name} failed")
            book.apply(context.idempotency_key, f"{name}:{data['order']}")

        return run

    steps = [
        Step(
            n,
            service(n),
            compensation=service(u),
            retry=RetryPolicy(attempts=2),
            retry_on=(RuntimeError,),
            compensation_retry=RetryPolicy(attempts=2),
        )
        for n, u in (("reserve", "release"), ("charge", "refund"), ("ship", "cancel"))
    ]
    return Saga("fulfilment", steps)


def gated_fulfilment(ledger: Path, calls: Path, gate: Path, held: str) -> Saga:
    """Reserve, charge, ship; ship is refused for orders whose data says `refuse`.

    The charge of order `held` takes effect, then waits for the file `gate`
    (a test shuts the database down meanwhile), with `held` beside it saying
    it is there. Every call is logged in `calls`.
    """
    book = Ledger(ledger)

    def service(name: str) -> Any:
        def run(data: dict[str, Any], context: StepContext) -> None:
            with calls.open("a") as file:  # one short line per write: atomic with O_APPEND
                file.write(json.dumps({"key": context.idempotency_key, "try": context.attempt}))
                file.write("\n")
            if name == "ship" and data["refuse"]:
                raise RuntimeError("no courier")
            book.apply(context.idempotency_key, f"{name}:{data['order']}")
            if name == "charge" and data["order"] == held and not gate.exists():
                (gate.parent / "held").touch()
                deadline = time.monotonic() + 120
                while not gate.exists():
                    if time.monotonic() > deadline:
                        raise TimeoutError("the test never opened the gate")
                    time.sleep(0.01)

        return run

    steps = [
        Step(n, service(n), compensation=service(u), fails_on=(RuntimeError,))
        for n, u in (("reserve", "release"), ("charge", "refund"), ("ship", "cancel"))
    ]
    return Saga("fulfilment", steps)
