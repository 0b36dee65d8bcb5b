"""The projections layer's exceptions.

::

    ProjectionError                      base of everything raised here
    ├── DefinitionError (TypeError)      a projection, fold or subscription declared wrongly
    ├── UnknownProjection (LookupError)  no projection of that name in this runner
    ├── ParkedEventNotFound (LookupError) no parked event at that position
    ├── ProjectionStopped                a handler kept failing under the "stop" policy
    ├── ProjectionTimeout (TimeoutError) `wait_until` ran out of time
    └── TableConflict                    a table of a declared name that the runner did not make

Store errors (`StoreUnavailable`, ...) and SQLAlchemy's errors from the
read-model database pass through unchanged.
"""

from __future__ import annotations


class ProjectionError(Exception):
    """Base of the projections layer's exceptions."""


class DefinitionError(ProjectionError, TypeError):
    """A projection, fold or subscription is declared wrongly; the message says how."""


class UnknownProjection(ProjectionError, LookupError):
    """The runner has no projection of that name."""


class ParkedEventNotFound(ProjectionError, LookupError):
    """No event of that projection is parked at that position, or another retry of it
    is under way."""


class ProjectionStopped(ProjectionError):
    """A handler failed on every try and the projection's policy is to stop.

    The event is parked; the checkpoint is just before it, so a restarted
    runner tries it again, and `retry_parked`/`discard_parked` settle it.
    """

    def __init__(self, name: str, position: int, error: BaseException) -> None:
        self.name = name
        self.position = position
        self.error = error
        super().__init__(
            f"projection {name!r} stopped at position {position}: {type(error).__name__}: {error}"
        )


class ProjectionTimeout(ProjectionError, TimeoutError):
    """`wait_until` gave up before every projection reached the position."""

    def __init__(self, position: int, behind: dict[str, int], timeout: float) -> None:
        self.position = position
        self.behind = behind
        """The projections that had not reached it, with their checkpoints."""
        lagging = ", ".join(f"{name!r} at {at}" for name, at in sorted(behind.items()))
        super().__init__(f"position {position} not reached within {timeout:g} s: {lagging}")


class TableConflict(ProjectionError):
    """A table of a declared table's name exists that the runner did not make.

    The runner serves each declared table as a view of that name, and never
    replaces a table it did not make: the table is left as it was.
    """
