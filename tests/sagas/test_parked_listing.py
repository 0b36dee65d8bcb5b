"""The console lists parked sagas on every request: it keeps one index of them per store
and takes in only what was appended since the last request, however long the log."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from eventcraft.eventstore import EventStore, RecordedEvent
from eventcraft.sagas import Orchestrator, Saga, Step, StepContext

from eventcraft.app import App
from eventcraft.operations import sagas as operations


class Counting(EventStore):
    """The store, counting the events its `read_all` hands over."""

    read = 0

    def read_all(
        self,
        after: int = 0,
        limit: int | None = None,
        *,
        categories: Sequence[str] | str | None = None,
        types: Sequence[str] | str | None = None,
    ) -> Iterator[RecordedEvent]:
        for event in super().read_all(after, limit, categories=categories, types=types):
            self.read += 1
            yield event


def _broken(data: dict[str, Any], context: StepContext) -> None:
    raise RuntimeError("a bug: the saga parks")


BROKEN = Saga("broken", [Step("first", lambda data, context: {}), Step("second", _broken)])


def test_listing_the_parked_sagas_again_reads_only_what_was_appended_since(
    shared_store_url: str,
) -> None:
    app = App(sagas=[BROKEN])
    with EventStore.open(shared_store_url) as store, Counting.open(shared_store_url) as listing:
        assert isinstance(listing, Counting)
        orchestrator = Orchestrator(store, app.sagas)
        for n in range(3):
            orchestrator.start(BROKEN, {}, saga_id=str(n))
        orchestrator.run_pending()

        first = operations.parked(listing, app)
        assert [s.saga_id for s in first] == ["0", "1", "2"]
        assert listing.read == 6  # each one started and parked

        listing.read = 0
        assert operations.parked(listing, app) == first
        assert listing.read == 0  # nothing new

        orchestrator.start(BROKEN, {}, saga_id="3")
        orchestrator.run_pending()
        orchestrator.resolve("broken", "0", "settled by hand")
        listing.read = 0
        assert [s.saga_id for s in operations.parked(listing, app)] == ["1", "2", "3"]
        assert listing.read == 3  # 3 started and parked, 0 resolved
