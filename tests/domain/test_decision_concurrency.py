"""Decisions from several processes on shared rules: no rule broken, none acknowledged and
lost, and the writers did race."""

from __future__ import annotations

from collections import Counter
from concurrent.futures import ProcessPoolExecutor

from eventcraft.eventstore import EventStore

from examples.courses import Courses

from ..processes import PROCESSES
from .decision_workers import enrol


def test_racing_processes_keep_both_capacity_rules(shared_store_url: str) -> None:
    processes, capacity, limit = 4, 4, 2
    courses = ["c1", "c2", "c3"]
    students = [f"s{n}" for n in range(16)]
    with EventStore.open(shared_store_url) as store:
        school = Courses(store)
        for course_id in courses:
            school.define_course(course_id, course_id, capacity=capacity)
        for student_id in students:
            school.register_student(student_id, student_id, max_courses=limit)
    with (
        PROCESSES.Manager() as manager,
        ProcessPoolExecutor(processes, mp_context=PROCESSES) as pool,
    ):
        barrier = manager.Barrier(processes)
        futures = [
            pool.submit(enrol, shared_store_url, students[w::processes], courses, w, barrier)
            for w in range(processes)
        ]
        results = [future.result() for future in futures]
    assert sum(r["lost"] for r in results) > 0, "the writers never raced: the test proves nothing"
    acknowledged = [tuple(pair) for r in results for pair in r["acknowledged"]]
    with EventStore.open(shared_store_url) as store:
        stored = [
            (e.data["student_id"], e.data["course_id"])
            for e in store.read_all(types=["StudentSubscribed"])
        ]
    assert sorted(stored) == sorted(acknowledged)
    assert len(set(stored)) == len(stored)
    per_course = Counter(course for _, course in stored)
    per_student = Counter(student for student, _ in stored)
    assert max(per_course.values()) <= capacity and max(per_student.values()) <= limit
    # Every seat is taken: a refusal was never a lost race mistaken for a full course.
    assert sorted(per_course.values()) == [capacity] * len(courses)
