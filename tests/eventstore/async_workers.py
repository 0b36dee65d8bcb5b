"""Code that runs in separate processes during the async concurrency tests."""

from __future__ import annotations

import asyncio
from typing import Any

from eventcraft.eventstore import AsyncEventStore, NewEvent, WrongExpectedVersion


def race(url: str, stream_id: str, rounds: int, barrier: Any, tasks: int) -> list[int]:
    """In each round, `tasks` tasks of this process append to `stream_id` expecting the
    version the round starts at; how many of them won, per round."""

    async def main() -> list[int]:
        won = []
        async with await AsyncEventStore.open(url) as store:
            for round_ in range(rounds):
                await asyncio.to_thread(barrier.wait)

                async def one(expected: int) -> int:
                    try:
                        await store.append(stream_id, [NewEvent("Raced", {})], expected)
                    except WrongExpectedVersion:
                        return 0
                    return 1

                won.append(sum(await asyncio.gather(*(one(round_) for _ in range(tasks)))))
        return won

    return asyncio.run(main())
