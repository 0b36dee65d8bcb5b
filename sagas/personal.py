"""Personal data in a saga's stream: sealed under its subjects' keys, as a domain event's.

A saga's start data, a step's result and a signalled event's data are each
a *part* of the saga event that records them (`data`, `result`). A part may
hold personal fields: those a pydantic model marks `Personal` (as a domain
event marks them), or the start's `personal=`. Each is kept out of the part,
as a top-level field of the event named `<part>.<field>` and marked
`Personal` with its subject, so that the store seals it as it seals an
event's fields, and a forget of the subject reaches every copy: the stream,
and the archive's copies of the stream as stored.

The subjects are kept in the clear under `subjects` (as the store's envelope
keeps them), so that a copy made later (a signal's data, as its waiting
step's result) is sealed again under the same ones. A read puts each field
back into its part, reading `FORGOTTEN` once its subject is forgotten. A part
without personal fields is stored as before: a plain saga's events do not
change.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Annotated, Any

from eventcraft.eventstore import FORGOTTEN, InvalidEvent, Personal, check_name, encode_object
from pydantic import BaseModel, ConfigDict, PrivateAttr, create_model

SUBJECTS = "subjects"
"""The key of a saga event's data naming the subject of each sealed field."""


@dataclass(frozen=True)
class Part:
    """What a saga event records of one value: its plain part, and its personal fields."""

    plain: Any
    """The value as JSON, without its personal fields."""
    personal: dict[str, tuple[str, Any]] = field(default_factory=dict)
    """Each personal field's name: its subject and its value (JSON)."""

    def merged(self) -> Any:
        """The whole value, as a step and a reader see it."""
        if not self.personal:
            return self.plain
        return {**self.plain, **{name: value for name, (_, value) in self.personal.items()}}


def part_of(value: Any, subject: str | None, where: str) -> Part:
    """`value` (JSON, or a pydantic model) as a part; a model's fields marked `Personal`
    are its personal ones, `Personal()` (no subject named) being `subject`'s.

    `InvalidEvent`, saying `where`, for a field whose subject cannot be told.
    """
    if not isinstance(value, BaseModel):
        return Part(value)
    try:
        plain: dict[str, Any] = value.model_dump(mode="json")
    except Exception as error:  # pydantic's own serialization errors name no field
        raise InvalidEvent(f"{where} cannot be encoded as JSON: {error}") from error
    personal: dict[str, tuple[str, Any]] = {}
    for name, info in type(value).model_fields.items():
        marks = [mark for mark in info.metadata if isinstance(mark, Personal)]
        if not marks:
            continue
        owner = _subject(value, name, marks[0], subject, where)
        personal[name] = (owner, plain.pop(name))
    return Part(plain, personal)


def given_part(data: Any, personal: Mapping[str, Any], subject: str, where: str) -> Part:
    """`data` with `personal`'s fields beside it, all of `subject`."""
    part = part_of(data, subject, where)
    if not isinstance(part.plain, dict):
        raise InvalidEvent(f"{where}: personal fields go beside a dict, not {part.plain!r}")
    both = sorted((part.plain.keys() | part.personal.keys()) & personal.keys())
    if both:
        raise InvalidEvent(f"{where}: {both[0]!r} is in both the data and personal=")
    merged = dict(part.personal)
    for name, value in personal.items():
        if not isinstance(name, str):
            raise InvalidEvent(f"{where}: a personal field's name is a str, not {name!r}")
        merged[name] = (subject, value)
    return Part(part.plain, merged)


def recorded(fields: dict[str, Any], where: str) -> Any:
    """The data of a saga event holding `fields`, a `Part` among them put as its plain
    value, its personal fields beside it marked for the store to seal. `InvalidEvent`
    saying `where` for what JSON cannot carry."""
    data = {
        name: value.plain if isinstance(value, Part) else value for name, value in fields.items()
    }
    sealed = {
        f"{name}.{key}": (owner, value)
        for name, part in fields.items()
        if isinstance(part, Part)
        for key, (owner, value) in part.personal.items()
    }
    if not sealed:
        encode_object(where, data)
        return data
    subjects = {key: owner for key, (owner, _) in sealed.items()}
    whole = {**data, **{key: value for key, (_, value) in sealed.items()}, SUBJECTS: subjects}
    encode_object(where, whole)  # refused here, naming the field, not at the append
    record = _model(tuple(sealed)).model_validate(whole)
    record._subjects = subjects
    return record


def read_part(data: Mapping[str, Any], name: str) -> Part:
    """Part `name` of a saga event's data as read: its fields opened, or `FORGOTTEN`."""
    plain = data.get(name)
    subjects: Mapping[str, str] = data.get(SUBJECTS) or {}
    prefix = f"{name}."
    personal = {
        key.removeprefix(prefix): (owner, data.get(key))
        for key, owner in subjects.items()
        if key.startswith(prefix)
    }
    return Part(plain, personal)


def sealed_text(clear: str, text: str, subject: str | None) -> str | Part:
    """`text`, which may quote personal data (an exception's message), as a saga event
    records it: as it is in a saga of no one's; else sealed under `subject`, with `clear`
    (what may be said of it in the clear: the exception's type) in its place."""
    if subject is None:
        return text
    return Part(clear, {_TEXT: (subject, text)})


def read_text(data: Mapping[str, Any], name: str) -> str | None:
    """A text `sealed_text` recorded as `name` (None if there is none): whole, or
    `clear: FORGOTTEN` once its subject is forgotten (its kind still said)."""
    part = read_part(data, name)
    if _TEXT not in part.personal:
        return None if part.plain is None else str(part.plain)
    _, text = part.personal[_TEXT]
    return f"{part.plain}: {FORGOTTEN}" if text == FORGOTTEN else str(text)


_TEXT = "text"


def check_subject(what: str, subject: object) -> str:
    """`subject` if the store can name a key after it; `InvalidEvent` saying `what` if not."""
    return check_name(what, subject)


def stored(data: Any) -> Any:
    """A saga event's data as the store keeps it, before it is sealed (a JSON value)."""
    return data.model_dump(mode="json") if isinstance(data, BaseModel) else data


def _subject(model: BaseModel, name: str, mark: Personal, default: str | None, where: str) -> str:
    given = mark.subject
    if given is None:
        if default is None:
            raise InvalidEvent(
                f"{where}: field {name!r} is marked Personal() with no subject, and the saga "
                "has none: start it with subject=, or name the field's (Personal(subject=...))"
            )
        return check_name(f"{where}: the saga's subject", default)
    try:
        owner = given(model) if callable(given) else getattr(model, given)
    except Exception as error:
        raise InvalidEvent(
            f"{where}: the subject of personal field {name!r} could not be found: "
            f"{type(error).__name__}: {error}"
        ) from error
    # Checked as the store checks it, but now: a result is appended with the next
    # move, which the store's refusal would fail again at every pass.
    if isinstance(owner, bool) or not isinstance(owner, str | int | uuid.UUID):
        raise InvalidEvent(
            f"{where}: the subject of personal field {name!r} must be a str, int or UUID, "
            f"not {owner!r}"
        )
    return check_name(f"{where}: the subject of personal field {name!r}", str(owner))


class _Record(BaseModel):
    """A saga event holding personal fields, its other fields kept as extras."""

    model_config = ConfigDict(extra="allow", frozen=True)
    _subjects: dict[str, str] = PrivateAttr(default_factory=dict)


class _SubjectOf:
    """The subject of one sealed field of a `_Record`: the store asks it at the append."""

    def __init__(self, key: str) -> None:
        self.key = key

    def __call__(self, record: _Record) -> str:
        return record._subjects[self.key]


_models: dict[tuple[str, ...], type[_Record]] = {}


def _model(keys: tuple[str, ...]) -> type[_Record]:
    """The record class whose fields `keys` are personal: one a shape, made once (the
    store looks a class's marks up once, too)."""
    found = _models.get(keys)
    if found is None:
        fields: dict[str, Any] = {
            key: (Annotated[Any, Personal(subject=_SubjectOf(key))], ...) for key in keys
        }
        found = _models[keys] = create_model("SagaRecord", __base__=_Record, **fields)
    return found
