"""`GroupCommit`, the machinery that lets appends from many threads share a commit,
with a writer that records the groups it is given."""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Sequence
from functools import partial

import pytest
from eventcraft.eventstore.group_commit import GroupCommit

from ..waiting import until

_LONG = 30.0


class _Writer:
    """Writes groups (doubling each request), holding the first until released."""

    def __init__(self) -> None:
        self.groups: list[list[int]] = []
        self.release = threading.Event()
        self.release.set()
        self.writing = threading.Event()

    def __call__(self, requests: Sequence[int]) -> list[int | BaseException]:
        self.groups.append(list(requests))
        self.writing.set()
        assert self.release.wait(_LONG)
        return [ValueError(f"odd {r}") if r % 2 else r * 2 for r in requests]


def _submit_all(
    commit: GroupCommit[int, int], requests: Sequence[int]
) -> tuple[list[threading.Thread], dict[int, object]]:
    answers: dict[int, object] = {}

    def submit(request: int) -> None:
        try:
            answers[request] = commit.submit(request)
        except ValueError as error:
            answers[request] = str(error)
        except BaseException as error:  # an interrupt, or what stood for it: kept as is
            answers[request] = error

    threads = [threading.Thread(target=submit, args=(r,), daemon=True) for r in requests]
    for thread in threads:
        thread.start()
    return threads, answers


def test_a_lone_caller_is_written_at_once_alone() -> None:
    writer = _Writer()
    commit: GroupCommit[int, int] = GroupCommit(writer)
    assert commit.submit(4) == 8
    assert commit.submit(6) == 12
    assert writer.groups == [[4], [6]]


def test_callers_arriving_during_a_write_share_the_next_group() -> None:
    writer = _Writer()
    writer.release.clear()
    commit: GroupCommit[int, int] = GroupCommit(writer, most_groups=1)
    first, answers = _submit_all(commit, [0])
    assert writer.writing.wait(_LONG)
    later, more = _submit_all(commit, [2, 4, 6, 8, 10])
    until(lambda: commit.waiting == 5)
    writer.release.set()
    for thread in first + later:
        thread.join(_LONG)
    assert writer.groups[0] == [0]
    assert sorted(writer.groups[1]) == [2, 4, 6, 8, 10]
    assert {**answers, **more} == {0: 0, 2: 4, 4: 8, 6: 12, 8: 16, 10: 20}


def test_a_group_holds_at_most_most_members() -> None:
    writer = _Writer()
    writer.release.clear()
    commit: GroupCommit[int, int] = GroupCommit(writer, most_members=2, most_groups=1)
    first, _ = _submit_all(commit, [0])
    assert writer.writing.wait(_LONG)
    later, answers = _submit_all(commit, [2, 4, 6, 8, 10])
    until(lambda: commit.waiting == 5)
    writer.release.set()
    for thread in first + later:
        thread.join(_LONG)
    assert [len(group) for group in writer.groups] == [1, 2, 2, 1]
    assert answers == {2: 4, 4: 8, 6: 12, 8: 16, 10: 20}


def _waiting(commit: GroupCommit[int, int], count: int) -> bool:
    return commit.waiting == count


def test_a_group_holds_at_most_most_events_and_a_larger_member_goes_alone() -> None:
    writer = _Writer()
    writer.release.clear()
    # Each request holds as many events as its value.
    commit: GroupCommit[int, int] = GroupCommit(
        writer, most_groups=1, events_of=lambda request: request, most_events=10
    )
    threads, answers = _submit_all(commit, [0])
    assert writer.writing.wait(_LONG)
    replies = [answers]
    for queued, request in enumerate([4, 6, 2, 12, 8], start=1):  # queued in this order
        more, answered = _submit_all(commit, [request])
        threads += more
        replies.append(answered)
        until(partial(_waiting, commit, queued))
    writer.release.set()
    for thread in threads:
        thread.join(_LONG)
    assert writer.groups == [[0], [4, 6], [2], [12], [8]]
    assert {k: v for reply in replies for k, v in reply.items()} == {
        0: 0,
        4: 8,
        6: 12,
        2: 4,
        12: 24,
        8: 16,
    }


def test_a_group_bounded_by_events_needs_room_for_one() -> None:
    with pytest.raises(ValueError, match="room for one event"):
        GroupCommit(_Writer(), events_of=lambda request: request, most_events=0)


def test_a_members_error_reaches_its_caller_alone() -> None:
    writer = _Writer()
    writer.release.clear()
    commit: GroupCommit[int, int] = GroupCommit(writer, most_groups=1)
    first, _ = _submit_all(commit, [0])
    assert writer.writing.wait(_LONG)
    later, answers = _submit_all(commit, [2, 3, 4])
    until(lambda: commit.waiting == 3)
    writer.release.set()
    for thread in first + later:
        thread.join(_LONG)
    assert answers == {2: 4, 3: "odd 3", 4: 8}


def test_a_failed_write_fails_every_caller_of_its_group_and_no_other() -> None:
    def write(requests: Sequence[int]) -> list[int | BaseException]:
        if 13 in requests:
            raise ConnectionError("the database went away")
        return [r for r in requests]

    commit: GroupCommit[int, int] = GroupCommit(write)
    with pytest.raises(ConnectionError):
        commit.submit(13)
    assert commit.submit(1) == 1


def test_a_second_group_goes_beside_the_first_only_when_more_wait_than_one_takes() -> None:
    """Each group costs a transaction and a call: while one group takes every caller
    waiting, one is written at a time; a second goes beside it once more wait."""
    writer = _Writer()
    writer.release.clear()
    commit: GroupCommit[int, int] = GroupCommit(writer, most_members=2, most_groups=2)
    threads, answers = _submit_all(commit, [0])
    assert writer.writing.wait(_LONG)
    replies = [answers]
    for queued, request in enumerate([2, 4], start=1):
        more, answered = _submit_all(commit, [request])
        threads += more
        replies.append(answered)
        until(partial(_waiting, commit, queued))  # one group takes both: nobody leads
    more, answered = _submit_all(commit, [6])  # three wait: this caller leads a second
    threads += more
    replies.append(answered)
    until(lambda: len(writer.groups) == 2)
    assert writer.groups[1] == [2, 4]
    assert commit.waiting == 1
    writer.release.set()
    for thread in threads:
        thread.join(_LONG)
    assert writer.groups == [[0], [2, 4], [6]]
    assert {k: v for reply in replies for k, v in reply.items()} == {0: 0, 2: 4, 4: 8, 6: 12}
    assert commit._leaders == 0


@pytest.mark.parametrize("most_groups", [1, 2, 3])
@pytest.mark.parametrize("most_members", [1, 3])
def test_many_callers_all_get_answers_and_the_leaders_all_stand_down(
    most_groups: int, most_members: int
) -> None:
    """No lost lead, no lost wake-up: every caller answered, whatever the interleaving."""

    def write(requests: Sequence[int]) -> list[int | BaseException]:
        time.sleep(0.0002)  # a write's I/O: other callers queue and leaders overlap meanwhile
        return [r * 2 for r in requests]

    commit: GroupCommit[int, int] = GroupCommit(
        write, most_members=most_members, most_groups=most_groups
    )
    results: list[int] = []

    def work(base: int) -> None:
        for n in range(300):
            results.append(commit.submit(base + n))

    threads = [threading.Thread(target=work, args=(1000 * t,)) for t in range(12)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(_LONG)
    assert None not in results
    assert sorted(results) == sorted(2 * (1000 * t + n) for t in range(12) for n in range(300))
    assert commit._leaders == 0
    assert commit.submit(1) == 2


def test_a_hurried_request_gets_a_second_group_beside_the_first_at_once() -> None:
    """A conditional append's read grows stale while it waits: it goes beside the group
    in flight even when that group's successor would take every caller waiting."""
    writer = _Writer()
    writer.release.clear()
    commit: GroupCommit[int, int] = GroupCommit(
        writer, most_members=2, most_groups=2, hurried=lambda request: request >= 100
    )
    threads, answers = _submit_all(commit, [0])
    assert writer.writing.wait(_LONG)
    replies = [answers]
    more, answered = _submit_all(commit, [2])
    threads += more
    replies.append(answered)
    until(partial(_waiting, commit, 1))  # a plain request waits for the next group
    more, answered = _submit_all(commit, [100])
    threads += more
    replies.append(answered)
    until(lambda: len(writer.groups) == 2)  # while the first is still being written
    assert writer.groups[1] == [2, 100]
    writer.release.set()
    for thread in threads:
        thread.join(_LONG)
    assert writer.groups == [[0], [2, 100]]
    assert {k: v for reply in replies for k, v in reply.items()} == {0: 0, 2: 4, 100: 200}
    assert commit._leaders == 0


class _Interrupt(BaseException):
    """What a signal handler raises: Ctrl-C's `KeyboardInterrupt`, say, in a test."""


def test_a_caller_interrupted_while_queued_leaves_and_the_others_go_on() -> None:
    writer = _Writer()
    writer.release.clear()
    commit: GroupCommit[int, int] = GroupCommit(writer, most_groups=1)
    leader, answers = _submit_all(commit, [0])
    assert writer.writing.wait(_LONG)
    behind: list[tuple[list[threading.Thread], dict[int, object]]] = []

    def queue_behind_then_interrupt() -> None:
        until(lambda: commit.waiting == 1)  # the main thread is queued first
        behind.append(_submit_all(commit, [4]))
        until(lambda: commit.waiting == 2)
        signal.pthread_kill(threading.main_thread().ident or 0, signal.SIGUSR1)

    def interrupt(signum: int, frame: object) -> None:
        raise _Interrupt

    previous = signal.signal(signal.SIGUSR1, interrupt)
    try:
        threading.Thread(target=queue_behind_then_interrupt, daemon=True).start()
        with pytest.raises(_Interrupt):
            commit.submit(2)  # the lead would come to it next, once 0 is written
    finally:
        signal.signal(signal.SIGUSR1, previous)
    writer.release.set()
    ((more, later),) = behind
    for thread in leader + more:
        thread.join(_LONG)
        assert not thread.is_alive(), "a caller still waits on the one that left"
    assert answers == {0: 0} and later == {4: 8}
    assert writer.groups == [[0], [4]]  # the interrupted request was never written
    assert commit.submit(6) == 12


def test_a_leader_interrupted_in_its_write_raises_it_and_its_group_gets_interrupted() -> None:
    writer = _Writer()
    writer.release.clear()

    def write(requests: Sequence[int]) -> list[int | BaseException]:
        if 13 in requests:
            raise _Interrupt  # a signal reaching the leader's thread mid-write
        return writer(requests)

    commit: GroupCommit[int, int] = GroupCommit(
        write, most_groups=1, interrupted=lambda request, error: RuntimeError(f"unknown {request}")
    )
    first, answers = _submit_all(commit, [0])
    assert writer.writing.wait(_LONG)
    leads, led = _submit_all(commit, [13])
    until(lambda: commit.waiting == 1)
    follows, followed = _submit_all(commit, [2])
    until(lambda: commit.waiting == 2)
    writer.release.set()
    for thread in first + leads + follows:
        thread.join(_LONG)
    assert isinstance(led[13], _Interrupt)  # raised where it came from, the leader
    assert str(followed[2]) == "unknown 2"
    assert answers == {0: 0} and commit.submit(4) == 8


def test_a_lone_caller_interrupted_in_its_write_hands_the_lead_to_those_queued_behind() -> None:
    writer = _Writer()
    writer.release.clear()
    entered = threading.Event()

    def write(requests: Sequence[int]) -> list[int | BaseException]:
        if 13 in requests:
            entered.set()
            assert writer.release.wait(_LONG)
            raise _Interrupt  # a signal reaching the lone caller's thread mid-write
        return writer(requests)

    commit: GroupCommit[int, int] = GroupCommit(write, most_groups=1)
    alone, answers = _submit_all(commit, [13])
    assert entered.wait(_LONG)
    queued, more = _submit_all(commit, [2, 4])
    until(lambda: commit.waiting == 2)
    writer.release.set()
    for thread in alone + queued:
        thread.join(_LONG)
    assert isinstance(answers[13], _Interrupt)
    assert more == {2: 4, 4: 8} and [sorted(g) for g in writer.groups] == [[2, 4]]
    assert commit.submit(6) == 12
