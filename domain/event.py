"""`DomainEvent`: the base of every typed event a domain developer writes."""

from __future__ import annotations

from collections.abc import Iterable

from pydantic import BaseModel, ConfigDict


class DomainEvent(BaseModel):
    """A fact that happened to an aggregate: immutable, validated, JSON-serializable.

    Subclasses declare their fields as pydantic models do, and are registered
    under a stable name with `EventRegistry.event`. Unknown fields are refused
    when stored data is read, so a forgotten upcaster fails loudly instead of
    dropping data.

    Example::

        from eventcraft.domain import DomainEvent, EventRegistry
        from pydantic import ValidationError

        bank_events = EventRegistry()

        @bank_events.event("MoneyDeposited")
        class MoneyDeposited(DomainEvent):
            account_id: str
            amount: int

        deposited = MoneyDeposited(account_id="7", amount=500)
        assert deposited.model_dump() == {"account_id": "7", "amount": 500}
        try:
            MoneyDeposited(account_id="7", amount=500, memo="rent")
        except ValidationError as error:
            assert "memo" in str(error)  # a field it does not declare is refused
    """

    model_config = ConfigDict(frozen=True, extra="forbid")

    def event_tags(self) -> Iterable[str]:
        """The tags the event is stored with: what it concerns beyond its stream.

        No tags by default. An event that a rule across streams decides on names
        what it concerns, and a decision's query finds it by them::

            class StudentSubscribed(DomainEvent):
                student_id: str
                course_id: str

                def event_tags(self) -> list[str]:
                    return [f"student:{self.student_id}", f"course:{self.course_id}"]
        """
        return ()
