"""A process manager whose routes name tags: it reads by a query of types and tags, and a
route takes only the events carrying all of its tags."""

from __future__ import annotations

from typing import Any

import pytest
from eventcraft.eventstore import EventStore, NewEvent, Query, QueryItem
from eventcraft.projections import ProjectionRunner
from eventcraft.sagas import (
    Orchestrator,
    ProcessManager,
    Route,
    Saga,
    SagaDefinitionError,
    Step,
    StepContext,
)


def _welcome(data: dict[str, Any], context: StepContext) -> str:
    return f"welcome {data['student']}"


onboarding = Saga("onboarding", [Step("welcome", _welcome)])


def _student(event: Any) -> str:
    return str(event.data["student"])


def test_a_route_with_tags_takes_only_the_events_carrying_them(store: EventStore) -> None:
    orchestrator = Orchestrator(store, [onboarding])
    manager = ProcessManager(
        "eu-onboarding",
        orchestrator,
        [Route("Registered", onboarding, "start", _student, tags=["region:eu"])],
    )
    subscription = manager.subscription()
    assert subscription.query == Query([QueryItem(types=["Registered"], tags=["region:eu"])])
    for n, tags in enumerate([["region:eu"], ["region:us"], [], ["region:eu", "plan:pro"]]):
        event = NewEvent("Registered", {"student": f"s{n}"}, tags=tags)
        store.append(f"student-s{n}", [event])
    store.append("student-s9", [NewEvent("Other", {"student": "s9"}, tags=["region:eu"])])
    with ProjectionRunner(store, [subscription]) as runner:
        runner.catch_up()
        (status,) = runner.status()
        assert status.position == store.high_water_mark()
    orchestrator.run_pending()
    assert [s.saga_id for s in orchestrator.instances()] == ["s0", "s3"]
    assert orchestrator.state("onboarding", "s3").results == {"welcome": "welcome s3"}


def test_a_route_without_tags_keeps_reading_by_type(store: EventStore) -> None:
    manager = ProcessManager(
        "all-onboarding",
        Orchestrator(store, [onboarding]),
        [Route("Registered", onboarding, "start", _student)],
    )
    subscription = manager.subscription()
    assert (subscription.query, subscription.types) == (None, ("Registered",))


def test_a_route_with_a_bad_tag_is_refused() -> None:
    with pytest.raises(SagaDefinitionError, match="control characters"):
        Route("Registered", onboarding, "start", _student, tags=["a\nb"])
