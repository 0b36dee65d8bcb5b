"""The domain layer's exceptions.

::

    DomainError                         base for your aggregates' broken invariants
    AggregateNotFound (LookupError)     no events in the aggregate's stream
    EventDecodingError (ValueError)     a stored event cannot become a domain event
    ├── UnknownEventType                no class registered for its type name
    └── NoUpcastPath                    no chain of upcasters from its version to today's
    RegistrationError (TypeError)       an event class, upcaster or aggregate declared wrongly
    DecisionConflict                    a decision overtaken by matching events, attempt after
                                        attempt (an `AppendConditionFailed` of the store)

Store errors (`WrongExpectedVersion`, `StoreUnavailable`, ...) pass through
unchanged: they are the store's to name.
"""

from __future__ import annotations

from eventcraft.eventstore import AppendConditionFailed


class DomainError(Exception):
    """A command broke a business rule. Subclass it for your own rules.

    A command that raises it records nothing.

    Example::

        from eventcraft.domain import (
            Aggregate, DomainError, DomainEvent, EventRegistry, Repository, State, evolves,
        )
        from eventcraft.eventstore import EventStore

        bank_events = EventRegistry()

        @bank_events.event("MoneyDeposited")
        class MoneyDeposited(DomainEvent):
            amount: int

        class AccountState(State):
            balance: int = 0

            @evolves
            def deposited(self, event: MoneyDeposited) -> "AccountState":
                return self.replace(balance=self.balance + event.amount)

        class LimitExceeded(DomainError):
            "A deposit above what an account takes at once."

        class BankAccount(Aggregate[AccountState]):
            category = "account"
            registry = bank_events

            def deposit(self, amount: int) -> None:
                if amount > 10_000:
                    raise LimitExceeded(f"account {self.id} takes 10000 at most, not {amount}")
                self.record(MoneyDeposited(amount=amount))

        store = EventStore.open("sqlite:///bank.db")
        accounts = Repository(store, BankAccount)
        accounts.execute("7", lambda account: account.deposit(500), create=True)
        try:
            accounts.execute("7", lambda account: account.deposit(50_000))
        except LimitExceeded as refused:
            assert str(refused) == "account 7 takes 10000 at most, not 50000"
        assert store.stream_version("account-7") == 1  # the refused command wrote nothing
        store.close()
    """


class AggregateNotFound(LookupError):
    """The aggregate's stream holds no events.

    Example::

        from eventcraft.domain import Aggregate, AggregateNotFound, EventRegistry, Repository, State
        from eventcraft.eventstore import EventStore

        class Cart(Aggregate[State]):
            category = "cart"
            registry = EventRegistry()

        store = EventStore.open("sqlite:///shop.db")
        try:
            Repository(store, Cart).load("42")
        except AggregateNotFound as error:
            assert (error.aggregate_id, error.stream_id) == ("42", "cart-42")
            assert str(error) == "no Cart '42': stream 'cart-42' is empty"
        store.close()
    """

    def __init__(self, aggregate_type: str, aggregate_id: str, stream_id: str) -> None:
        self.aggregate_type = aggregate_type
        self.aggregate_id = aggregate_id
        self.stream_id = stream_id
        super().__init__(f"no {aggregate_type} {aggregate_id!r}: stream {stream_id!r} is empty")


class EventDecodingError(ValueError):
    """A stored event that cannot be turned into a domain event; names where it is.

    Example::

        from eventcraft.domain import DomainEvent, EventDecodingError, EventRegistry
        from eventcraft.eventstore import EventStore, NewEvent

        bank_events = EventRegistry()

        @bank_events.event("MoneyDeposited")
        class MoneyDeposited(DomainEvent):
            amount: int

        store = EventStore.open("sqlite:///bank.db")
        store.append("account-7", [NewEvent("MoneyDeposited", {"amount": "a lot"})])  # by hand
        (stored,) = store.read_stream("account-7")
        try:
            bank_events.decode(stored)
        except EventDecodingError as error:
            assert (error.stream_id, error.version, error.event_type) == (
                "account-7", 1, "MoneyDeposited",
            )
            assert "does not fit MoneyDeposited" in str(error)
        store.close()
    """

    def __init__(self, stream_id: str, version: int, event_type: str, reason: str) -> None:
        self.stream_id = stream_id
        self.version = version
        self.event_type = event_type
        super().__init__(
            f"event {event_type!r} at version {version} of stream {stream_id!r}: {reason}"
        )


class UnknownEventType(EventDecodingError):
    """No event class is registered under the stored type name.

    Example::

        from eventcraft.domain import EventDecodingError, EventRegistry, UnknownEventType
        from eventcraft.eventstore import EventStore, NewEvent

        bank_events = EventRegistry()  # nothing registered as "GiftCardIssued"
        store = EventStore.open("sqlite:///bank.db")
        store.append("card-1", [NewEvent("GiftCardIssued", {"amount": 50})])
        (stored,) = store.read_stream("card-1")
        try:
            bank_events.decode(stored)
        except UnknownEventType as error:
            assert isinstance(error, EventDecodingError)
            assert error.event_type == "GiftCardIssued" and error.stream_id == "card-1"
        store.close()
    """


class NoUpcastPath(EventDecodingError):
    """The stored event's schema version cannot be brought to the registered one.

    Example::

        from eventcraft.domain import DomainEvent, EventRegistry, NoUpcastPath
        from eventcraft.eventstore import EventStore, NewEvent

        bank_events = EventRegistry()

        @bank_events.event("MoneyDeposited", version=2)  # version 1 named it "cents"
        class MoneyDeposited(DomainEvent):
            amount: int

        store = EventStore.open("sqlite:///bank.db")
        old = NewEvent("MoneyDeposited", {"cents": 500}, {"event_version": 1})
        store.append("account-7", [old])
        (stored,) = store.read_stream("account-7")
        try:
            bank_events.decode(stored)  # no upcaster from version 1 was registered
        except NoUpcastPath as error:
            assert (error.stored_version, error.current_version) == (1, 2)
            assert "no upcaster from version 1 to 2" in str(error)
        store.close()
    """

    def __init__(
        self, stream_id: str, version: int, event_type: str, stored: int, current: int, why: str
    ) -> None:
        self.stored_version = stored
        self.current_version = current
        super().__init__(
            stream_id,
            version,
            event_type,
            f"stored as schema version {stored}, registered as {current}: {why}",
        )


class RegistrationError(TypeError):
    """An event class, upcaster or aggregate declared in a way that cannot work.

    Example::

        from eventcraft.domain import DomainEvent, EventRegistry, RegistrationError

        bank_events = EventRegistry()

        @bank_events.event("MoneyDeposited")
        class MoneyDeposited(DomainEvent):
            amount: int

        try:

            @bank_events.event("MoneyDeposited")  # a second class under a name taken
            class CashDeposited(DomainEvent):
                amount: int

        except RegistrationError as error:
            assert str(error) == "'MoneyDeposited' is already registered, for MoneyDeposited"
    """


class DecisionConflict(AppendConditionFailed):
    """Every attempt of a decision found events matching its query stored after its read.

    Nothing was written. Carries the last attempt's refusal (`stream_id`,
    `query`, `after`, `position`) and how many attempts were made: rules
    that many writers contend for at once may need more, or fewer writers.

    Example::

        from eventcraft.domain import (
            DecisionConflict, DecisionProjection, Decisions, DomainError, DomainEvent,
            EventRegistry,
        )
        from eventcraft.eventstore import EventStore

        school = EventRegistry()

        @school.event("StudentSubscribed")
        class StudentSubscribed(DomainEvent):
            student_id: str
            course_id: str

            def event_tags(self) -> list[str]:
                return [f"course:{self.course_id}"]

        store = EventStore.open("sqlite:///school.db")
        decisions = Decisions(store, school)
        taken = DecisionProjection(0, {StudentSubscribed: lambda n, _: n + 1}, tags=["course:c1"])
        rivals = iter(["bob", "cat", "dan"])

        def subscribe_ann(decision):
            if decision["taken"] >= 30:
                raise DomainError("course c1 is full")
            # Another writer subscribes a student between this read and its append.
            rival = StudentSubscribed(student_id=next(rivals), course_id="c1")
            store.append("course-c1", [school.to_new_event(rival, {})])
            return StudentSubscribed(student_id="ann", course_id="c1")

        try:
            decisions.execute({"taken": taken}, subscribe_ann, stream_id="course-c1", attempts=3)
        except DecisionConflict as error:
            assert error.attempts == 3
        assert store.stream_version("course-c1") == 3  # the rivals' three, none of ann's
        store.close()
    """

    def __init__(
        self, stream_id: str, query: object, after: int | None, position: int, attempts: int
    ) -> None:
        super().__init__(stream_id, query, after, position)
        self.attempts = attempts
        self.args = (
            f"the decision was overtaken {attempts} times in a row, last by the event at "
            f"position {position} matching {query!r} (stream: {stream_id!r}); "
            "nothing was written",
        )

    def __reduce__(  # type: ignore[override]
        self,
    ) -> tuple[type[DecisionConflict], tuple[str, object, int | None, int, int]]:
        return (
            type(self),
            (self.stream_id, self.query, self.after, self.position, self.attempts),
        )
