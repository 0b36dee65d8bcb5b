"""`AsyncRepository`: load aggregates from their streams and save their new events.

Saving appends with the version the aggregate was loaded at, so two
commands that raced on the same aggregate cannot both win: the second gets
`WrongExpectedVersion`, and `execute` runs it again on the fresh state.
What is decided (which snapshot fits, what a save appends and expects, when
a snapshot is due, how many lost races to retry) is `RepositoryRules`',
written once for the sync and async repositories.
"""

from __future__ import annotations

import inspect
import logging
import uuid
from collections.abc import Awaitable, Callable, Mapping, Sequence
from types import EllipsisType
from typing import TYPE_CHECKING, Any, TypeVar, overload

from eventcraft.eventstore import (
    AppendResult,
    AsyncEventStore,
    EventStoreError,
    RecordedEvent,
    WrongExpectedVersion,
)

from . import telemetry
from .aggregate import Aggregate
from .errors import AggregateNotFound
from .evolve import evolve
from .repository_rules import RepositoryRules, check_attempts, taken_before

A = TypeVar("A", bound=Aggregate[Any])
R = TypeVar("R")

log = logging.getLogger("eventcraft.domain")


class AsyncRepository(RepositoryRules[A]):
    """Aggregates of one type, kept in an `AsyncEventStore`.

    `execute` is the usual way in: it loads an aggregate, runs a command on it and
    saves what it recorded, again on a fresh load if another save came first.

    Example::

        from eventcraft.domain import (
            Aggregate, AsyncRepository, DomainEvent, EventRegistry, State, evolves,
        )
        from eventcraft.eventstore import AsyncEventStore

        bank_events = EventRegistry()

        @bank_events.event("MoneyDeposited")
        class MoneyDeposited(DomainEvent):
            amount: int

        class AccountState(State):
            balance: int = 0

            @evolves
            def deposited(self, event: MoneyDeposited) -> "AccountState":
                return self.replace(balance=self.balance + event.amount)

        class BankAccount(Aggregate[AccountState]):
            category = "account"
            registry = bank_events

            def deposit(self, amount: int) -> None:
                self.record(MoneyDeposited(amount=amount))

        store = await AsyncEventStore.open("sqlite:///bank.db")
        accounts = AsyncRepository(store, BankAccount)
        await accounts.execute("7", lambda account: account.deposit(500), create=True)
        await accounts.execute("7", lambda account: account.deposit(250))
        account = await accounts.load("7")
        assert (account.version, account.state.balance) == (2, 750)
        then = await accounts.load("7", version=1)  # as it was after its first event
        assert then.state.balance == 500
        await store.close()
    """

    def __init__(
        self,
        store: AsyncEventStore,
        aggregate_type: type[A],
        *,
        snapshot_every: int | EllipsisType | None = ...,
    ) -> None:
        super().__init__(aggregate_type, snapshot_every=snapshot_every)
        self.store = store

    async def load(self, aggregate_id: str, *, version: int | None = None) -> A:
        """The aggregate rebuilt from its stream (after its snapshot, if one fits).

        With `version`, the aggregate as it was then: its first `version`
        events (all of them if it has fewer). Raises `AggregateNotFound` when
        its stream holds no events.
        """
        until = self._until(version)
        aggregate = self.aggregate_type(aggregate_id)
        cls = self.aggregate_type
        state, version = aggregate.state, 0
        with telemetry.loading(cls.category, aggregate.stream_id) as load:
            if self.snapshot_every is not None:
                snapshot = await self.store.load_snapshot(aggregate.stream_id)
                state, version = self._start_from(aggregate, self._fitting(snapshot, until))
                load.snapshot(version)
            decode, stream_id = cls.registry.decode_encoded, aggregate.stream_id
            reading = self.store.read_stream_encoded(stream_id, from_version=version + 1)
            async for stored in reading:
                if stored.version > until:
                    break
                state = evolve(state, decode(stored, stream_id))
                version = stored.version
            load.loaded(version)
        if version == 0:
            raise AggregateNotFound(cls.__qualname__, aggregate_id, aggregate.stream_id)
        aggregate._restore(state, version)
        return aggregate

    async def exists(self, aggregate_id: str) -> bool:
        stream_id = self.aggregate_type.stream_id_of(aggregate_id)
        return await self.store.stream_version(stream_id) > 0

    async def save(
        self,
        aggregate: A,
        *,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: uuid.UUID | None = None,
    ) -> AppendResult | None:
        """Append the aggregate's pending events, expecting its stored version.

        Their metadata comes from the current `command_context` (else new
        ids), updated by `metadata`. Raises `WrongExpectedVersion` if another
        save came first; nothing is written then. Saving again after a lost
        answer is safe: the events keep their ids. Returns None when there
        was nothing to save.
        """
        to_append = self._to_append(aggregate, metadata, idempotency_key)
        if to_append is None:
            return None
        events, expected = to_append
        stored = aggregate.stored_version
        result = await self.store.append(aggregate.stream_id, events, expected_version=expected)
        aggregate._saved(result.version)
        if self._snapshot_due(stored, result.version):
            await self._snapshot(aggregate)
        return result

    async def save_all(
        self, aggregates: Sequence[A], *, metadata: Mapping[str, Any] | None = None
    ) -> list[AppendResult | None]:
        """Save several aggregates at once: all of their pending events, or none.

        Each expects its stored version; when one was saved by another
        command meanwhile, `WrongExpectedVersion` names its stream and nothing
        is written. Returns each aggregate's result, None for one with
        nothing pending. Safe to send again after a lost answer, as `save`.
        """
        saves = self._to_append_all(aggregates, metadata)
        if not saves:
            return [None] * len(aggregates)
        results = await self.store.append_many(
            [(aggregate.stream_id, events, expected) for aggregate, events, expected in saves]
        )
        answers, due = self._saved_all(aggregates, saves, results)
        for aggregate in due:
            await self._snapshot(aggregate)
        return answers

    if TYPE_CHECKING:  # ASYNC

        @overload
        async def execute(
            self,
            aggregate_id: str,
            command: Callable[[A], Awaitable[R]],
            *,
            create: bool = False,
            attempts: int = 5,
            idempotency_key: uuid.UUID | None = None,
        ) -> R: ...

        @overload
        async def execute(
            self,
            aggregate_id: str,
            command: Callable[[A], R],
            *,
            create: bool = False,
            attempts: int = 5,
            idempotency_key: uuid.UUID | None = None,
        ) -> R: ...

    async def execute(
        self,
        aggregate_id: str,
        command: Callable[[A], R | Awaitable[R]],
        *,
        create: bool = False,
        attempts: int = 5,
        idempotency_key: uuid.UUID | None = None,
    ) -> R:
        """Load, run `command` on the aggregate, save; again on a fresh load if a save raced.

        A `command` that returns an awaitable (a coroutine function) is awaited.
        With `create`, a missing aggregate starts new instead of raising
        `AggregateNotFound`. After `attempts` lost races, the last
        `WrongExpectedVersion` is raised. Returns what `command` returned.
        With `idempotency_key` (a client's request id), the events' ids derive
        from it: a request sent again stores nothing new (see `save`), and its
        command runs on the state it first ran on, so it returns what it
        returned then instead of refusing what it already did.
        """
        check_attempts(attempts)
        taken = None
        if idempotency_key is not None:
            stream_id = self.aggregate_type.stream_id_of(aggregate_id)
            taken = taken_before(await self.store.read_event(idempotency_key), stream_id)
        for attempt in range(1, attempts + 1):
            if taken is not None:  # sent again: decided on what it saw the first time
                aggregate = await self._as_before(aggregate_id, taken)
            else:
                try:
                    aggregate = await self.load(aggregate_id)
                except AggregateNotFound:
                    if not create:
                        raise
                    aggregate = self.aggregate_type(aggregate_id)
            outcome = command(aggregate)
            if True:  # ASYNC
                if inspect.isawaitable(outcome):
                    outcome = await outcome
            try:
                await self.save(aggregate, idempotency_key=idempotency_key)
            except WrongExpectedVersion:
                if attempt == attempts:
                    raise
                continue
            return outcome
        raise AssertionError("unreachable")

    async def _as_before(self, aggregate_id: str, taken: RecordedEvent) -> A:
        """The aggregate as it was before the event `taken` was appended."""
        if taken.version == 1:
            return self.aggregate_type(aggregate_id)
        return await self.load(aggregate_id, version=taken.version - 1)

    async def _snapshot(self, aggregate: A) -> None:
        # The events are saved: a snapshot that fails costs only speed, so
        # it must not turn a successful save into an error.
        try:
            await self.store.save_snapshot(aggregate.stream_id, **self._snapshot_of(aggregate))
        except EventStoreError as error:
            log.warning("no snapshot of %s: %s", aggregate.stream_id, telemetry.unsaved(error))
