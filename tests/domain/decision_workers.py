"""Code that runs in separate processes during the decision concurrency tests."""

from __future__ import annotations

import random
from typing import Any

from eventcraft.eventstore import EventStore

from examples.courses import CourseError, Courses


def enrol(
    url: str, students: list[str], courses: list[str], seed: int, barrier: Any
) -> dict[str, Any]:
    """Subscribe each of `students` to every course it can get, in a shuffled order; return
    the subscriptions acknowledged and how many decisions were read again after a lost race."""
    acknowledged: list[tuple[str, str]] = []
    commands = 0
    with EventStore.open(url) as store:
        reads = 0
        read_query = store.read_query

        def counted(*args: Any, **kwargs: Any) -> Any:
            nonlocal reads
            reads += 1
            return read_query(*args, **kwargs)

        store.read_query = counted  # type: ignore[method-assign]
        school = Courses(store, attempts=1000)
        pairs = [(s, c) for s in students for c in courses]
        random.Random(seed).shuffle(pairs)
        barrier.wait()
        for student_id, course_id in pairs:
            commands += 1
            try:
                school.subscribe(student_id, course_id)
                acknowledged.append((student_id, course_id))
            except CourseError:
                pass
    return {"acknowledged": acknowledged, "lost": reads - commands}
