"""`bare_traceback`: where an exception came from, without what it said.

The error stores (parked projection events, an inbox's failed messages)
keep a failure's message beside its traceback. The message often quotes the
data that failed, personal fields included, so the traceback they keep holds
none: each exception of the chain is shown by its frames and its type only,
and the message, kept once, in one column, is what a forget erases.
A frame's source line is the program's text, never a value it held.
"""

from __future__ import annotations

import traceback

_CAUSE = "\nThe above exception was the direct cause of the following exception:\n\n"
_CONTEXT = "\nDuring handling of the above exception, another exception occurred:\n\n"


def bare_traceback(error: BaseException) -> str:
    """`error`'s traceback as Python prints it, each exception of its chain (causes and
    contexts) reduced to its frames and its type: no message, no notes.

    Example::

        from eventcraft.projections import bare_traceback

        def charge(card: str) -> None:
            raise ValueError(f"card {card} was refused")

        try:
            charge("4111 1111 1111 1111")
        except ValueError as error:
            text = bare_traceback(error)
        assert "in charge" in text and text.rstrip().endswith("ValueError")  # where, and what type
        assert "4111" not in text  # what it said stays out: the message is kept apart
    """
    chain: list[tuple[BaseException, str]] = []
    seen: set[int] = set()
    current: BaseException | None = error
    link = ""
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        chain.append((current, link))
        if current.__cause__ is not None:
            current, link = current.__cause__, _CAUSE
        elif current.__context__ is not None and not current.__suppress_context__:
            current, link = current.__context__, _CONTEXT
        else:
            current = None
    parts: list[str] = []
    for exception, following in reversed(chain):
        if exception.__traceback__ is not None:
            parts.append("Traceback (most recent call last):\n")
            parts.extend(traceback.format_tb(exception.__traceback__))
        parts.append(_type_name(type(exception)) + "\n")
        parts.append(following)
    return "".join(parts)


def _type_name(kind: type[BaseException]) -> str:
    module = kind.__module__
    name = kind.__qualname__
    return name if module in ("builtins", "__main__") else f"{module}.{name}"
