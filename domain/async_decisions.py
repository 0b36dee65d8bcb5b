"""`AsyncDecisions`: `Decisions` over an `AsyncEventStore`, awaited.

What is read, how it is folded, what is appended and when a lost race is
tried again are `DecisionRules`', the same as the sync face's; only the
store's calls are awaited, and a decide function may be a coroutine.
"""

from __future__ import annotations

import inspect
import uuid
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from eventcraft.eventstore import AppendConditionFailed, AppendResult, AsyncEventStore

from .decision import Decided, Decision, DecisionProjection, DecisionRules, conflict
from .registry import EventRegistry
from .repository_rules import check_attempts, taken_before


class AsyncDecisions(DecisionRules):
    """Decisions made on the events of an async `store` whose classes `registry` holds."""

    def __init__(self, store: AsyncEventStore, registry: EventRegistry) -> None:
        super().__init__(registry)
        self.store = store

    async def read(self, projections: Mapping[str, DecisionProjection[Any]]) -> Decision:
        """As `Decisions.read`."""
        plan = self.plan(projections)
        return self.fold(plan, await self.store.read_query(plan.query))

    async def append(
        self,
        decision: Decision,
        stream_id: str,
        decided: Decided,
        *,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: uuid.UUID | None = None,
    ) -> AppendResult | None:
        """As `Decisions.append`."""
        events = self.to_append(decided, metadata, idempotency_key)
        if not events:
            return None
        return await self.store.append(stream_id, events, condition=decision.condition)

    async def execute(
        self,
        projections: Mapping[str, DecisionProjection[Any]],
        decide: Callable[[Decision], Decided | Awaitable[Decided]],
        *,
        stream_id: str,
        attempts: int = 5,
        metadata: Mapping[str, Any] | None = None,
        idempotency_key: uuid.UUID | None = None,
    ) -> AppendResult | None:
        """As `Decisions.execute`; `decide` is awaited if it returns an awaitable."""
        check_attempts(attempts)
        plan = self.plan(projections)
        taken = None
        if idempotency_key is not None:
            taken = taken_before(await self.store.read_event(idempotency_key), stream_id)
        for attempt in range(1, attempts + 1):
            decision = self.fold(plan, await self.store.read_query(plan.query), taken=taken)
            outcome = decide(decision)
            decided = await outcome if inspect.isawaitable(outcome) else outcome
            try:
                return await self.append(
                    decision,
                    stream_id,
                    decided,
                    metadata=metadata,
                    idempotency_key=idempotency_key,
                )
            except AppendConditionFailed as failed:
                if attempt == attempts:
                    raise conflict(failed, attempts) from failed
        raise AssertionError("unreachable")
