"""The async store's append queue never strands an append: a member queued just as the
last sender finishes gets a sender of its own.

The race the stress test `test_subscribers_see_every_event_of_racing_tasks_once_in_order`
hit once in a few CI runs under load (an append waiting forever), made deterministic: a
sender that has emptied the queue is done, but the callback that forgets it runs only on
the loop's next turn; a caller woken by that sender's last answer runs before it.
"""

from __future__ import annotations

import asyncio
from typing import Any

from eventcraft.eventstore.postgres.async_appends import AppendQueue


class FakeServer:
    """Stands for the pool: answers each call with one answer a member, once let go."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.calls = 0

    async def run(self, call: Any) -> list[str]:
        self.calls += 1
        await self.gate.wait()
        return [f"answer {self.calls}"] * len(call.keywords["members"])


def test_a_member_queued_as_the_last_sender_finishes_is_sent() -> None:
    async def main() -> None:
        server = FakeServer()
        queue = AppendQueue(server.run, senders=1, notify=b"")

        async def twice() -> tuple[Any, Any]:
            first = await queue.submit(())  # queued: an inline append is in flight
            # Woken by the sender's last answer, before the sender is forgotten.
            second = await queue.submit(())
            return first, second

        inline = asyncio.create_task(queue.submit(()))
        await asyncio.sleep(0)  # the inline append is in flight
        caller = asyncio.create_task(twice())
        await asyncio.sleep(0)
        server.gate.set()
        await asyncio.wait_for(inline, 5)
        first, second = await asyncio.wait_for(caller, 5)
        assert first is not None and second is not None
        await queue.close()

    asyncio.run(main())
