"""Course subscriptions: rules across many streams, kept by decisions instead of aggregates.

    python -m examples.courses [STORE_URL]      (default: an SQLite file in a new temp folder)

A course takes at most its capacity of students, a student at most their
limit of courses, and a user name belongs to one student. No aggregate
holds all of that: each command reads the few facts it needs with one
query of event types and tags (`DecisionProjection`s), decides, and
appends on the condition that nothing it read has changed since
(Dynamic Consistency Boundaries). Two subscriptions to different courses
by different students never wait for each other; two that compete for the
last seat of a course cannot both win.
"""

from __future__ import annotations

import sys
import tempfile
import threading
from collections.abc import Callable, Sequence

from eventcraft.domain import (
    Decision,
    DecisionProjection,
    Decisions,
    DomainError,
    DomainEvent,
    EventRegistry,
)
from eventcraft.eventstore import AppendResult, EventStore, Query, QueryItem, RecordedEvent
from eventcraft.projections import ProjectionRunner, Subscription
from pydantic import Field

course_events = EventRegistry()


def course_tag(course_id: str) -> str:
    return f"course:{course_id}"


def student_tag(student_id: str) -> str:
    return f"student:{student_id}"


def username_tag(name: str) -> str:
    # Names differing only in case are one name.
    return f"username:{name.casefold()}"


@course_events.event("CourseDefined")
class CourseDefined(DomainEvent):
    course_id: str
    title: str
    capacity: int = Field(ge=0)

    def event_tags(self) -> list[str]:
        return [course_tag(self.course_id)]


@course_events.event("CourseCapacityChanged")
class CourseCapacityChanged(DomainEvent):
    course_id: str
    capacity: int = Field(ge=0)

    def event_tags(self) -> list[str]:
        return [course_tag(self.course_id)]


@course_events.event("StudentRegistered")
class StudentRegistered(DomainEvent):
    student_id: str
    name: str
    max_courses: int = Field(ge=0)

    def event_tags(self) -> list[str]:
        return [student_tag(self.student_id), username_tag(self.name)]


@course_events.event("StudentSubscribed")
class StudentSubscribed(DomainEvent):
    student_id: str
    course_id: str

    def event_tags(self) -> list[str]:
        return [student_tag(self.student_id), course_tag(self.course_id)]


@course_events.event("StudentUnsubscribed")
class StudentUnsubscribed(DomainEvent):
    student_id: str
    course_id: str

    def event_tags(self) -> list[str]:
        return [student_tag(self.student_id), course_tag(self.course_id)]


class CourseError(DomainError):
    """A command the rules refuse; nothing is written."""


class CourseExists(CourseError):
    pass


class CourseNotFound(CourseError):
    pass


class CourseFull(CourseError):
    pass


class StudentExists(CourseError):
    pass


class StudentNotFound(CourseError):
    pass


class UserNameTaken(CourseError):
    pass


class TooManyCourses(CourseError):
    pass


class AlreadySubscribed(CourseError):
    pass


class NotSubscribed(CourseError):
    pass


# --- the facts decisions are made on: one small projection each -------------------


def course_exists(course_id: str) -> DecisionProjection[bool]:
    return DecisionProjection(
        False, {CourseDefined: lambda _, e: True}, tags=[course_tag(course_id)]
    )


def course_capacity(course_id: str) -> DecisionProjection[int]:
    def capacity(_: int, event: CourseDefined | CourseCapacityChanged) -> int:
        return event.capacity

    return DecisionProjection(
        0, {CourseDefined: capacity, CourseCapacityChanged: capacity}, tags=[course_tag(course_id)]
    )


def course_subscriptions(course_id: str) -> DecisionProjection[int]:
    return DecisionProjection(
        0,
        {StudentSubscribed: lambda n, _: n + 1, StudentUnsubscribed: lambda n, _: n - 1},
        tags=[course_tag(course_id)],
    )


def student_course_limit(student_id: str) -> DecisionProjection[int | None]:
    """The student's limit of courses; None until they registered."""
    return DecisionProjection[int | None](
        None,
        {StudentRegistered: lambda _, e: e.max_courses},
        tags=[student_tag(student_id)],
    )


def student_subscriptions(student_id: str) -> DecisionProjection[int]:
    return DecisionProjection(
        0,
        {StudentSubscribed: lambda n, _: n + 1, StudentUnsubscribed: lambda n, _: n - 1},
        tags=[student_tag(student_id)],
    )


def subscribed(student_id: str, course_id: str) -> DecisionProjection[bool]:
    return DecisionProjection(
        False,
        {StudentSubscribed: lambda _, e: True, StudentUnsubscribed: lambda _, e: False},
        tags=[student_tag(student_id), course_tag(course_id)],
    )


def username_taken(name: str) -> DecisionProjection[bool]:
    return DecisionProjection(
        False, {StudentRegistered: lambda _, e: True}, tags=[username_tag(name)]
    )


# --- the commands ---------------------------------------------------------------------


class Courses:
    """The command handlers: each reads what its rule needs, decides, appends."""

    def __init__(self, store: EventStore, *, attempts: int = 20) -> None:
        self.decisions = Decisions(store, course_events)
        self.attempts = attempts

    def define_course(self, course_id: str, title: str, capacity: int) -> AppendResult | None:
        def decide(decision: Decision) -> CourseDefined:
            if decision["exists"]:
                raise CourseExists(f"course {course_id!r} is defined already")
            return CourseDefined(course_id=course_id, title=title, capacity=capacity)

        return self.decisions.execute(
            {"exists": course_exists(course_id)},
            decide,
            stream_id=f"course-{course_id}",
            attempts=self.attempts,
        )

    def change_capacity(self, course_id: str, capacity: int) -> AppendResult | None:
        def decide(decision: Decision) -> CourseCapacityChanged | None:
            if not decision["exists"]:
                raise CourseNotFound(f"no course {course_id!r}")
            if decision["capacity"] == capacity:
                return None
            if decision["subscribed"] > capacity:
                raise CourseFull(
                    f"course {course_id!r} has {decision['subscribed']} students, "
                    f"more than {capacity}"
                )
            return CourseCapacityChanged(course_id=course_id, capacity=capacity)

        return self.decisions.execute(
            {
                "exists": course_exists(course_id),
                "capacity": course_capacity(course_id),
                "subscribed": course_subscriptions(course_id),
            },
            decide,
            stream_id=f"course-{course_id}",
            attempts=self.attempts,
        )

    def register_student(
        self, student_id: str, name: str, max_courses: int = 10
    ) -> AppendResult | None:
        def decide(decision: Decision) -> StudentRegistered:
            if decision["limit"] is not None:
                raise StudentExists(f"student {student_id!r} is registered already")
            if decision["name taken"]:
                raise UserNameTaken(f"the user name {name!r} is taken")
            return StudentRegistered(student_id=student_id, name=name, max_courses=max_courses)

        return self.decisions.execute(
            {"limit": student_course_limit(student_id), "name taken": username_taken(name)},
            decide,
            stream_id=f"student-{student_id}",
            attempts=self.attempts,
        )

    def subscribe(self, student_id: str, course_id: str) -> AppendResult | None:
        def decide(decision: Decision) -> StudentSubscribed:
            if not decision["course exists"]:
                raise CourseNotFound(f"no course {course_id!r}")
            if decision["limit"] is None:
                raise StudentNotFound(f"no student {student_id!r}")
            if decision["subscribed"]:
                raise AlreadySubscribed(f"{student_id!r} is subscribed to {course_id!r} already")
            if decision["course students"] >= decision["capacity"]:
                raise CourseFull(f"course {course_id!r} is full ({decision['capacity']} students)")
            if decision["student courses"] >= decision["limit"]:
                raise TooManyCourses(
                    f"{student_id!r} is subscribed to {decision['limit']} courses, their limit"
                )
            return StudentSubscribed(student_id=student_id, course_id=course_id)

        return self.decisions.execute(
            {
                "course exists": course_exists(course_id),
                "capacity": course_capacity(course_id),
                "course students": course_subscriptions(course_id),
                "limit": student_course_limit(student_id),
                "student courses": student_subscriptions(student_id),
                "subscribed": subscribed(student_id, course_id),
            },
            decide,
            stream_id=f"student-{student_id}",
            attempts=self.attempts,
        )

    def unsubscribe(self, student_id: str, course_id: str) -> AppendResult | None:
        def decide(decision: Decision) -> StudentUnsubscribed:
            if not decision["subscribed"]:
                raise NotSubscribed(f"{student_id!r} is not subscribed to {course_id!r}")
            return StudentUnsubscribed(student_id=student_id, course_id=course_id)

        return self.decisions.execute(
            {"subscribed": subscribed(student_id, course_id)},
            decide,
            stream_id=f"student-{student_id}",
            attempts=self.attempts,
        )


def roster_query(course_id: str) -> Query:
    """The events that change who attends `course_id`: what its roster subscribes to."""
    return Query(
        [
            QueryItem(
                types=["StudentSubscribed", "StudentUnsubscribed"], tags=[course_tag(course_id)]
            )
        ]
    )


# --- the walk-through ------------------------------------------------------------------


def show(store: EventStore) -> None:
    """Define courses, register students, keep every rule, also in a race of threads."""
    courses = Courses(store)
    courses.define_course("algebra", "Linear algebra", capacity=2)
    courses.define_course("poetry", "Reading poetry", capacity=5)
    courses.register_student("s1", "ada")
    courses.register_student("s2", "grace", max_courses=1)
    courses.register_student("s3", "alan")
    for student_id, course_id in (("s1", "algebra"), ("s2", "algebra"), ("s1", "poetry")):
        courses.subscribe(student_id, course_id)
    print("\ncourse subscriptions, decided across streams:")
    refusals: list[Callable[[], object]] = [
        lambda: courses.subscribe("s3", "algebra"),
        lambda: courses.subscribe("s2", "poetry"),
        lambda: courses.register_student("s4", "Ada"),
        lambda: courses.subscribe("s1", "algebra"),
    ]
    for refused in refusals:
        try:
            refused()
        except CourseError as error:
            print(f"  refused: {error}")
    courses.unsubscribe("s2", "algebra")
    courses.subscribe("s3", "algebra")
    print("  s2 left algebra, and s3 got the seat")

    # Twelve students race for the five seats of a new course, each in a thread.
    courses.define_course("chess", "Chess openings", capacity=5)
    racers = [f"r{n}" for n in range(12)]
    for student_id in racers:
        courses.register_student(student_id, f"racer {student_id}")
    won: list[str] = []
    refused_full: list[str] = []

    def race(student_id: str) -> None:
        try:
            courses.subscribe(student_id, "chess")
            won.append(student_id)
        except CourseFull:
            refused_full.append(student_id)

    threads = [threading.Thread(target=race, args=(r,)) for r in racers]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    print(f"  12 students raced for 5 seats: {len(won)} won, {len(refused_full)} found it full")

    # A subscriber of the chess roster: only the events that query selects reach it.
    roster: list[str] = []

    def attend(event: RecordedEvent) -> None:
        roster.append(event.data["student_id"])

    chess_roster = Subscription("chess-roster", attend, query=roster_query("chess"))
    with ProjectionRunner(store, [chess_roster], lease_ttl=None) as runner:
        runner.catch_up()
    print(f"  the chess roster, read by its query: {len(roster)} students")


def main(url: str | None = None) -> None:
    if url is None:
        url = f"sqlite:///{tempfile.mkdtemp(prefix='eventcraft-courses-')}/events.db"
    with EventStore.open(url) as store:
        show(store)


def cli(argv: Sequence[str] | None = None) -> int:
    arguments = list(sys.argv[1:] if argv is None else argv)
    if len(arguments) > 1 or (arguments and arguments[0] in ("-h", "--help")):
        print(__doc__.strip().splitlines()[2].strip())
        return 0 if arguments and arguments[0] in ("-h", "--help") else 2
    main(arguments[0] if arguments else None)
    return 0


if __name__ == "__main__":
    sys.exit(cli())
