"""The personal-data part of the conformance suite; `EventStoreConformance` includes it.

Fields marked `Personal` read in the clear through every read of the store
until their subject is forgotten, and as their replacement after, through
every read again: never sealed, never an error.
"""

from __future__ import annotations

import dataclasses
import uuid
from typing import Annotated, Any

import orjson
import pytest
from pydantic import BaseModel

from ..errors import InvalidEvent
from ..events import NewEvent
from ..personal.envelope import MARK, seal
from ..personal.fields import FORGOTTEN, Personal, personal_fields
from ..query import Query, QueryItem
from ..store import EventStore


class Registered(BaseModel):
    """An event with two personal fields of the subject `customer_id` names."""

    customer_id: str
    name: Annotated[str, Personal(subject="customer_id")]
    age: Annotated[int, Personal(subject="customer_id", forgotten=0)]
    plan: str


class Moved(BaseModel):
    """Personal data of the stream's own subject (no subject named)."""

    address: Annotated[str, Personal()]


class Transferred(BaseModel):
    """Personal fields of two subjects in one event."""

    payer: str
    payee: str
    payer_iban: Annotated[str, Personal(subject="payer")]
    payee_iban: Annotated[str, Personal(subject=lambda event: event.payee)]


def _every_read(store: EventStore, stream_id: str) -> list[dict[str, Any]]:
    """The data of `stream_id`'s events through each read the store offers."""
    stream = [e.data for e in store.read_stream(stream_id)]
    backwards = [e.data for e in store.read_stream(stream_id, backwards=True)][::-1]
    encoded = [orjson.loads(e.data) for e in store.read_stream_encoded(stream_id)]
    logged = [e for e in store.read_all() if e.stream_id == stream_id]
    records = [orjson.loads(r.data) for r in store.read_all_encoded() if r.stream_id == stream_id]
    lines = "".join(chunk.text for chunk in store.read_all_json()).splitlines()
    documents = [orjson.loads(line) for line in lines]
    json = [d["data"] for d in documents if d["stream_id"] == stream_id]
    single = []
    for event in logged:
        found = store.read_event(event.id)
        assert found is not None
        single.append(found.data)
    reads = [stream, backwards, encoded, [e.data for e in logged], records, json, single]
    for read in reads[1:]:
        assert read == reads[0]
    return stream


class PersonalConformance:
    """Sealing on write, opening on read, forgetting."""

    def test_personal_fields_read_in_the_clear(self, store: EventStore) -> None:
        store.append(
            "customer-1",
            [
                NewEvent(
                    "Registered",
                    Registered(customer_id="c1", name="Ada Lovelace", age=36, plan="gold"),
                )
            ],
        )
        store.append("customer-1", [NewEvent("Moved", Moved(address="12 St James's Square"))])
        assert _every_read(store, "customer-1") == [
            {"customer_id": "c1", "name": "Ada Lovelace", "age": 36, "plan": "gold"},
            {"address": "12 St James's Square"},
        ]

    def test_an_event_with_personal_fields_keeps_its_tags_through_every_read(
        self, store: EventStore
    ) -> None:
        registered = Registered(customer_id="c1", name="Ada Lovelace", age=36, plan="gold")
        event = NewEvent("Registered", registered, tags=["plan:gold", "customer:c1"])
        store.append("customer-1", [event])
        found = store.read_event(event.id)
        assert found is not None and found.data["name"] == "Ada Lovelace"
        tags = ("customer:c1", "plan:gold")
        read = [*store.read_stream("customer-1"), *store.read_all(), found]
        assert [e.tags for e in read] == [tags] * 3
        assert [r.tags for r in store.read_all_encoded()] == [tags]
        assert store.read_query(Query([QueryItem(tags=["plan:gold"])])).events == [found]

    def test_a_forgotten_subject_reads_as_its_replacement_everywhere(
        self, store: EventStore
    ) -> None:
        for n, name in ((1, "Ada Lovelace"), (2, "Charles Babbage")):
            store.append(
                f"customer-{n}",
                [
                    NewEvent(
                        "Registered",
                        Registered(customer_id=f"c{n}", name=name, age=30 + n, plan="gold"),
                    )
                ],
            )
        assert store.forget("c1") == 1
        assert store.forget("c1") == 0  # once forgotten, there is nothing left to erase
        assert _every_read(store, "customer-1") == [
            {"customer_id": "c1", "name": FORGOTTEN, "age": 0, "plan": "gold"}
        ]
        assert _every_read(store, "customer-2") == [
            {"customer_id": "c2", "name": "Charles Babbage", "age": 32, "plan": "gold"}
        ]

    def test_one_event_may_hold_personal_data_of_several_subjects(self, store: EventStore) -> None:
        store.append(
            "transfer-1",
            [
                NewEvent(
                    "Transferred",
                    Transferred(
                        payer="p1",
                        payee="p2",
                        payer_iban="GB29NWBK60161331926819",
                        payee_iban="DE89370400440532013000",
                    ),
                )
            ],
        )
        store.forget("p2")
        assert _every_read(store, "transfer-1") == [
            {
                "payer": "p1",
                "payee": "p2",
                "payer_iban": "GB29NWBK60161331926819",
                "payee_iban": FORGOTTEN,
            }
        ]

    def test_a_subject_written_after_it_was_forgotten_gets_a_new_key(
        self, store: EventStore
    ) -> None:
        store.append("customer-1", [NewEvent("Moved", Moved(address="old street"))])
        store.forget("customer-1")
        store.append("customer-1", [NewEvent("Moved", Moved(address="new street"))])
        assert _every_read(store, "customer-1") == [
            {"address": FORGOTTEN},
            {"address": "new street"},
        ]

    def test_snapshots_seal_personal_fields_too(self, store: EventStore) -> None:
        store.append("customer-1", [NewEvent("Moved", Moved(address="12 St James's Square"))])
        store.save_snapshot(
            "customer-1", version=1, type="Customer", data=Moved(address="12 St James's Square")
        )
        snapshot = store.load_snapshot("customer-1")
        assert snapshot is not None and snapshot.data == {"address": "12 St James's Square"}
        store.forget("customer-1")
        snapshot = store.load_snapshot("customer-1")
        assert snapshot is not None and snapshot.data == {"address": FORGOTTEN}

    def test_events_without_personal_data_are_stored_as_given(self, store: EventStore) -> None:
        store.append("order-1", [NewEvent("Placed", {"total": 3})])
        assert store.forget("nobody") == 0
        assert [e.data for e in store.read_stream("order-1")] == [{"total": 3}]

    def test_a_personal_field_without_a_usable_subject_is_refused(self, store: EventStore) -> None:
        class NoSuchField(BaseModel):
            name: Annotated[str, Personal(subject="customer_id")]

        class NoFit(BaseModel):
            age: Annotated[int, Personal()]  # FORGOTTEN is no int

        class EmptySubject(BaseModel):
            who: str
            name: Annotated[str, Personal(subject="who")]

        for data in (NoSuchField(name="x"), NoFit(age=3), EmptySubject(who="", name="x")):
            with pytest.raises(InvalidEvent):
                store.append("customer-1", [NewEvent("Bad", data)])
        assert store.stream_version("customer-1") == 0

    def test_data_that_claims_an_envelope_it_does_not_hold_is_refused(
        self, store: EventStore
    ) -> None:
        for claimed in ("x", [], [{"subject": "s"}], [{"key": str(uuid.uuid4())}]):
            with pytest.raises(InvalidEvent, match="sealed personal fields"):
                store.append("order-1", [NewEvent("Placed", {"total": 3, MARK: claimed})])
        assert store.stream_version("order-1") == 0

    def test_data_shaped_like_an_envelope_no_reader_could_open_is_refused(
        self, store: EventStore
    ) -> None:
        """A payload stored as received (a webhook's) must not make the log unreadable."""
        forged = {"subject": "x", "key": str(uuid.uuid4()), "fields": ["name"], "sealed": "AAAA"}
        store.append("order-1", [NewEvent("Placed", {"total": 1})])
        with pytest.raises(InvalidEvent, match=r"data\['\$personal'\].*never held"):
            store.append("webhook-1", [NewEvent("Received", {"order": 1, MARK: [forged]})])
        with pytest.raises(InvalidEvent, match=r"snapshot of stream 'webhook-1'.*never held"):
            store.save_snapshot("webhook-1", version=0, type="Seen", data={MARK: [forged]})
        assert store.stream_version("webhook-1") == 0
        assert [e.data for e in store.read_all()] == [{"total": 1}]

    def test_a_copy_of_sealed_data_is_taken_where_the_key_store_opens_it(
        self, store: EventStore
    ) -> None:
        registered = Registered(customer_id="c1", name="Ada", age=36, plan="pro")
        store.append("customer-c1", [NewEvent("Registered", registered)])
        # The blocking face over an `AsyncEventStore` (this suite's async run) shows its keys.
        keys = getattr(store, "store", store).keys.sealing(["c1"])
        fields = list(personal_fields(Registered))
        sealed = seal(registered.model_dump(mode="json"), {"c1": fields}, keys)
        store.append("copy-c1", [NewEvent("Registered", sealed)])
        assert _every_read(store, "copy-c1") == [registered.model_dump(mode="json")]
        altered = {**sealed, MARK: [{**sealed[MARK][0], "fields": ["age", "name"]}]}
        with pytest.raises(InvalidEvent, match="altered"):
            store.append("copy-c1", [NewEvent("Registered", altered)])
        store.forget("c1")
        store.append("copy-c1", [NewEvent("Registered", sealed)])  # reads as forgotten
        assert [e.data["name"] for e in store.read_stream("copy-c1")] == [FORGOTTEN] * 2

    def test_events_read_elsewhere_as_stored_are_opened_as_the_store_reads_them(
        self, store: EventStore
    ) -> None:
        """`open_events`: what an archive holds (sealed) reads as the store's own reads."""
        registered = Registered(customer_id="c1", name="Ada", age=36, plan="pro")
        store.append("customer-c1", [NewEvent("Registered", registered)])
        store.append("order-1", [NewEvent("Placed", {"total": 3})])
        clear, plain = store.read_all()
        # The blocking face over an `AsyncEventStore` (this suite's async run) shows its keys.
        keys = getattr(store, "store", store).keys.sealing(["c1"])
        sealed = seal(
            registered.model_dump(mode="json"), {"c1": [*personal_fields(Registered)]}, keys
        )
        archived = [dataclasses.replace(clear, data=sealed), plain]
        assert list(store.open_events(archived)) == [clear, plain]
        assert list(store.open_events([])) == []
        store.forget("c1")
        assert [e.data.get("name") for e in store.open_events(archived)] == [FORGOTTEN, None]

    def test_forget_refuses_a_subject_that_is_no_name(self, store: EventStore) -> None:
        for subject in ("", "a\x00b", 7):
            with pytest.raises(InvalidEvent):
                store.forget(subject)  # type: ignore[arg-type]
