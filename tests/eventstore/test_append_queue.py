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

from eventcraft.eventstore import ANY, AppendCondition, NewEvent, Query, QueryItem
from eventcraft.eventstore.arguments import append_call
from eventcraft.eventstore.group_commit import MOST_MEMBERS
from eventcraft.eventstore.postgres.async_appends import AppendQueue


class FakeServer:
    """Stands for the pool: answers each call with one answer a member, once let go."""

    def __init__(self) -> None:
        self.gate = asyncio.Event()
        self.calls = 0
        self.sizes: list[int] = []
        """The members of each call, in the order the calls were made."""

    async def run(self, call: Any, since: float | None = None) -> list[str]:
        self.calls += 1
        self.sizes.append(len(call.keywords["members"]))
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


async def _settle() -> None:
    for _ in range(10):  # every task runs as far as it can
        await asyncio.sleep(0)


def _queue_behind_an_inline_append(waiting: int) -> list[int]:
    """The calls' sizes while gated and at the end: `waiting` members queued at once,
    two senders allowed, while an inline append is in flight."""

    async def main() -> list[int]:
        server = FakeServer()
        queue = AppendQueue(server.run, senders=2, notify=b"")
        inline = asyncio.create_task(queue.submit(()))
        await asyncio.sleep(0)  # the inline append is in flight
        callers = [asyncio.create_task(queue.submit(())) for _ in range(waiting)]
        await _settle()
        in_flight = list(server.sizes)
        server.gate.set()
        answers = await asyncio.wait_for(asyncio.gather(inline, *callers), 5)
        assert len(answers) == waiting + 1
        await queue.close()
        return [len(in_flight), *server.sizes]

    return asyncio.run(main())


def test_one_group_goes_at_a_time_while_it_takes_every_append_queued() -> None:
    # 33 queued: one group takes 32, and the one left waits for that sender's next group.
    assert _queue_behind_an_inline_append(MOST_MEMBERS + 1) == [2, 1, MOST_MEMBERS, 1]


def test_a_second_group_goes_beside_the_first_while_more_wait_than_it_takes() -> None:
    # 70 queued: two groups of 32 in flight side by side, then the 6 left.
    assert _queue_behind_an_inline_append(70) == [3, 1, MOST_MEMBERS, MOST_MEMBERS, 6]


def test_a_conditional_append_gets_a_second_sender_at_once() -> None:
    """A conditional append's read grows stale while it waits: it goes beside the group
    in flight, with what is queued, though that sender's next group would take them."""
    condition = AppendCondition(Query([QueryItem(types=["Decided"], tags=["course:c1"])]), 0)
    hurried = append_call("decision-1", [NewEvent("Decided", {})], ANY, 1024, condition)

    async def main() -> list[int]:
        server = FakeServer()
        queue = AppendQueue(server.run, senders=2, notify=b"")
        inline = asyncio.create_task(queue.submit(()))
        await asyncio.sleep(0)  # the inline append is in flight
        callers = [asyncio.create_task(queue.submit(())) for _ in range(3)]
        await _settle()  # a sender took the three
        callers.append(asyncio.create_task(queue.submit(())))
        await _settle()  # one group takes it: it waits for that sender
        callers.append(asyncio.create_task(queue.submit((hurried,))))
        await _settle()
        in_flight = list(server.sizes)
        server.gate.set()
        await asyncio.wait_for(asyncio.gather(inline, *callers), 5)
        await queue.close()
        assert server.sizes == in_flight
        return in_flight

    assert asyncio.run(main()) == [1, 3, 2]


class _Busy:
    """Stands for the pool: answers each call after a few turns of the loop, as a server
    does after its round trip."""

    def __init__(self) -> None:
        self.sizes: list[int] = []

    async def run(self, call: Any, since: float | None = None) -> list[str]:
        self.sizes.append(len(call.keywords["members"]))
        for _ in range(3):
            await asyncio.sleep(0)
        return ["answer"] * len(call.keywords["members"])


def test_callers_answered_together_send_their_next_appends_together() -> None:
    """Sixteen tasks appending in a loop: once a group answers them, their next appends go
    in one group. The sender used to take at once what was queued meanwhile, the one append
    of the caller answered alone before: every other group held a single append, a
    transaction and a commit for one (16 tasks on PostgreSQL: groups of 1 and 15 in turn,
    11,000-11,500 appends/s; 12,000-12,500 in groups of 16)."""

    async def main() -> list[int]:
        server = _Busy()
        queue = AppendQueue(server.run, senders=2, notify=b"")

        async def caller() -> None:
            for _ in range(10):
                await queue.submit(())

        await asyncio.wait_for(asyncio.gather(*(caller() for _ in range(16))), 5)
        return server.sizes

    sizes = asyncio.run(main())
    assert sum(sizes) == 160
    # The first append goes alone, the fifteen queued behind it together; then all 16.
    assert sizes[:2] == [1, 15] and set(sizes[2:]) == {16}, sizes
