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
from .jetstream import JetStreamPublisher
from .messages import IncomingMessage, OutgoingMessage, event_id_for
from .publisher import Publisher
from .rabbitmq import RabbitMQPublisher
from .relay import Relay, RelayStatus

__all__ = [
    "BrokerUnavailable",
    "FailedMessageNotFound",
    "IncomingMessage",
    "InvalidMessage",
    "JetStreamPublisher",
    "MessageIdConflict",
    "MessageRefused",
    "MessagingConfigError",
    "MessagingError",
    "OutgoingMessage",
    "Publisher",
    "RabbitMQPublisher",
    "Relay",
    "RelayStatus",
    "event_id_for",
]
