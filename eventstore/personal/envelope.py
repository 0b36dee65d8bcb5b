"""Sealed personal fields: the `$personal` envelope an event's data keeps them in.

A sealed event's data holds its other fields as they are and, under the
key `$personal`, one entry per data subject::

    {"order_id": "o-1",
     "$personal": [{"subject": "customer-7", "key": "<key id>",
                    "fields": ["name", "email"], "sealed": "<base64>"}]}

`sealed` is the JSON of those fields, `{"name": ..., "email": ...}`,
encrypted with AES-256-GCM under the subject's key: a random 96-bit nonce,
then the ciphertext and its tag (the layout Spark's `aes_decrypt` reads too).
The key id and the field names are its associated data, so a sealed value
opens only as the fields it was sealed as. An entry names `forgotten` only
for fields whose replacement is not `FORGOTTEN`.

The envelope is a top-level key so that a reader can tell whether an event
holds one with one dict lookup (or one substring search of its JSON text):
stores without personal data pay for nothing else.
"""

from __future__ import annotations

import base64
import binascii
import os
from collections.abc import Callable, Mapping
from typing import Any

import orjson
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from ..errors import InvalidEvent, UnreadablePersonalData
from .fields import FORGOTTEN, PersonalField

MARK = "$personal"
"""The top-level key of an event's data that holds its sealed fields."""
TEXT_MARK = f'"{MARK}"'
"""`MARK` as it appears in JSON text: a cheap first test of stored text (exported as
`SEALED_MARK`, for readers of the store's tables that filter on it).

Example::

    import sqlite3
    from typing import Annotated

    from eventcraft.eventstore import SEALED_MARK, EventStore, NewEvent, Personal
    from pydantic import BaseModel


    class Registered(BaseModel):
        customer_id: str
        email: Annotated[str, Personal(subject="customer_id")]


    ann = Registered(customer_id="c7", email="ann@example.com")
    with EventStore.open("sqlite:///shop.db") as store:
        store.append("customer-7", [NewEvent("Registered", ann)])
        store.append("order-1", [NewEvent("Placed", {"customer_id": "c7"})])
    # A report reading the store's table itself finds the events that hold sealed fields.
    db = sqlite3.connect("shop.db")
    query = "SELECT stream_id FROM eventcraft_events WHERE instr(data, ?) > 0"
    assert db.execute(query, (SEALED_MARK,)).fetchall() == [("customer-7",)]
    db.close()
"""

_NONCE = 12
_ENTRY_KEYS = frozenset({"subject", "key", "fields", "sealed", "forgotten"})


def seal(
    data: dict[str, Any],
    groups: Mapping[str, list[PersonalField]],
    keys: Mapping[str, tuple[str, AESGCM]],
) -> dict[str, Any]:
    """`data` (a model's JSON) with the fields of `groups` (by subject) sealed."""
    entries = []
    sealed_names: set[str] = set()
    for subject, fields in groups.items():
        key_id, cipher = keys[subject]
        names = [field.name for field in fields]
        plain = orjson.dumps({name: data[name] for name in names})
        nonce = os.urandom(_NONCE)
        secret = nonce + cipher.encrypt(nonce, plain, _associated(key_id, names))
        entry: dict[str, Any] = {
            "subject": subject,
            "key": key_id,
            "fields": names,
            "sealed": base64.b64encode(secret).decode(),
        }
        odd = {f.name: f.forgotten for f in fields if f.forgotten != FORGOTTEN}
        if odd:
            entry["forgotten"] = odd
        entries.append(entry)
        sealed_names.update(names)
    kept = {name: value for name, value in data.items() if name not in sealed_names}
    kept[MARK] = entries
    return kept


def key_ids(data: dict[str, Any], where: Callable[[], str]) -> list[str]:
    """The key ids the envelope of `data` names. Only looked at, not checked whole: an
    append checks an envelope it is given (`check`), and `opened` refuses a broken one."""
    try:
        found = [entry["key"] for entry in data[MARK]]
    except (TypeError, KeyError) as error:
        raise _malformed(where) from error
    if not found or not all(type(key) is str for key in found):
        raise _malformed(where)
    return found


def check(data: dict[str, Any], where: str) -> None:
    """Refuse data given with a `$personal` key that is not an envelope (an import's is)."""
    entries = data[MARK]
    if not (
        isinstance(entries, list)
        and entries
        and all(
            isinstance(entry, dict)
            and entry.keys() <= _ENTRY_KEYS
            and isinstance(entry.get("subject"), str)
            and isinstance(entry.get("key"), str)
            and isinstance(entry.get("sealed"), str)
            and isinstance(entry.get("fields"), list)
            and all(isinstance(name, str) for name in entry["fields"])
            and isinstance(entry.get("forgotten", {}), dict)
            for entry in entries
        )
    ):
        raise InvalidEvent(
            f"{where}: its data's key {MARK!r} is kept for sealed personal fields, and holds "
            "no envelope"
        )


def opened(
    data: dict[str, Any], ciphers: Mapping[str, AESGCM | None], where: Callable[[], str]
) -> dict[str, Any]:
    """`data` with its sealed fields in the clear, or their replacements where forgotten.

    `ciphers` holds each key id the key store knows (None: forgotten); a key
    it does not know, or a seal that does not open, raises.
    """
    restored = dict(data)
    del restored[MARK]
    for entry in data[MARK]:
        try:
            key_id, names, sealed = entry["key"], entry["fields"], entry["sealed"]
        except (TypeError, KeyError) as error:
            raise _malformed(where) from error
        if key_id not in ciphers:
            raise UnreadablePersonalData(where(), key_id, "this store's key store never held")
        cipher = ciphers[key_id]
        if cipher is None:
            odd = entry.get("forgotten") or {}
            for name in names:
                restored[name] = odd.get(name, FORGOTTEN)
            continue
        try:
            secret = base64.b64decode(sealed, validate=True)
            plain = cipher.decrypt(secret[:_NONCE], secret[_NONCE:], _associated(key_id, names))
            fields = orjson.loads(plain)
        except (binascii.Error, ValueError, TypeError, InvalidTag) as error:
            raise UnreadablePersonalData(
                where(), key_id, "does not open with its key: the sealed text was altered"
            ) from error
        restored.update(fields)
    return restored


def _associated(key_id: str, names: list[str]) -> bytes:
    return f"{key_id}:{','.join(names)}".encode()


def _malformed(where: Callable[[], str]) -> UnreadablePersonalData:
    return UnreadablePersonalData(where(), "(none)", f"is malformed: {MARK!r} is no envelope")
