"""Where each projection stands, read from its database without setting anything up."""

from __future__ import annotations

from eventcraft.eventstore import EventStore
from eventcraft.projections import Database, ProjectionRunner, checkpoint_positions

from .models import append_history, audit, balances


def test_a_database_no_runner_set_up_has_no_checkpoints_and_gets_none(store: EventStore) -> None:
    append_history(store, accounts=1, per_account=2)
    database = Database.of(None, store)
    try:
        assert checkpoint_positions(database, ["balances"]) is None
        assert checkpoint_positions(database, ["balances"]) is None  # the look created nothing
    finally:
        database.close()


def test_the_positions_of_the_projections_named_that_have_run(store: EventStore) -> None:
    last = append_history(store, accounts=2, per_account=3)
    with ProjectionRunner(store, [balances, audit]) as runner:
        runner.catch_up("balances")
        positions = checkpoint_positions(runner.database, ["balances", "nope"])
        assert positions == {"balances": last}
        assert checkpoint_positions(runner.database, []) == {}
