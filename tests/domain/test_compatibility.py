"""The compatibility check: today's registry against the committed catalog, as CI runs it."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated, Any, Literal

import pytest
from eventcraft.domain import (
    DomainEvent,
    EventCatalog,
    EventRegistry,
    SchemaProblem,
    assert_compatible,
    check_compatibility,
    compatibility_report,
)
from eventcraft.eventstore import Personal
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import Field, ValidationError


def registry_of(version: int = 1, name: str = "OrderPlaced", **fields: Any) -> EventRegistry:
    """A registry of one event type with `fields` (a type, or (type, default))."""
    annotations = {}
    defaults = {}
    for field, spec in fields.items():
        if isinstance(spec, tuple):
            annotations[field], defaults[field] = spec
        else:
            annotations[field] = spec
    cls = type(name, (DomainEvent,), {"__annotations__": annotations, **defaults})
    registry = EventRegistry()
    registry.register(cls, name, version=version)
    return registry


def problems(before: EventRegistry, now: EventRegistry, mode: Any = "backward") -> list[str]:
    return [
        f"{p.versions} {p.field}: {p.problem}"
        for p in check_compatibility(now, EventCatalog.of(before), mode=mode)
    ]


def test_the_same_registry_is_compatible_in_every_mode() -> None:
    registry = registry_of(order_id=str, cents=int)
    for mode in ("backward", "forward", "full"):
        assert check_compatibility(registry, EventCatalog.of(registry), mode=mode) == []


def test_a_field_removed_at_the_same_version_breaks_stored_events() -> None:
    found = problems(registry_of(order_id=str, note=str), registry_of(order_id=str))
    assert found == ["v1 note: the field was removed"]


def test_a_required_field_added_breaks_them_and_one_with_a_default_does_not() -> None:
    before = registry_of(order_id=str)
    found = problems(before, registry_of(order_id=str, currency=str))
    assert found == ["v1 currency: a required field was added, with no default"]
    assert problems(before, registry_of(order_id=str, currency=(str, "EUR"))) == []


@pytest.mark.parametrize(
    ("old", "new", "says"),
    [
        (float, int, "number became integer"),
        (str | None, str, "null is no longer taken"),
        (Literal["a", "b"], Literal["a"], "the values ['b'] are no longer taken"),
        (str, Annotated[str, Field(max_length=5)], "maxLength 5 was set"),
        (int, str, "integer became string"),
        (list[int], list[str], "integer became string"),
    ],
)
def test_a_narrowed_type_is_named_with_what_it_was_and_is(old: Any, new: Any, says: str) -> None:
    (found,) = problems(registry_of(value=old), registry_of(value=new))
    assert says in found


def test_widening_a_type_is_backward_compatible_but_not_forward() -> None:
    before, now = registry_of(value=int), registry_of(value=float)
    assert problems(before, now) == []
    (found,) = problems(before, now, mode="forward")
    assert "code at the catalog would refuse today's events" in found


def test_a_version_bumped_without_an_upcaster_is_named_with_a_skeleton_to_write() -> None:
    before = registry_of(order_id=str, note=str)
    now = registry_of(2, order_id=str, currency=str)
    (problem,) = check_compatibility(now, EventCatalog.of(before))
    assert problem.versions == "v1 -> v2"
    assert "bumped without an upcaster from v1" in problem.problem
    assert problem.skeleton == (
        '@registry.upcaster("OrderPlaced", from_version=1)\n'
        "def order_placed_v1_to_v2(data: dict) -> dict:\n"
        '    data.pop("note", None)  # removed in v2\n'
        '    data["currency"] = ...  # new in v2, required: what do older events hold?\n'
        "    return data\n"
    )
    namespace: dict[str, Any] = {"registry": now}
    exec(problem.skeleton.replace("...", '"EUR"'), namespace)  # the skeleton is Python
    assert check_compatibility(now, EventCatalog.of(before)) == []


def test_an_upcaster_whose_output_does_not_fit_todays_class_is_caught() -> None:
    before = registry_of(order_id=str, note=str)
    now = registry_of(2, order_id=str, currency=str)
    now.upcaster("OrderPlaced", from_version=1)(lambda data: {"order_id": data["order_id"]})
    (found,) = problems(before, now)
    assert "does not fit v2 at 'currency': Field required" in found


def test_an_upcaster_that_raises_on_old_data_is_caught() -> None:
    before = registry_of(order_id=str, note=(str | None, None))
    now = registry_of(2, order_id=str)

    @now.upcaster("OrderPlaced", from_version=1)
    def drop_note(data: dict[str, Any]) -> dict[str, Any]:
        del data["note"]  # fails on events stored without a note
        return data

    (found,) = problems(before, now)
    assert "fails in the upcaster from v1: KeyError('note')" in found


def test_a_gap_in_the_chain_is_named() -> None:
    v1 = registry_of(a=str)
    v2 = registry_of(2, a=str, b=(str, ""))
    v2.upcaster("OrderPlaced", from_version=1)(lambda data: data)
    committed = EventCatalog.of(v2, previous=EventCatalog.of(v1))
    now = registry_of(3, a=str, b=(str, ""), c=(str, ""))
    now.upcaster("OrderPlaced", from_version=2)(lambda data: data)  # the step from 1 is gone
    (problem,) = check_compatibility(now, committed)
    assert problem.versions == "v1 -> v2"
    assert "the upcaster chain has a gap: no step from v1" in problem.problem


def test_a_version_that_goes_back_is_refused() -> None:
    (found,) = problems(registry_of(3, a=str), registry_of(2, a=str))
    assert "the version went back" in found


def test_a_type_dropped_and_a_retired_name_reused_are_named() -> None:
    before = registry_of(name="CouponAdded", code=str)
    dropped = registry_of(name="OrderPlaced", order_id=str)
    (found,) = problems(before, dropped)
    assert "no longer registered" in found
    retired = EventCatalog.of(dropped, previous=EventCatalog.of(before))
    reused = registry_of(name="CouponAdded", discount=int)
    reused.register(
        type("OrderPlaced", (DomainEvent,), {"__annotations__": {"order_id": str}}),
        "OrderPlaced",
    )
    lines = [str(p) for p in check_compatibility(reused, retired)]
    assert lines == [
        "CouponAdded v1: the name was retired: events stored under it by the old type would "
        "be read as the new class; fix: register the new class under a name never used before"
    ]


def test_a_personal_field_made_plain_is_named() -> None:
    before = registry_of(customer_id=str, email=Annotated[str, Personal(subject="customer_id")])
    (found,) = problems(before, registry_of(customer_id=str, email=str))
    assert "a personal field was made plain" in found


def test_a_version_bump_is_not_forward_compatible() -> None:
    before = registry_of(a=str)
    now = registry_of(2, a=str)
    now.upcaster("OrderPlaced", from_version=1)(lambda data: data)
    assert problems(before, now) == []
    assert problems(before, now, mode="forward") == [
        "v1 -> v2 None: code at the catalog cannot read v2 events (it knows v1)"
    ]


def test_the_pytest_helper_fails_with_each_problem_and_the_upcaster_to_write(
    tmp_path: Path,
) -> None:
    path = tmp_path / "events.schema.json"
    EventCatalog.of(registry_of(order_id=str, note=str)).write(path)
    assert_compatible(registry_of(order_id=str, note=str), path)
    with pytest.raises(AssertionError) as raised:
        assert_compatible(registry_of(2, order_id=str), path)
    text = str(raised.value)
    assert text.startswith(f"1 incompatible change(s) against {path}:\n  OrderPlaced v1 -> v2")
    assert '@registry.upcaster("OrderPlaced", from_version=1)' in text


def test_the_report_prints_a_skeleton_once_for_the_problems_that_share_it() -> None:
    found = check_compatibility(
        registry_of(order_id=int), EventCatalog.of(registry_of(order_id=str, note=str))
    )
    assert len(found) == 2
    assert compatibility_report(found, against="x").count("@registry.upcaster") == 1


def test_an_unknown_mode_is_refused() -> None:
    registry = registry_of(a=str)
    with pytest.raises(ValueError, match="backward, forward, full"):
        check_compatibility(registry, EventCatalog.of(registry), mode="sideways")  # type: ignore[arg-type]


# --- a model: "no problem" means stored events read -----------------------------------

FIELD_TYPES: dict[str, tuple[Any, st.SearchStrategy[Any]]] = {
    "int": (int, st.integers(-(2**40), 2**40)),
    "float": (float, st.floats(allow_nan=False, allow_infinity=False)),
    "str": (str, st.text(max_size=5)),
    "short str": (Annotated[str, Field(max_length=3)], st.text(max_size=3)),
    "bool": (bool, st.booleans()),
    "int|None": (int | None, st.none() | st.integers(-5, 5)),
    "str|None": (str | None, st.none() | st.text(max_size=3)),
    "list[int]": (list[int], st.lists(st.integers(-5, 5), max_size=3)),
    "list[str]": (list[str], st.lists(st.text(max_size=2), max_size=3)),
    "a|b": (Literal["a", "b"], st.sampled_from(["a", "b"])),
    "a": (Literal["a"], st.just("a")),
}
NAMES = ("p", "q", "r")

shapes = st.dictionaries(
    st.sampled_from(NAMES),
    st.tuples(st.sampled_from(sorted(FIELD_TYPES)), st.booleans()),  # (type, has a default)
    max_size=3,
)


def _registry(shape: dict[str, tuple[str, bool]]) -> EventRegistry:
    fields: dict[str, Any] = {}
    for name, (kind, defaulted) in shape.items():
        annotation = FIELD_TYPES[kind][0]
        fields[name] = (annotation | None, None) if defaulted else annotation
    return registry_of(**fields)


@st.composite
def stored_under(draw: st.DrawFn, shape: dict[str, tuple[str, bool]]) -> dict[str, Any]:
    """The data of an event stored under `shape` (what its class would have written)."""
    data: dict[str, Any] = {}
    for name, (kind, defaulted) in shape.items():
        if defaulted and draw(st.booleans()):
            continue  # written before the field was set, or left to its default
        value = FIELD_TYPES[kind][1]
        data[name] = draw(st.none() | value) if defaulted else draw(value)
    return data


@settings(max_examples=300, deadline=None)
@given(old=shapes, new=shapes, data=st.data())
@pytest.mark.slow
def test_when_the_check_finds_no_problem_every_stored_event_reads(
    old: dict[str, tuple[str, bool]], new: dict[str, tuple[str, bool]], data: st.DataObject
) -> None:
    before, now = _registry(old), _registry(new)
    found: list[SchemaProblem] = check_compatibility(now, EventCatalog.of(before))
    if found:
        return
    stored = data.draw(stored_under(old))
    cls = now.types["OrderPlaced"].cls
    try:
        cls.model_validate(stored)
    except ValidationError as error:
        raise AssertionError(
            f"the check passed {old} -> {new}, yet {stored} fails: {error}"
        ) from None
