"""messaging: the log relayed to RabbitMQ and NATS JetStream, and messages taken in once.

The broker clients (aio-pika, nats-py) come with the `brokers` extra and are
imported only when a RabbitMQ or JetStream class is first used, so the rest
(the inbox, the HTTP intake, the error store the command line reads) works
without them.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

from .errors import (
    BrokerUnavailable,
    FailedMessageNotFound,
    Forbidden,
    InvalidMessage,
    MessageDiscarded,
    MessageIdConflict,
    MessageRefused,
    MessagingConfigError,
    MessagingError,
    Unauthenticated,
)
from .failed import DATA_SUBJECTS_HEADER, FailedMessage, InboxErrorStore
from .failed import FAILED as FAILED_TABLE
from .inbox import Inbox, Mapped
from .intake import Authenticate, HttpIntake
from .messages import TAGS_HEADER, IncomingMessage, OutgoingMessage, event_id_for
from .publisher import Publisher
from .relay import Relay, RelayStatus
from .relay_listing import RelayRecord, relay_records
from .source import Delivery, Source
from .tenants_intake import TenantOf, TenantsIntake

if TYPE_CHECKING:
    from .jetstream import JetStreamPublisher, JetStreamSource
    from .rabbitmq import RabbitMQPublisher, RabbitMQSource

_BROKER_CLASSES = {
    "JetStreamPublisher": "jetstream",
    "JetStreamSource": "jetstream",
    "RabbitMQPublisher": "rabbitmq",
    "RabbitMQSource": "rabbitmq",
}


def __getattr__(name: str) -> Any:
    module = _BROKER_CLASSES.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    try:
        return getattr(import_module(f".{module}", __name__), name)
    except ImportError as error:
        raise ImportError(
            f"{name} needs the broker clients: pip install 'eventcraft[brokers]' ({error})"
        ) from error


__all__ = [
    "DATA_SUBJECTS_HEADER",
    "FAILED_TABLE",
    "TAGS_HEADER",
    "Authenticate",
    "BrokerUnavailable",
    "Delivery",
    "FailedMessage",
    "FailedMessageNotFound",
    "Forbidden",
    "HttpIntake",
    "Inbox",
    "InboxErrorStore",
    "IncomingMessage",
    "InvalidMessage",
    "JetStreamPublisher",
    "JetStreamSource",
    "Mapped",
    "MessageDiscarded",
    "MessageIdConflict",
    "MessageRefused",
    "MessagingConfigError",
    "MessagingError",
    "OutgoingMessage",
    "Publisher",
    "RabbitMQPublisher",
    "RabbitMQSource",
    "Relay",
    "RelayRecord",
    "RelayStatus",
    "Source",
    "TenantOf",
    "TenantsIntake",
    "Unauthenticated",
    "event_id_for",
    "relay_records",
]
