"""A step's result is kept in the saga's stream: one the store cannot encode fails the step
once, naming it, and the saga is compensated (or parked) as its policy says."""

from __future__ import annotations

from typing import Any

import pytest
from eventcraft.eventstore import EventStore
from eventcraft.sagas import Orchestrator, RetryPolicy, Saga, Step, StepContext


class Receipt:
    """What a careless action returns: an object, not JSON."""


UNENCODABLE = [({"sku"}, "set"), (Receipt(), "Receipt"), (b"\x00", "bytes")]


@pytest.mark.parametrize(("result", "kind"), UNENCODABLE, ids=[k for _, k in UNENCODABLE])
def test_an_unencodable_result_fails_its_step_once_and_the_saga_is_compensated(
    store: EventStore, result: Any, kind: str
) -> None:
    calls: list[str] = []

    def charge(data: dict[str, Any], context: StepContext) -> Any:
        calls.append(context.step)
        return result

    def refund(data: dict[str, Any], context: StepContext) -> None:
        calls.append("refund")

    saga = Saga("checkout", [Step("charge", charge, refund, retry=RetryPolicy(3))])
    orchestrator = Orchestrator(store, [saga])
    orchestrator.start(saga, {}, saga_id="1")
    assert orchestrator.run_pending() == 0  # no TypeError out of the orchestrator
    final = orchestrator.state("checkout", "1")
    assert final.status == "compensated"
    # Once, though the policy allows three: a retry would return the same result.
    assert calls == ["charge", "refund"]
    assert final.unknown == ["charge"]  # it took effect: undone
    reason = final.failure or ""
    assert "step charge failed: unstorable result" in reason and kind in reason, reason


def test_an_unencodable_result_whose_compensation_keeps_failing_parks_the_saga(
    store: EventStore,
) -> None:
    def refund(data: dict[str, Any], context: StepContext) -> None:
        raise ConnectionError("payments is down")

    saga = Saga("checkout", [Step("charge", lambda d, c: {1, 2}, refund)])
    orchestrator = Orchestrator(store, [saga])
    orchestrator.start(saga, {}, saga_id="1")
    assert orchestrator.run_pending() == 1
    (parked,) = orchestrator.parked()
    assert "unstorable result" in (parked.failure or "")
    assert "payments is down" in (parked.parked_because or "")
