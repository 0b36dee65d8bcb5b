"""`State.replace`: the copy a handler returns, made for the load's inner loop."""

from __future__ import annotations

import pytest
from eventcraft.domain import State
from pydantic import PrivateAttr, ValidationError


class Account(State):
    owner: str = ""
    balance: int = 0
    tags: tuple[str, ...] = ()


def test_replace_changes_the_named_fields_and_leaves_the_original_alone() -> None:
    before = Account(owner="ann", balance=5)
    after = before.replace(balance=7, tags=("vip",))
    assert after == Account(owner="ann", balance=7, tags=("vip",))
    assert before == Account(owner="ann", balance=5)
    assert type(after) is Account
    assert after.model_fields_set == {"owner", "balance", "tags"}


def test_replace_refuses_a_name_that_is_not_a_field() -> None:
    with pytest.raises(TypeError, match=r"Account\.replace: no field named balanse"):
        Account().replace(balanse=1)


def test_a_replaced_state_is_still_frozen_and_dumps_like_a_built_one() -> None:
    after = Account().replace(owner="bob")
    with pytest.raises(ValidationError):
        after.owner = "eve"
    assert after.model_dump() == Account(owner="bob").model_dump()
    assert Account.model_validate_json(after.model_dump_json()) == after


def test_private_attributes_belong_to_each_copy_as_with_model_copy() -> None:
    class Cached(State):
        n: int = 0
        _note: str = PrivateAttr(default="")

    first = Cached()
    first._note = "first"
    second = first.replace(n=1)
    assert second._note == "first"
    second._note = "second"
    assert (first._note, second._note) == ("first", "second")
    assert first.model_copy(update={"n": 1})._note == "first"
