"""An App that puts one customer's personal data in every place the store and its parts
keep data: the forget-everywhere test's.

Its projections copy the customer's name into a read model, and fail on it (the
exception's message quotes the name) so the event is parked; its inbox mapping
fails on a message naming the customer, which goes to the error store. Its sagas keep
the name sealed in their start data and a step's result: one started with `personal=`,
one a process manager given the registry starts from the customer's `Registered` event.
"""

from __future__ import annotations

from typing import Annotated, Any

import sqlalchemy as sa
from eventcraft.domain import DomainEvent, EventRegistry
from eventcraft.eventstore import NewEvent, Personal, RecordedEvent
from eventcraft.messaging import IncomingMessage, InvalidMessage, Mapped
from eventcraft.projections import ErrorPolicy, Projection, ReadModel, TypedEvent
from eventcraft.sagas import Orchestrator, ProcessManager, Route, Saga, Step, StepContext
from pydantic import BaseModel

from eventcraft import App

SUBJECT = "customer-q7"
"""The data subject: an opaque id, stored in the clear to name its key."""
NAME = "Ada Quillfeather-Zx9"
EMAIL = "ada.quill.zx9@example.test"
PLAIN = (NAME, EMAIL)
"""What must be nowhere once the subject is forgotten."""
OTHER = "Bob Keepsake-Yw4"
"""Another customer's name, which stays."""


customers = EventRegistry()


@customers.event("Registered")
class Registered(DomainEvent):
    customer_id: str
    name: Annotated[str, Personal(subject="customer_id")]
    email: Annotated[str, Personal(subject="customer_id")]
    plan: str


class Profile(BaseModel):
    """A customer's state, as its snapshot keeps it."""

    name: Annotated[str, Personal()]
    plan: str


def registered(customer_id: str, name: str, email: str) -> NewEvent:
    return NewEvent(
        "Registered", Registered(customer_id=customer_id, name=name, email=email, plan="gold")
    )


metadata = sa.MetaData()
names_table = sa.Table(
    "forget_customer_names",
    metadata,
    sa.Column("customer", sa.Text, primary_key=True),
    sa.Column("name", sa.Text, nullable=False),
    sa.Column("email", sa.Text, nullable=False),
)

names = Projection("customer-names", tables=[names_table])


@names.on("Registered")
def _named(read_model: ReadModel, event: RecordedEvent) -> None:
    read_model.execute(
        sa.insert(read_model[names_table]).values(
            customer=event.data["customer_id"], name=event.data["name"], email=event.data["email"]
        )
    )


greetings = Projection(
    "customer-greetings", tables=[], on_error=ErrorPolicy(attempts=1, backoff=0, then="skip")
)


@greetings.on("Registered")
def _greeted(read_model: ReadModel, event: RecordedEvent) -> None:
    # A handler's exception quoting the data it failed on: what the parked event keeps.
    raise ValueError(f"cannot greet {event.data['name']} <{event.data['email']}>")


def refusing(message: IncomingMessage) -> Mapped:
    """An inbox mapping that cannot read the customer's message, and says what it held."""
    raise InvalidMessage(f"no plan in {message.body.decode()}")


class Welcomed(BaseModel):
    """A saga step's result: the account is plain, the greeting the saga subject's."""

    account_id: str
    greeting: Annotated[str, Personal()]


def _welcome(data: dict[str, Any], context: StepContext) -> Welcomed:
    return Welcomed(account_id=f"account-{context.saga_id}", greeting=f"Dear {data['name']}")


onboarding = Saga("onboarding", [Step("welcome", _welcome)])
"""Started with the name and email as `personal=`, under the customer's id."""

welcoming = Saga("welcoming", [Step("welcome", _welcome)])
"""Started by `welcomes` with a `Registered` event's data."""


def _customer(event: TypedEvent[Registered]) -> str:
    return event.stream_id


def welcomes(orchestrator: Orchestrator) -> ProcessManager:
    """Starts a `welcoming` saga for each registered customer, with the typed event."""
    return ProcessManager(
        "welcomes",
        orchestrator,
        [Route("Registered", welcoming, "start", _customer)],
        registry=customers,
    )


app = App(projections=[names, greetings], sagas=[onboarding, welcoming], registry=customers)
