"""What only the async store has: subscriptions, tasks racing on one store, cancellation,
and real processes appending through it. The rest of its behaviour is the conformance
suite's, run over both APIs (test_conformance.py)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from concurrent.futures import ProcessPoolExecutor
from typing import TypeVar

import pytest
from eventcraft.eventstore import (
    AsyncEventStore,
    EventStore,
    InvalidEvent,
    NewEvent,
    RecordedEvent,
    StoreUnavailable,
    UnsupportedStoreURL,
    WrongExpectedVersion,
)

from ..processes import PROCESSES
from . import async_workers, workers

DEADLINE = 60.0
"""Longest any test here runs before it fails, in seconds: none waits on time to pass."""

T = TypeVar("T")


def run(test: Callable[[AsyncEventStore], Awaitable[T]], url: str) -> T:
    async def main() -> T:
        async with await AsyncEventStore.open(url) as store:
            return await asyncio.wait_for(test(store), DEADLINE)

    return asyncio.run(main())


def placed(n: int = 0) -> list[NewEvent]:
    return [NewEvent("Placed", {"n": n})]


async def take(events: object, count: int) -> list[RecordedEvent]:
    taken: list[RecordedEvent] = []
    async for event in events:  # type: ignore[attr-defined]
        taken.append(event)
        if len(taken) == count:
            break
    return taken


def test_a_subscription_reads_the_past_then_each_new_event_as_it_commits(store_url: str) -> None:
    async def test(store: AsyncEventStore) -> None:
        await store.append("order-1", placed(1))
        subscription = store.subscribe()
        first = await take(subscription, 1)

        async def later() -> None:
            await asyncio.sleep(0.05)  # the subscriber is asleep in its wait by now, or not
            await store.append("order-2", placed(2))

        appending = asyncio.create_task(later())
        second = await take(subscription, 1)
        await appending
        assert [e.data["n"] for e in first + second] == [1, 2]
        assert first[0].position < second[0].position

    run(test, store_url)


def test_a_subscription_with_filters_passes_other_events_without_spinning(
    store_url: str,
) -> None:
    async def test(store: AsyncEventStore) -> None:
        for n in range(5):
            await store.append(f"noise-{n}", placed(n))
        looks = 0
        original = store._backend.high_water_mark

        async def counted() -> int:
            nonlocal looks
            looks += 1
            return await original()

        store._backend.high_water_mark = counted  # type: ignore[method-assign]
        subscription = store.subscribe(categories="order")

        async def later() -> None:
            await asyncio.sleep(0.3)
            await store.append("order-1", placed(9))

        appending = asyncio.create_task(later())
        (event,) = await take(subscription, 1)
        await appending
        assert event.stream_id == "order-1"
        # Past the noise, the subscription sleeps until the append: a spinning one
        # would have looked at the log hundreds of times in 0.3 s.
        assert looks < 40

    run(test, store_url)


def test_subscribers_see_every_event_of_racing_tasks_once_in_order(store_url: str) -> None:
    writers, appends = 20, 10

    async def test(store: AsyncEventStore) -> None:
        async def write(w: int) -> list[uuid.UUID]:
            ids = []
            for n in range(appends):
                batch = [NewEvent("Mixed", {"w": w, "n": n})]
                await store.append(f"shared-{n % 3}" if w % 2 else f"private-{w}", batch)
                ids.append(batch[0].id)
            return ids

        total = writers * appends
        subscriber = asyncio.create_task(take(store.subscribe(), total))
        written = await asyncio.gather(*(write(w) for w in range(writers)))
        seen = await subscriber
        assert [e.position for e in seen] == sorted({e.position for e in seen})
        assert {e.id for e in seen} == {i for ids in written for i in ids}
        assert seen == [e async for e in store.read_all()]

    run(test, store_url)


def test_of_a_hundred_tasks_expecting_one_version_exactly_one_wins(store_url: str) -> None:
    async def test(store: AsyncEventStore) -> None:
        await store.append("raced-1", placed())

        async def one(n: int) -> bool:
            try:
                await store.append("raced-1", placed(n), expected_version=1)
            except WrongExpectedVersion as error:
                assert error.actual == 2
                return False
            return True

        outcomes = await asyncio.gather(*(one(n) for n in range(100)))
        assert sum(outcomes) == 1
        assert await store.stream_version("raced-1") == 2

    run(test, store_url)


def test_a_cancelled_wait_and_a_cancelled_subscription_leave_the_store_usable(
    store_url: str,
) -> None:
    async def test(store: AsyncEventStore) -> None:
        waiting = asyncio.create_task(store.wait_for_events(after=0, timeout=3600))
        tailing = asyncio.create_task(take(store.subscribe(), 1))
        await asyncio.sleep(0.05)
        waiting.cancel()
        tailing.cancel()
        for task in (waiting, tailing):
            with pytest.raises(asyncio.CancelledError):
                await task
        assert (await store.append("order-1", placed())).version == 1
        assert await store.wait_for_events(after=0, timeout=DEADLINE) is True

    run(test, store_url)


def test_appends_cancelled_in_flight_are_whole_or_absent_and_a_retry_settles_them(
    store_url: str,
) -> None:
    async def test(store: AsyncEventStore) -> None:
        batches = [[NewEvent("Placed", {"n": n, "i": i}) for i in range(3)] for n in range(30)]
        tasks = [asyncio.create_task(store.append(f"order-{n}", b)) for n, b in enumerate(batches)]
        await asyncio.sleep(0)
        for task in tasks[::2]:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for n, batch in enumerate(batches):
            stored = [e.id async for e in store.read_stream(f"order-{n}")]
            assert stored in ([], [e.id for e in batch])
            result = await store.append(f"order-{n}", batch)  # the retry a client would send
            assert result.version == 3
        assert len([e async for e in store.read_all()]) == 90

    run(test, store_url)


def test_a_store_refuses_bad_arguments_before_anything_is_awaited(store_url: str) -> None:
    async def test(store: AsyncEventStore) -> None:
        with pytest.raises(InvalidEvent, match="stream id"):
            store.read_stream("")
        with pytest.raises(InvalidEvent, match="after"):
            store.subscribe(after=-1)
        with pytest.raises(InvalidEvent, match="category"):
            store.subscribe(categories=[])

    run(test, store_url)


def test_a_closed_store_says_so(store_url: str) -> None:
    async def test() -> None:
        store = await AsyncEventStore.open(store_url)
        await store.close()
        await store.close()  # idempotent
        if not store_url.startswith("memory"):
            with pytest.raises(StoreUnavailable):
                await store.append("order-1", placed())

    asyncio.run(test())


def test_an_unusable_url_is_refused_and_an_unreachable_database_named() -> None:
    with pytest.raises(UnsupportedStoreURL, match="no backend"):
        asyncio.run(AsyncEventStore.open("mysql://x"))
    url = "postgresql://nobody:secret@127.0.0.1:1/none"
    with pytest.raises(StoreUnavailable, match=r"127\.0\.0\.1:1") as raised:
        asyncio.run(AsyncEventStore.open(url))
    assert "secret" not in str(raised.value)


@pytest.mark.slow
def test_racing_processes_of_racing_tasks_have_one_winner_per_round(
    shared_store_url: str,
) -> None:
    processes, tasks, rounds = 3, 10, 5
    EventStore.open(shared_store_url).close()  # create the schema before the race
    with (
        PROCESSES.Manager() as manager,
        ProcessPoolExecutor(processes, mp_context=PROCESSES) as pool,
    ):
        barrier = manager.Barrier(processes)
        futures = [
            pool.submit(async_workers.race, shared_store_url, "raced-1", rounds, barrier, tasks)
            for _ in range(processes)
        ]
        outcomes = [future.result(timeout=120) for future in futures]
    assert [sum(o[r] for o in outcomes) for r in range(rounds)] == [1] * rounds
    with EventStore.open(shared_store_url) as store:
        assert store.stream_version("raced-1") == rounds


def test_a_subscription_sees_every_event_writer_processes_commit_once_in_order(
    shared_store_url: str,
) -> None:
    writers, appends = 3, 60
    EventStore.open(shared_store_url).close()

    async def test(store: AsyncEventStore) -> None:
        seen: list[RecordedEvent] = []

        async def subscribe() -> None:
            async for event in store.subscribe():
                seen.append(event)

        subscriber = asyncio.create_task(subscribe())
        with ProcessPoolExecutor(writers, mp_context=PROCESSES) as pool:
            futures = [
                pool.submit(workers.write_mix, shared_store_url, w, appends, seed=w)
                for w in range(writers)
            ]
            results = await asyncio.gather(*(asyncio.wrap_future(f) for f in futures))
        written = {i for ids in results for i in ids}
        while len(seen) < len(written):  # bounded by DEADLINE
            await store.wait_for_events(seen[-1].position if seen else 0, timeout=1)
            await asyncio.sleep(0)
        subscriber.cancel()
        assert [e.position for e in seen] == sorted({e.position for e in seen})
        assert {str(e.id) for e in seen} == written
        assert [e.id for e in seen] == [e.id async for e in store.read_all()]

    run(test, shared_store_url)


def test_a_subscription_cancelled_while_appends_wake_it_always_ends(store_url: str) -> None:
    async def test(store: AsyncEventStore) -> None:
        async def drain() -> None:
            async for _ in store.subscribe():
                pass

        for round_ in range(30):
            tailing = asyncio.create_task(drain())
            await store.append(f"order-{round_}", placed(round_))
            await asyncio.sleep(0.001 * (round_ % 7))  # cancel at varying moments of its wait
            tailing.cancel()
            # Python 3.11's wait_for could swallow this cancellation, and the task ran on.
            done, _ = await asyncio.wait([tailing], timeout=5)
            assert done, f"round {round_}: the cancelled subscription kept running"

    run(test, store_url)


def test_appends_sent_together_each_stand_or_fall_alone(store_url: str) -> None:
    async def test(store: AsyncEventStore) -> None:
        stored = [NewEvent("Placed", {"n": n}) for n in range(10)]
        for n, event in enumerate(stored):
            await store.append(f"old-{n}", [event])

        async def good(n: int) -> str:
            await store.append(f"new-{n}", placed(n), expected_version=0)
            return "written"

        async def stale(n: int) -> str:
            try:
                await store.append(f"old-{n}", placed(n), expected_version=0)
            except WrongExpectedVersion:
                return "refused"
            return "written"

        async def retried(n: int) -> str:
            result = await store.append(f"old-{n}", [stored[n]], expected_version=0)
            return "same" if result.version == 1 else "different"

        # Sent at once, so that on PostgreSQL they share pipelines.
        outcomes = await asyncio.gather(
            *(good(n) for n in range(30)),
            *(stale(n) for n in range(10)),
            *(retried(n) for n in range(10)),
        )
        assert outcomes == ["written"] * 30 + ["refused"] * 10 + ["same"] * 10
        assert len([e async for e in store.read_all()]) == 40

    run(test, store_url)
