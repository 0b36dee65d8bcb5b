"""messaging: the log relayed to RabbitMQ and NATS JetStream, and messages taken in once."""

from .errors import (
    BrokerUnavailable,
    FailedMessageNotFound,
    InvalidMessage,
    MessageIdConflict,
    MessageRefused,
    MessagingConfigError,
    MessagingError,
)
from .failed import FailedMessage
from .inbox import Inbox, Mapped
from .intake import HttpIntake
from .jetstream import JetStreamPublisher, JetStreamSource
from .messages import IncomingMessage, OutgoingMessage, event_id_for
from .publisher import Publisher
from .rabbitmq import RabbitMQPublisher, RabbitMQSource
from .relay import Relay, RelayStatus
from .source import Delivery, Source

__all__ = [
    "BrokerUnavailable",
    "Delivery",
    "FailedMessage",
    "FailedMessageNotFound",
    "HttpIntake",
    "Inbox",
    "IncomingMessage",
    "InvalidMessage",
    "JetStreamPublisher",
    "JetStreamSource",
    "Mapped",
    "MessageIdConflict",
    "MessageRefused",
    "MessagingConfigError",
    "MessagingError",
    "OutgoingMessage",
    "Publisher",
    "RabbitMQPublisher",
    "RabbitMQSource",
    "Relay",
    "RelayStatus",
    "Source",
    "event_id_for",
]
