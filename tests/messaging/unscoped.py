"""Messages as inboxes stored them before ids were scoped to an inbox, for the tests
of a store written then."""

from __future__ import annotations

import hashlib
import uuid

from eventcraft.eventstore import EventStore, NewEvent

UNSCOPED_NAMESPACE = uuid.UUID("6f1c2b9e-4d0a-5b7e-9c3f-2a8d1e5b7c40")
"""The namespace of those ids: the message id itself when a UUID, else its UUID-5 here."""


def stored_unscoped(store: EventStore, message_id: str, body: bytes, stream: str) -> uuid.UUID:
    """Store `{"order": 1}` in `stream` as an inbox did then; its event id."""
    try:
        event_id = uuid.UUID(message_id)
    except ValueError:
        event_id = uuid.uuid5(UNSCOPED_NAMESPACE, message_id)
    metadata = {"message_id": message_id, "message_sha256": hashlib.sha256(body).hexdigest()}
    store.append(stream, [NewEvent("OrderReceived", {"order": 1}, metadata, id=event_id)])
    return event_id
