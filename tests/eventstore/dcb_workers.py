"""Writers that enrol students into courses by conditional appends, in processes of their
own: the race test of `test_dcb_race.py` and `benchmarks/dcb_race.py` run them.

Module-level functions so that a spawned process can import them.
"""

from __future__ import annotations

import random
from collections import Counter
from typing import Any, NamedTuple

from eventcraft.eventstore import (
    ANY,
    AppendCondition,
    AppendConditionFailed,
    EventStore,
    NewEvent,
    Query,
    QueryItem,
)

from .workers import opened

COURSES = 20
CAPACITY = 5
STUDENTS = 200
STUDENT_LIMIT = 3
SUBSCRIBED = "StudentSubscribed"


class Enrolled(NamedTuple):
    """What one writer did."""

    ids: list[str]
    """The ids of the events whose append was acknowledged."""
    conflicts: int
    """Appends refused by their condition, then decided again."""
    gave_up: int
    """Decisions given up after `TRIES` refusals in a row."""


TRIES = 50


def decision_query(course: str, student: str) -> Query:
    return Query(
        [
            QueryItem(types=[SUBSCRIBED], tags=[f"course:{course}"]),
            QueryItem(types=[SUBSCRIBED], tags=[f"student:{student}"]),
        ]
    )


def enrol(url: str, writer: int, attempts: int, seed: int, barrier: Any, api: str) -> Enrolled:
    """Try `attempts` random enrolments: read the course's and the student's subscriptions,
    decide by both rules, append with the condition taken from the read; decide again
    when the condition fails."""
    rng = random.Random(seed)
    ids: list[str] = []
    conflicts = gave_up = 0
    with opened(url, api) as store:
        barrier.wait()
        for _ in range(attempts):
            course = f"c{rng.randrange(COURSES)}"
            student = f"s{rng.randrange(STUDENTS)}"
            query = decision_query(course, student)
            for _ in range(TRIES):
                read = store.read_query(query)
                in_course = [e for e in read.events if f"course:{course}" in e.tags]
                of_student = [e for e in read.events if f"student:{student}" in e.tags]
                if (
                    len(in_course) >= CAPACITY
                    or len(of_student) >= STUDENT_LIMIT
                    or any(f"student:{student}" in e.tags for e in in_course)
                ):
                    break  # refused by the rules: nothing to append
                event = NewEvent(
                    SUBSCRIBED,
                    {"course": course, "student": student, "writer": writer},
                    tags=[f"course:{course}", f"student:{student}"],
                )
                try:
                    store.append(
                        f"student-{student}",
                        [event],
                        ANY,
                        condition=AppendCondition(query, after=read.head),
                    )
                except AppendConditionFailed:
                    conflicts += 1
                    continue
                ids.append(str(event.id))
                break
            else:
                gave_up += 1
    return Enrolled(ids, conflicts, gave_up)


def violations(store: EventStore) -> list[str]:
    """What the log breaks of the two rules and of one subscription per pair."""
    per_course: Counter[str] = Counter()
    per_student: Counter[str] = Counter()
    pairs: Counter[tuple[str, str]] = Counter()
    for event in store.read_all(types=[SUBSCRIBED]):
        course, student = event.data["course"], event.data["student"]
        per_course[course] += 1
        per_student[student] += 1
        pairs[(course, student)] += 1
    found = [f"course {c} holds {n}" for c, n in per_course.items() if n > CAPACITY]
    found += [f"student {s} holds {n}" for s, n in per_student.items() if n > STUDENT_LIMIT]
    found += [f"{s} in {c} {n} times" for (c, s), n in pairs.items() if n > 1]
    return found
