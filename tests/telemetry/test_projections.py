"""A projection batch is a CONSUMER span linked to its events' creation contexts."""

from __future__ import annotations

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent, RecordedEvent
from eventcraft.projections import ErrorPolicy, Projection, ProjectionRunner, ReadModel
from opentelemetry import trace
from opentelemetry.trace import SpanKind, StatusCode

from .conftest import Telemetry

notes_table = sa.Table(
    "telemetry_notes",
    sa.MetaData(),
    sa.Column("position", sa.BigInteger, primary_key=True),
    sa.Column("text", sa.Text, nullable=False),
)


def notes(*, then: str = "skip") -> Projection:
    projection = Projection(
        "notes",
        tables=[notes_table],
        on_error=ErrorPolicy(attempts=2, backoff=0, then=then),  # type: ignore[arg-type]
    )

    @projection.on("Note")
    def note(read_model: ReadModel, event: RecordedEvent) -> None:
        if event.data["text"] == "bad":
            raise ValueError("cannot take 'bad'")
        read_model.execute(
            sa.insert(read_model[notes_table]).values(
                position=event.position, text=event.data["text"]
            )
        )

    return projection


def test_a_batch_is_a_consumer_span_linked_to_the_appends(
    telemetry: Telemetry, shared_store_url: str
) -> None:
    tracer = trace.get_tracer("test")
    with EventStore.open(shared_store_url) as store:
        with tracer.start_as_current_span("first command"):
            two = [NewEvent("Note", {"text": "a"}), NewEvent("Note", {"text": "b"})]
            store.append("note-1", two)
        with tracer.start_as_current_span("second command"):
            last = store.append("note-2", [NewEvent("Note", {"text": "c"})]).positions[-1]
        with ProjectionRunner(store, [notes()], lease_ttl=None) as runner:
            runner.catch_up()
            (status,) = runner.status()
    appends = telemetry.finished("publish note")
    (batch,) = telemetry.finished("process notes")
    assert batch.kind is SpanKind.CONSUMER
    assert batch.attributes is not None
    assert batch.attributes["messaging.consumer.group.name"] == "notes"
    assert batch.attributes["messaging.operation.type"] == "process"
    assert batch.attributes["messaging.batch.message_count"] == 3
    assert batch.attributes["eventcraft.position.last"] == last
    linked = {(link.context.trace_id, link.context.span_id) for link in batch.links}
    assert linked == {(s.context.trace_id, s.context.span_id) for s in appends}
    assert len({s.context.trace_id for s in appends}) == 2, "two commands, two traces"
    group = {"messaging.consumer.group.name": "notes"}
    assert telemetry.total("eventcraft.projection.events", **group) == 3
    assert telemetry.total("eventcraft.projection.batches") == 1
    assert status.lag_events == 0
    # the runner is closed: it is no longer reported
    assert telemetry.points("eventcraft.projection.lag") == []


def test_the_lag_gauges_report_what_a_runner_has_not_applied(
    telemetry: Telemetry, shared_store_url: str
) -> None:
    with (
        EventStore.open(shared_store_url) as store,
        ProjectionRunner(store, [notes()], lease_ttl=None) as runner,
    ):
        store.append("note-1", [NewEvent("Note", {"text": "a"}), NewEvent("Note", {"text": "b"})])
        (behind,) = telemetry.points("eventcraft.projection.lag")
        (age,) = telemetry.points("eventcraft.projection.lag.duration")
        runner.catch_up()
        (current,) = telemetry.points("eventcraft.projection.lag")
    assert behind.attributes == {"messaging.consumer.group.name": "notes"}
    assert behind.value == 2
    assert age.value >= 0.0
    assert current.value == 0


def test_a_failing_handler_and_a_parked_event_are_recorded_on_the_batch(
    telemetry: Telemetry, shared_store_url: str
) -> None:
    with EventStore.open(shared_store_url) as store:
        bad = store.append("note-1", [NewEvent("Note", {"text": "bad"})]).positions[0]
        store.append("note-1", [NewEvent("Note", {"text": "fine"})])
        with ProjectionRunner(store, [notes(then="skip")], lease_ttl=None) as runner:
            runner.catch_up()
            assert [p.position for p in runner.parked("notes")] == [bad]
            (parked_now,) = telemetry.points("eventcraft.projection.parked")
    (batch,) = telemetry.finished("process notes")
    names = [e.name for e in batch.events]
    assert names == ["handler failed", "handler failed", "parked"]
    parked = batch.events[-1].attributes
    assert parked is not None
    assert parked["eventcraft.position"] == bad
    assert parked["error.type"] == "ValueError"
    assert parked["eventcraft.projection.stopped"] is False
    assert telemetry.total("eventcraft.projection.events_parked") == 1
    assert telemetry.total("eventcraft.projection.failures", **{"error.type": "ValueError"}) == 2
    assert parked_now.value == 1


def test_a_projection_stopped_by_a_parked_event_ends_its_span_in_error(
    telemetry: Telemetry, sqlite_url: str
) -> None:
    with EventStore.open(sqlite_url) as store:
        store.append("note-1", [NewEvent("Note", {"text": "bad"})])
        with ProjectionRunner(store, [notes(then="stop")], lease_ttl=None) as runner:
            try:
                runner.catch_up()
            except Exception as error:
                stopped = error
    assert type(stopped).__name__ == "ProjectionStopped"
    (batch,) = telemetry.finished("process notes")
    assert batch.status.status_code is StatusCode.ERROR
    assert batch.attributes is not None
    assert batch.attributes["error.type"] == "ProjectionStopped"


def test_log_records_carry_the_projection_and_position_as_fields(
    sqlite_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    with EventStore.open(sqlite_url) as store:
        bad = store.append("note-1", [NewEvent("Note", {"text": "bad"})]).positions[0]
        with (
            ProjectionRunner(store, [notes(then="skip")], lease_ttl=None) as runner,
            caplog.at_level("WARNING", logger="eventcraft.projections"),
        ):
            runner.catch_up()
    (record,) = [r for r in caplog.records if "parked" in r.getMessage()]
    assert record.name == "eventcraft.projections"
    assert record.__dict__["projection"] == "notes"
    assert record.__dict__["position"] == bad
    assert record.__dict__["stream_id"] == "note-1"
