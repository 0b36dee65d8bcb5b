"""Appends made together, and appends from many threads at once: part of the
conformance suite; `EventStoreConformance` includes it."""

from __future__ import annotations

import threading
import uuid
from collections import defaultdict
from typing import Any

import pytest

from ..errors import DuplicateEventId, InvalidEvent, WrongExpectedVersion
from ..events import ANY, NO_STREAM, AppendResult, ExpectedVersion, NewEvent
from ..store import EventStore


def _events(*types: str) -> list[NewEvent]:
    return [NewEvent(t, {"t": t}) for t in types]


class AppendManyConformance:
    """`append_many`: several streams, all or nothing; and concurrent appends each
    answered as if alone (the backends group them into shared commits)."""

    def test_appends_to_several_streams_commit_together(self, store: EventStore) -> None:
        store.append("account-a", _events("Opened"))
        results = store.append_many(
            [
                ("account-a", _events("Debited"), 1),
                ("account-b", _events("Opened", "Credited"), NO_STREAM),
                ("audit-1", _events("Transferred"), ANY),
            ]
        )
        assert [r.version for r in results] == [2, 2, 1]
        positions = [p for r in results for p in r.positions]
        assert positions == sorted(positions)
        assert [e.type for e in store.read_stream("account-b")] == ["Opened", "Credited"]
        log = [(e.stream_id, e.version, e.position) for e in store.read_all()]
        assert log[1:] == [
            ("account-a", 2, positions[0]),
            ("account-b", 1, positions[1]),
            ("account-b", 2, positions[2]),
            ("audit-1", 1, positions[3]),
        ]

    def test_one_wrong_version_fails_all_naming_its_stream(self, store: EventStore) -> None:
        store.append("account-a", _events("Opened"))
        head = store.high_water_mark()
        with pytest.raises(WrongExpectedVersion) as raised:
            store.append_many(
                [
                    ("account-b", _events("Opened"), NO_STREAM),
                    ("account-a", _events("Debited"), 5),
                ]
            )
        assert (raised.value.stream_id, raised.value.expected, raised.value.actual) == (
            "account-a",
            5,
            1,
        )
        assert store.stream_version("account-b") == 0
        assert list(store.read_all(after=head)) == []

    def test_a_retried_call_returns_the_first_results(self, store: EventStore) -> None:
        appends = [
            ("account-a", _events("Opened"), NO_STREAM),
            ("account-b", _events("Opened", "Credited"), NO_STREAM),
        ]
        first = store.append_many(appends)
        store.append("account-a", _events("Debited"))
        assert store.append_many(appends) == first
        assert store.stream_version("account-b") == 2

    def test_a_call_reusing_some_stored_ids_writes_nothing(self, store: EventStore) -> None:
        stored = _events("Opened")
        store.append("account-a", stored)
        head = store.high_water_mark()
        with pytest.raises(DuplicateEventId):
            store.append_many([("account-a", stored, ANY), ("account-b", _events("Opened"), ANY)])
        assert list(store.read_all(after=head)) == []

    @pytest.mark.parametrize(
        ("appends", "complaint"),
        [
            ([], "at least one"),
            ("account-a", "list of"),
            ([("account-a", [])], "item 0"),
            ([("account-a", _events("A"), ANY), ("account-a", _events("B"), ANY)], "twice"),
            ([("account-a", _events("A"), ANY), ("account-b", _events("B"), -1)], "expected"),
        ],
    )
    def test_bad_input_is_refused_and_writes_nothing(
        self, store: EventStore, appends: Any, complaint: str
    ) -> None:
        with pytest.raises(InvalidEvent, match=complaint):
            store.append_many(appends)
        assert store.high_water_mark() == 0

    def test_an_event_id_given_twice_in_one_call_is_refused(self, store: EventStore) -> None:
        event = NewEvent("Opened", {})
        with pytest.raises(InvalidEvent, match="given twice"):
            store.append_many([("account-a", [event], ANY), ("account-b", [event], ANY)])
        assert store.high_water_mark() == 0

    def test_concurrent_appends_each_get_their_own_answer(self, store: EventStore) -> None:
        """Threads appending at once: right and wrong versions, retries, `append_many`;
        each answer is the one it would get alone, and the log holds each write once."""
        threads, rounds = 8, 12
        start = threading.Barrier(threads)
        answers: dict[int, list[Any]] = defaultdict(list)

        def work(n: int) -> None:
            own = f"own-{n}"
            start.wait()
            for round_ in range(rounds):
                batch = _events(f"R{round_}")
                if round_ % 4 == 3:  # a version that is wrong: the stream is at `round_`
                    batch_outcome: Any
                    try:
                        batch_outcome = store.append(own, batch, expected_version=round_ + 7)
                    except WrongExpectedVersion as error:
                        batch_outcome = ("refused", error.actual)
                    answers[n].append(batch_outcome)
                    batch = _events(f"R{round_}")
                if round_ % 5 == 4:
                    pair: list[tuple[str, list[NewEvent], ExpectedVersion]] = [
                        (own, batch, round_),
                        (f"shared-{n % 2}-{round_}", _events("S"), ANY),
                    ]
                    first = store.append_many(pair)
                    assert store.append_many(pair) == first  # a retry, grouped or not
                    answers[n].append(first[0])
                    continue
                result = store.append(own, batch, expected_version=round_)
                assert store.append(own, batch, expected_version=round_) == result  # a retry
                answers[n].append(result)

        workers = [threading.Thread(target=work, args=(n,)) for n in range(threads)]
        for worker in workers:
            worker.start()
        for worker in workers:
            worker.join()
        log = list(store.read_all())
        assert len({e.id for e in log}) == len(log)
        for n in range(threads):
            own = [e for e in log if e.stream_id == f"own-{n}"]
            assert [e.type for e in own] == [f"R{r}" for r in range(rounds)]
            written = [a for a in answers[n] if isinstance(a, AppendResult)]
            assert [a.version for a in written] == list(range(1, rounds + 1))
            assert [a.positions[0] for a in written] == [e.position for e in own]
            refused = [a for a in answers[n] if isinstance(a, tuple)]
            assert refused == [("refused", r) for r in range(3, rounds, 4)]
        shared = [e for e in log if e.stream_id.startswith("shared-")]
        assert len(shared) == threads * len(range(4, rounds, 5))
        assert all(isinstance(e.id, uuid.UUID) for e in shared)
