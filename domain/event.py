"""`DomainEvent`: the base of every typed event a domain developer writes."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class DomainEvent(BaseModel):
    """A fact that happened to an aggregate: immutable, validated, JSON-serializable.

    Subclasses declare their fields as pydantic models do, and are registered
    under a stable name with `EventRegistry.event`. Unknown fields are refused
    when stored data is read, so a forgotten upcaster fails loudly instead of
    dropping data.
    """

    model_config = ConfigDict(frozen=True, extra="forbid")
