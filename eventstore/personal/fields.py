"""`Personal`: the mark of an event field that holds personal data, and whose it is.

A pydantic event (or snapshot state) declares such fields with
`Annotated[str, Personal(...)]`. The store seals them when they are
written, with a key of their data subject (`envelope.py`), and `forget`
deletes that key: from then on every reader sees `FORGOTTEN`, or the
replacement the field names, in their place. Only fields of the model
itself are looked at, not those of models nested in it; a field whose whole
value is personal (an address model) is marked as one.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, TypeAdapter, ValidationError

from ..encoding import check_name
from ..errors import InvalidEvent

FORGOTTEN = "<forgotten>"
"""What a personal field reads as once its subject is forgotten, unless it names another
replacement (`Personal(forgotten=...)`).

Example::

    from typing import Annotated

    from eventcraft.eventstore import FORGOTTEN, EventStore, NewEvent, Personal
    from pydantic import BaseModel


    class Registered(BaseModel):
        customer_id: str
        email: Annotated[str, Personal(subject="customer_id")]


    ann = Registered(customer_id="c7", email="ann@example.com")
    with EventStore.open("sqlite:///shop.db") as store:
        store.append("customer-7", [NewEvent("Registered", ann)])
        store.forget("c7")  # the right to erasure: the subject's key is deleted
        (event,) = store.read_stream("customer-7")
    assert event.data == {"customer_id": "c7", "email": FORGOTTEN}
"""

Subject = str | Callable[[Any], object] | None
"""Whose data a personal field holds: the name of another field of the event holding the
subject's id, a function of the event returning it, or None for the stream the event is
appended to (a snapshot's stream)."""


@dataclass(frozen=True, slots=True)
class Personal:
    """Marks a field of a pydantic event as personal data of one data subject.

    The subject's id is stored in the clear beside the sealed fields (it
    names the key): make it an opaque id, never personal data itself.

    Example::

        from typing import Annotated

        from eventcraft.domain import DomainEvent
        from eventcraft.eventstore import FORGOTTEN, EventStore, NewEvent, Personal

        class Registered(DomainEvent):
            customer_id: str
            name: Annotated[str, Personal(subject="customer_id")]
            phone: Annotated[str | None, Personal(subject="customer_id", forgotten=None)]

        registered = Registered(customer_id="c1", name="Ada", phone="+44 20 7946 0000")
        with EventStore.open("sqlite:///shop.db") as store:
            store.append("customer-c1", [NewEvent("Registered", registered)])
            (event,) = store.read_stream("customer-c1")
            assert event.data["name"] == "Ada"  # sealed as stored, opened for readers
            store.forget("c1")  # the subject's key is deleted
            (event,) = store.read_stream("customer-c1")
        assert event.data == {"customer_id": "c1", "name": FORGOTTEN, "phone": None}
    """

    subject: Subject = None
    """Whose data the field holds (see `Subject`); None: the stream's id."""
    forgotten: Any = FORGOTTEN
    """What readers see in the field once its subject is forgotten: any JSON value the
    field's type accepts (the default, the string `FORGOTTEN`, suits `str` fields)."""


@dataclass(frozen=True, slots=True)
class PersonalField:
    """A field of a model marked `Personal`, as found on its class."""

    name: str
    """The field's key in the model's JSON."""
    subject: Subject
    forgotten: Any


_found: dict[type[BaseModel], tuple[PersonalField, ...]] = {}


def personal_fields(cls: type[BaseModel]) -> tuple[PersonalField, ...]:
    """The fields of `cls` marked `Personal`, in declaration order; () for most classes.

    Checked when a class is first looked at, so that a mistake is one error
    at the first append, not unreadable events later: a subject field must
    exist and not be personal itself, and the replacement must fit the field.
    """
    found = _found.get(cls)
    if found is None:
        found = _inspect(cls)
        _found[cls] = found
    return found


def _inspect(cls: type[BaseModel]) -> tuple[PersonalField, ...]:
    fields = cls.model_fields
    marked: list[PersonalField] = []
    for name, info in fields.items():
        marks = [mark for mark in info.metadata if isinstance(mark, Personal)]
        if not marks:
            continue
        if len(marks) > 1:
            raise InvalidEvent(f"{cls.__qualname__}.{name} is marked Personal twice")
        mark = marks[0]
        _check_forgotten(cls, name, info.annotation, mark.forgotten)
        marked.append(PersonalField(name, mark.subject, mark.forgotten))
    personal = {field.name for field in marked}
    for field in marked:
        subject = field.subject
        if subject is None or callable(subject):
            continue
        if not isinstance(subject, str) or subject not in fields:
            raise InvalidEvent(
                f"{cls.__qualname__}.{field.name}: Personal(subject=...) names a field of the "
                f"event, a function of it or None (the stream), not {subject!r}"
            )
        if subject in personal:
            raise InvalidEvent(
                f"{cls.__qualname__}.{field.name}: its subject field {subject!r} is personal "
                "itself; the subject's id is stored in the clear to name its key"
            )
    return tuple(marked)


def _check_forgotten(cls: type[BaseModel], name: str, annotation: Any, value: object) -> None:
    try:
        TypeAdapter(annotation).validate_python(value)
    except ValidationError as error:
        raise InvalidEvent(
            f"{cls.__qualname__}.{name}: readers would see {value!r} once its subject is "
            f"forgotten, which the field does not accept ({error.errors()[0]['msg']}); "
            "name a replacement that fits: Personal(forgotten=...)"
        ) from error


def subject_of(field: PersonalField, model: BaseModel, stream_id: str, where: str) -> str:
    """The data subject of `field` in `model`, an event or snapshot of `stream_id`."""
    subject = field.subject
    if subject is None:
        return stream_id
    try:
        value = subject(model) if callable(subject) else getattr(model, subject)
    except Exception as error:
        raise InvalidEvent(
            f"{where}: the subject of personal field {field.name!r} could not be found: "
            f"{type(error).__name__}: {error}"
        ) from error
    if isinstance(value, bool) or not isinstance(value, str | int | uuid.UUID):
        raise InvalidEvent(
            f"{where}: the subject of personal field {field.name!r} must be a str, int or "
            f"UUID, not {value!r}"
        )
    return check_name(f"{where}: the subject of personal field {field.name!r}", str(value))
