"""`bare_traceback`: the chain of a failure, its frames and types, with none of its
messages, which may quote personal data."""

from __future__ import annotations

import traceback

from eventcraft.projections import bare_traceback


class Refused(Exception):
    pass


def _handler(name: str) -> None:
    try:
        found: dict[str, int] = {}
        found[name]
    except KeyError as error:
        raise Refused(f"no account for {name}") from error


def _failing(name: str) -> BaseException:
    try:
        try:
            _handler(name)
        except Refused:
            if name == "-":
                raise ValueError(f"while greeting {name}") from None
            raise ValueError(f"while greeting {name}")  # noqa: B904 - the context is the test
    except ValueError as error:
        return error
    raise AssertionError("it did not fail")


def test_a_bare_traceback_keeps_the_chain_its_frames_and_types_and_no_message() -> None:
    error = _failing("Ada Lovelace")
    full = "".join(traceback.format_exception(error))
    bare = bare_traceback(error)
    assert "Ada Lovelace" in full and "Ada Lovelace" not in bare
    assert bare.count("Traceback (most recent call last):") == 3
    assert "The above exception was the direct cause" in bare
    assert "During handling of the above exception" in bare
    lines = bare.splitlines()
    assert "KeyError" in lines and f"{__name__}.Refused" in lines and lines[-1] == "ValueError"
    assert "in _handler" in bare and "found[name]" in bare  # where, as the program says it


def test_a_suppressed_context_is_left_out_as_python_leaves_it_out() -> None:
    bare = bare_traceback(_failing("-"))
    assert bare.count("Traceback (most recent call last):") == 1
    assert bare.splitlines()[-1] == "ValueError"


def test_an_exception_never_raised_is_its_type_alone() -> None:
    assert bare_traceback(Refused("Ada Lovelace")) == f"{__name__}.Refused\n"
