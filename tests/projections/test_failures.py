"""What the error policy promises: how often a failing event is tried, and what it leaves."""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any, Literal

import pytest
import sqlalchemy as sa
from eventcraft.eventstore import EventStore, NewEvent, RecordedEvent
from eventcraft.projections import (
    DefinitionError,
    ErrorPolicy,
    Fold,
    Projection,
    ProjectionRunner,
    ProjectionStopped,
    ReadModel,
    State,
)

from .models import failing_once, notes, notes_table, rows

scores_table = sa.Table(
    "scores",
    sa.MetaData(),
    sa.Column("player", sa.Text, primary_key=True),
    sa.Column("points", sa.Integer, nullable=False),
)


def counted_notes(attempts: int, then: Literal["stop", "skip"], tries: Counter[int]) -> Projection:
    """Writes a note per event and counts each run of its handler; 'bad' always raises."""
    projection = Projection(
        "counted-notes",
        tables=[notes_table],
        on_error=ErrorPolicy(attempts=attempts, backoff=0, then=then),
    )

    @projection.on("Note")
    def note(read_model: ReadModel, event: RecordedEvent) -> None:
        tries[event.position] += 1
        if event.data["text"] == "bad":
            raise ValueError("cannot take 'bad'")
        read_model.execute(
            sa.insert(read_model[notes_table]).values(
                position=event.position, text=event.data["text"]
            )
        )

    return projection


def scores(then: Literal["stop", "skip"], tries: Counter[int]) -> Fold:
    """Points per player; a 'Glitch' event makes `apply` return a bare number."""

    def apply(state: State, event: RecordedEvent) -> Any:
        tries[event.position] += 1
        if event.type == "Glitch":
            return 5
        return {**state, "points": state["points"] + event.data["points"]}

    return Fold(
        "scores",
        table=scores_table,
        key=lambda event: event.stream_id,
        initial=lambda key: {"player": key, "points": 0},
        apply=apply,
        on_error=ErrorPolicy(attempts=2, backoff=0, then=then),
    )


@pytest.mark.parametrize("attempts", [1, 2, 3])
@pytest.mark.parametrize("batch_size", [1, 10])
def test_a_handler_under_a_policy_of_n_attempts_runs_n_times(
    store: EventStore, attempts: int, batch_size: int
) -> None:
    first, bad, last = notes(store, "a", "bad", "c")
    tries: Counter[int] = Counter()
    projection = counted_notes(attempts, "skip", tries)
    with ProjectionRunner(store, [projection], batch_size=batch_size) as runner:
        runner.catch_up()
        (parked,) = runner.parked("counted-notes")
        with runner.database.reading() as connection:
            assert rows(connection, notes_table) == [(first, "a"), (last, "c")]
    assert tries[bad] == attempts
    assert (parked.position, parked.attempts) == (bad, attempts)


def test_waiting_on_a_projection_stopped_by_a_failing_event_raises_projection_stopped(
    store: EventStore,
) -> None:
    first, bad, _ = notes(store, "a", "bad", "c")
    tries: Counter[int] = Counter()
    with ProjectionRunner(store, [counted_notes(2, "stop", tries)]) as runner:
        runner.start()
        runner.wait_until(first, timeout=30)
        with pytest.raises(ProjectionStopped) as raised:
            runner.wait_until(bad, timeout=30)
        assert runner.stopped["counted-notes"].position == bad
    stopped = raised.value
    assert (stopped.name, stopped.position) == ("counted-notes", bad)
    assert isinstance(stopped.error, ValueError)
    assert str(stopped) == (
        f"projection 'counted-notes' stopped at position {bad}: ValueError: cannot take 'bad'"
    )


def test_waiting_after_a_catch_up_that_stopped_a_projection_raises_projection_stopped(
    store: EventStore,
) -> None:
    _, bad, _ = notes(store, "a", "bad", "c")
    with ProjectionRunner(store, [counted_notes(1, "stop", Counter())]) as runner:
        with pytest.raises(ProjectionStopped):
            runner.catch_up()
        # It would never get there: said at once, not after the timeout.
        with pytest.raises(ProjectionStopped) as raised:
            runner.wait_until(bad, timeout=5)
        assert runner.stopped["counted-notes"].position == bad
    assert (raised.value.name, raised.value.position) == ("counted-notes", bad)
    assert isinstance(raised.value.error, ValueError)


def test_a_fold_whose_apply_returns_no_row_fails_that_event_under_its_policy(
    store: EventStore,
) -> None:
    first = store.append("player-1", [NewEvent("Scored", {"points": 3})]).positions[0]
    glitch = store.append("player-2", [NewEvent("Glitch", {})]).positions[0]
    last = store.append("player-1", [NewEvent("Scored", {"points": 4})]).positions[0]
    tries: Counter[int] = Counter()
    with ProjectionRunner(store, [scores("skip", tries)], batch_size=10) as runner:
        runner.catch_up()
        (parked,) = runner.parked("scores")
        with runner.database.reading() as connection:
            assert rows(connection, scores_table) == [("player-1", 7)]
        assert runner.status()[0].position == last
    assert (parked.position, parked.type, parked.attempts) == (glitch, "Glitch", 2)
    assert parked.error == (
        "DefinitionError: scores: apply must return a row (a dict) or None, not 5 (int), "
        f"for the event at position {glitch} (Glitch)"
    )
    assert (tries[first], tries[glitch]) == (2, 2)  # the first: in the failed batch, then alone


def test_a_fold_whose_apply_returns_no_row_stops_its_projection_saying_so(
    store: EventStore,
) -> None:
    store.append("player-1", [NewEvent("Scored", {"points": 3})])
    glitch = store.append("player-2", [NewEvent("Glitch", {})]).positions[0]
    with (
        ProjectionRunner(store, [scores("stop", Counter())]) as runner,
        pytest.raises(ProjectionStopped, match="must return a row") as raised,
    ):
        runner.catch_up()
    assert raised.value.position == glitch
    assert isinstance(raised.value.error, DefinitionError)


@pytest.mark.parametrize("kind", ["projection", "subscription"])
def test_a_runner_stopped_during_a_back_off_leaves_the_event_to_its_next_run(
    store: EventStore, kind: str
) -> None:
    first, blip, last = notes(store, "a", "blip", "c")
    sent: list[int] = []
    failed = threading.Event()
    definition = failing_once(kind, sent, failed)
    with ProjectionRunner(store, [definition]) as runner:
        runner.start()
        assert failed.wait(30), "the first try of 'blip' never came"
        runner.stop()  # a deploy, during the minute's back-off before the second try
        assert runner.parked("notes") == []
        assert runner.status()[0].position == first
    with ProjectionRunner(store, [definition]) as again:
        again.catch_up()
        assert again.parked("notes") == []
        assert again.status()[0].position == last
        if kind == "projection":
            with again.database.reading() as connection:
                sent = [position for position, _ in rows(connection, notes_table)]
    assert sent == [first, blip, last]
