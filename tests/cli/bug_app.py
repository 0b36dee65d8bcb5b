"""An App whose saga has a bug: its charge step raises a `KeyError` it does not declare,
so an instance parks on it, with its traceback, rather than being compensated."""

from __future__ import annotations

from typing import Any

from eventcraft.eventstore import EventStore
from eventcraft.sagas import Orchestrator, Saga, Step, StepContext

from eventcraft import App

SUBJECT = "customer-b1"
EMAIL = "bug.saga@example.test"


def _reserve(data: dict[str, Any], context: StepContext) -> None:
    return None


def _release(data: dict[str, Any], context: StepContext) -> None:
    return None


def _charge(data: dict[str, Any], context: StepContext) -> None:
    prices: dict[str, int] = {}
    prices[data["sku"]] += 1  # the bug: the sku was never priced


ordering = Saga(
    "ordering",
    [Step("reserve", _reserve, _release), Step("charge", _charge, fails_on=(ValueError,))],
)

buggy = App(sagas=[ordering])


def park_one(store: EventStore) -> None:
    """Instance b1 parked on its charge step's `KeyError`, which quotes personal data."""
    orchestrator = Orchestrator(store, buggy.sagas)
    orchestrator.start(ordering, {}, saga_id="b1", subject=SUBJECT, personal={"sku": EMAIL})
    orchestrator.run_pending()
