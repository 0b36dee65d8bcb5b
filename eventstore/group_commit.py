"""Group commit: appends from many threads written in shared transactions.

Each commit waits for the disk; appends that wait at the same moment can
share that wait. Callers hand their append to `GroupCommit.submit` and block.
A caller that finds no group being written becomes a *leader*: it takes
everything queued (its own append among it, at most `most_members`) and
writes it as one group, while later callers queue for the next group. Once
its own append is answered, a leader hands the lead to the first caller
still queued, or stands down if there is none.

Up to `most_groups` groups are written side by side, but a second leader
arises only while more callers are queued than one group takes, and stands
down once another leader's next group takes them all: each group costs a
transaction and a call, and two half groups cost the appends in them half
as much again in CPU as one whole (PostgreSQL, 16 threads on 2 cores: 146-176
against 204-236 us an append, client and server). A *hurried* request
(`hurried`, on PostgreSQL a conditional append) is the exception: it gets a
second group as soon as there is room, since its condition was read at some
head and grows more likely to fail the longer it waits. Decided so, 16 threads
deciding on one shared tag on PostgreSQL made 120 decisions/s against 80 (5.6
retries a decision against 7.5; interleaved rounds), and on tags of their own
as many (1,182 against 1,197).

A group may also be bounded by the events its members hold (`most_events`,
given `events_of`): it takes members while they hold at most that many
between them, and always the first. On SQLite, where one thread writes while
the callers' threads encode their next appends, a group of several large
batches keeps every caller waiting on it, so nobody encodes meanwhile and
the writer idles after it; batches that fill a group alone are written one
after another, and their callers encode while the writer writes.

No timer: a lone caller leads at once and writes a group of one, which the
backends send exactly as an ungrouped append. A group forms only from
callers that arrived while another group was being written, so waiting to
be grouped never costs more than the write it waited behind.

What a group promises is each backend's to keep (`postgres/append_group.py`,
`sqlite/backend.py`): every member commits or fails alone, with its own version
check and idempotent retry, as if it had been appended by itself.

A signal's exception (Ctrl-C, a timeout raised from an alarm) reaches one
thread, the main one, whether it waits in a queue or leads: it leaves
(`_leave`), out of the queue and, if the lead was its own or on its way
to it, handing it on, so the others never wait on a caller that is gone.
A leader interrupted while writing raises the interrupt itself; the other
members of its group get `interrupted(request, error)` (the backends: the
outcome is unknown), not an interrupt that was never theirs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from typing import Generic, TypeVar

from .arguments import AppendCall
from .errors import AppendOutcomeUnknown

Request = TypeVar("Request")
Result = TypeVar("Result")

MOST_MEMBERS = 32
"""Default for the most appends one group writes (the async store's too).

PostgreSQL gives each member a subtransaction: 32 keep well inside the 64 a
transaction caches, past which every snapshot taken meanwhile grows costlier."""

MOST_GROUPS = 2
"""Default for the most groups written at once (each on a connection of its own)."""


def another_group_goes(
    in_flight: int, most_groups: int, queued: int, one_group: int, hurried: bool = False
) -> bool:
    """Whether the callers `queued` get a group of their own beside the `in_flight` ones:
    when none is in flight, or when there is room for another and more are queued than
    `one_group` takes or one of them is `hurried` (the module's docstring). The async
    store's senders decide so too."""
    return in_flight == 0 or (in_flight < most_groups and (hurried or queued > one_group))


def interrupted_append(member: Sequence[AppendCall], error: BaseException) -> BaseException:
    """What the other appends of a group get when its leader's write is interrupted: it
    may have committed (the backends' `interrupted`)."""
    unknown = AppendOutcomeUnknown(
        member[0].stream_id, f"the group it was written in was interrupted ({error!r})"
    )
    unknown.__cause__ = error
    return unknown


class _Member(Generic[Request, Result]):
    __slots__ = (
        "answered",
        "error",
        "events",
        "hurried",
        "leads",
        "request",
        "result",
        "submitted",
        "woken",
    )

    def __init__(self, request: Request, events: int, hurried: bool) -> None:
        self.request = request
        self.submitted = time.monotonic()
        self.events = events
        self.hurried = hurried
        self.result: Result | None = None
        self.error: BaseException | None = None
        self.answered = False
        self.leads = False
        # A lock held from the start and released once, to wake the caller: a
        # fraction of what an Event costs (a Condition, its waiters, a lock a wait).
        self.woken = threading.Lock()
        self.woken.acquire()


class GroupCommit(Generic[Request, Result]):
    """Hands concurrent requests to `write` in groups; see the module's docstring.

    `write(requests)` returns, for each request in order, its result or the
    exception to raise to its caller. An exception raised by `write` itself
    is raised to every caller of the group. With `events_of` (the events a
    request holds), a group holds at most `most_events` events, or one request. A
    request `hurried` is true of gets a group beside the one in flight at once.
    When a leader's write is cut short by an exception that is not an `Exception`
    (`KeyboardInterrupt`, `SystemExit`), the other members get
    `interrupted(request, error)` instead (by default the error itself).
    """

    def __init__(
        self,
        write: Callable[[Sequence[Request]], Sequence[Result | BaseException]],
        *,
        most_members: int = MOST_MEMBERS,
        most_groups: int = MOST_GROUPS,
        events_of: Callable[[Request], int] | None = None,
        most_events: int = 0,
        hurried: Callable[[Request], bool] | None = None,
        interrupted: Callable[[Request, BaseException], BaseException] | None = None,
    ) -> None:
        if most_members < 1 or most_groups < 1:
            raise ValueError("a group commit needs room for one member and one group")
        if events_of is not None and most_events < 1:
            raise ValueError("a group commit bounded by events needs room for one event")
        self._write = write
        self._most_members = most_members
        self._most_groups = most_groups
        self._events_of = events_of
        self._most_events = most_events
        self._hurried = hurried
        self._interrupted = interrupted
        self._lock = threading.Lock()
        self._queued: list[_Member[Request, Result]] = []
        self._leaders = 0
        self._writing = threading.local()

    def submitted(self) -> float | None:
        """While `write` runs on a leader's thread: when the oldest member of the group it
        writes was submitted (`time.monotonic()`), so that whatever the group waits for
        (a pooled connection) counts from there; elsewhere None.

        A caller queued behind a group that waited in vain, and then leading a group of
        its own, has waited already.
        """
        return getattr(self._writing, "since", None)

    @property
    def waiting(self) -> int:
        """Requests queued for the next group."""
        with self._lock:
            return len(self._queued)

    def submit(self, request: Request) -> Result:
        """`request`'s result, written in a group with whatever else is waiting."""
        with self._lock:
            alone = not self._leaders and not self._queued
            if alone:
                self._leaders = 1
        if alone:
            return self._write_alone(request)
        events = 0 if self._events_of is None else self._events_of(request)
        hurried = self._hurried is not None and self._hurried(request)
        member: _Member[Request, Result] = _Member(request, events, hurried)
        with self._lock:
            self._queued.append(member)
            member.leads = another_group_goes(
                self._leaders, self._most_groups, len(self._queued), self._group_size(), hurried
            )
            if member.leads:
                self._leaders += 1
        try:
            if not member.leads:
                # Released once: by its answer, or, while still queued, by the lead passed on.
                member.woken.acquire()
            if member.leads:
                self._lead(member)
        except BaseException:
            self._leave(member)
            raise
        if member.error is not None:
            raise member.error
        return member.result  # type: ignore[return-value]  # answered: set by the writer

    def _write_alone(self, request: Request) -> Result:
        """Write `request` as a group of one, as its leader, then pass the lead on: a lone
        caller's path, without a member to queue and wake, for a third of the cost (4.5
        against 12.5 us a submit on this machine, beside a write of 250 us and more)."""
        self._writing.since = time.monotonic()
        try:
            outcome = self._write([request])[0]
        except Exception as error:  # raised by `write` itself: this group's failure
            outcome = error
        finally:  # an interrupt too: whoever queued meanwhile gets the lead
            self._writing.since = None
            with self._lock:
                self._hand_on()
        if isinstance(outcome, BaseException):
            raise outcome
        return outcome

    def _lead(self, own: _Member[Request, Result]) -> None:
        """Write groups until `own` is answered, then pass the lead on."""
        while not own.answered:
            with self._lock:
                group = self._queued[: self._group_size()]
                del self._queued[: len(group)]
                if not group:
                    # Another leader took `own` into its group and is writing it: stand
                    # down, and be woken by the answer like any member that does not lead.
                    self._leaders -= 1
                    own.leads = False
                    if own.answered:
                        return
                    break
            self._write_group(group, own)
        else:
            with self._lock:
                own.leads = False
                self._hand_on()
            return
        own.woken.acquire()

    def _hand_on(self) -> None:
        """Pass a lead given up to the first caller still queued, or stand down (under
        the lock)."""
        # Still queued, so in no group: only this wakes it. Not one that leads
        # already (its caller has yet to take its first group). Unless another
        # leader is at work and its next group takes them all.
        successor = (
            next((m for m in self._queued if not m.leads), None)
            if another_group_goes(
                self._leaders - 1,
                self._most_groups,
                len(self._queued),
                self._group_size(),
                any(member.hurried for member in self._queued),
            )
            else None
        )
        if successor is not None:
            successor.leads = True  # the count of leaders stays: the lead moves
            successor.woken.release()
        else:
            self._leaders -= 1

    def _leave(self, member: _Member[Request, Result]) -> None:
        """`member`'s caller is gone (a signal's exception): out of the queue, and its
        lead, held or handed to it, handed on. In a group already, it is written and
        answered to nobody."""
        with self._lock:
            if member in self._queued:
                self._queued.remove(member)
            if member.leads:
                member.leads = False
                self._hand_on()

    def _group_size(self) -> int:
        """How many of the queued members the next group takes (under the lock)."""
        if self._events_of is None:
            return self._most_members
        events = 0
        for taken, member in enumerate(self._queued[: self._most_members]):
            events += member.events
            if taken and events > self._most_events:
                return taken
        return self._most_members

    def _write_group(
        self, group: list[_Member[Request, Result]], leader: _Member[Request, Result]
    ) -> None:
        self._writing.since = min(member.submitted for member in group)
        try:
            outcomes = self._write([member.request for member in group])
        except Exception as error:  # the whole group shares the failure
            outcomes = [error] * len(group)
        except BaseException as error:  # the leader's own interrupt: the others' is unknown
            interrupted = self._interrupted
            outcomes = [
                error
                if member is leader or interrupted is None
                else interrupted(member.request, error)
                for member in group
            ]
        finally:
            self._writing.since = None
        with self._lock:  # `leads` is decided under it: each member is woken once
            for member, outcome in zip(group, outcomes, strict=True):
                if isinstance(outcome, BaseException):
                    member.error = outcome
                else:
                    member.result = outcome
                member.answered = True
                if not member.leads:
                    member.woken.release()
