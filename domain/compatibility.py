"""`check_compatibility`: today's registry against the committed catalog, before deploying.

Stored events are read by whatever code runs next, so a change to an event class is
checked against the catalog committed beside the code (`catalog.py`):

- *backward* (the default): today's code must read every event stored under the
  catalog: no field removed or type narrowed at the same version, no required field
  added without a default, each version bump with its upcaster, no gap in a chain,
  the upcasters' output fitting today's class (run on data made from the old schema),
  no retired type name reused, no registered type dropped;
- *forward*: code at the catalog must read what today's code writes (a rolling
  deployment, where old readers still run): no field added, no type widened, no
  version bumped;
- *full*: both.

Each problem says which event, versions and field, and the fix; where the fix is an
upcaster, a skeleton of it to paste.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, get_args

from pydantic import ValidationError

from .catalog import CatalogedType, EventCatalog
from .json_schema import Narrowing, narrowings, sample
from .registry import EventRegistry

CompatibilityMode = Literal["backward", "forward", "full"]
"""Who must read whose events: today's code the stored ones (`backward`), the
committed code today's (`forward`), or both (`full`).

Example::

    from eventcraft.domain import DomainEvent, EventCatalog, EventRegistry, check_compatibility

    def registry_with(field_type: type) -> EventRegistry:
        registry = EventRegistry()
        registry.register(
            type("Paid", (DomainEvent,), {"__annotations__": {"amount": field_type}}), "Paid"
        )
        return registry

    committed = EventCatalog.of(registry_with(int))
    widened = registry_with(float)  # reads every stored int; old code refuses 1.5
    assert check_compatibility(widened, committed, mode="backward") == []
    assert len(check_compatibility(widened, committed, mode="forward")) == 1
"""

MODES: tuple[CompatibilityMode, ...] = get_args(CompatibilityMode)


@dataclass(frozen=True, slots=True)
class SchemaProblem:
    """One change that would break reading events, and what to do about it.

    Example::

        from eventcraft.domain import DomainEvent, EventCatalog, EventRegistry, check_compatibility

        before = EventRegistry()
        before.register(
            type("Paid", (DomainEvent,), {"__annotations__": {"cents": int}}), "Paid"
        )
        now = EventRegistry()
        now.register(
            type("Paid", (DomainEvent,), {"__annotations__": {"cents": str}}), "Paid"
        )
        (problem,) = check_compatibility(now, EventCatalog.of(before))
        assert str(problem) == (
            "Paid v1 field 'cents': integer became string; "
            "fix: bump the version to 2 and upcast v1 events"
        )
    """

    event_type: str
    versions: str
    """`v2`, or `v1 -> v2` for a change across versions."""
    field: str | None
    """The field, dotted from the event's top (`lines[].qty`), when it is about one."""
    problem: str
    fix: str
    skeleton: str | None = None
    """An upcaster to start from, when the fix is one."""

    def __str__(self) -> str:
        where = f" field {self.field!r}" if self.field else ""
        return f"{self.event_type} {self.versions}{where}: {self.problem}; fix: {self.fix}"


def check_compatibility(
    registry: EventRegistry,
    committed: EventCatalog,
    *,
    mode: CompatibilityMode = "backward",
) -> list[SchemaProblem]:
    """What in `registry` breaks reading events under the `committed` catalog, in `mode`.

    An empty list: the change is safe to deploy; export the catalog again and commit
    it with the change (`EventCatalog.of(registry, previous=committed)`).

    Example::

        from eventcraft.domain import (
            DomainEvent, EventCatalog, EventRegistry, check_compatibility,
        )

        before = EventRegistry()

        @before.event("OrderPlaced")
        class OrderPlaced(DomainEvent):
            order_id: str
            note: str

        committed = EventCatalog.of(before)

        now = EventRegistry()

        @now.event("OrderPlaced")
        class OrderPlacedToday(DomainEvent):
            order_id: str

        (problem,) = check_compatibility(now, committed)
        assert (problem.field, problem.problem) == ("note", "the field was removed")
        assert "from_version=1" in problem.skeleton
    """
    if mode not in MODES:
        raise ValueError(f"mode must be one of {', '.join(MODES)}, not {mode!r}")
    today = EventCatalog.of(registry, previous=committed, aggregates=())
    backward = mode in ("backward", "full")
    forward = mode in ("forward", "full")
    problems: list[SchemaProblem] = []
    for name, before in sorted(committed.types.items()):
        now = today.types.get(name)
        if now is None:
            if backward:
                problems.append(
                    SchemaProblem(
                        name,
                        f"v{before.version}",
                        None,
                        "the type is no longer registered: its stored events cannot be read",
                        "keep its class registered; once `eventcraft schema verify` counts "
                        "none of its events stored, export the catalog again to retire it",
                    )
                )
            continue
        problems.extend(_changes(registry, before, now, backward=backward, forward=forward))
    for name, now in sorted(today.types.items()):
        if backward and name in committed.retired:
            problems.append(
                SchemaProblem(
                    name,
                    f"v{now.version}",
                    None,
                    "the name was retired: events stored under it by the old type would be "
                    "read as the new class",
                    "register the new class under a name never used before",
                )
            )
    return problems


def assert_compatible(
    registry: EventRegistry, catalog: str | Path, *, mode: CompatibilityMode = "backward"
) -> None:
    """Fails (`AssertionError`, each problem a line, with the upcasters to write) when
    `registry` is not compatible with the catalog committed at `catalog`: the pytest
    helper a project's own tests call.

    Example::

        from eventcraft.domain import DomainEvent, EventCatalog, EventRegistry, assert_compatible

        registry = EventRegistry()

        @registry.event("OrderPlaced")
        class OrderPlaced(DomainEvent):
            order_id: str

        EventCatalog.of(registry).write("events.schema.json")  # committed with the code
        assert_compatible(registry, "events.schema.json")  # in a test: passes
    """
    problems = check_compatibility(registry, EventCatalog.read(catalog), mode=mode)
    if problems:
        raise AssertionError(compatibility_report(problems, against=str(catalog)))


def compatibility_report(problems: list[SchemaProblem], *, against: str) -> str:
    """The problems as `eventcraft schema check` prints them: a line each, then the
    upcaster skeletons.

    Example::

        from eventcraft.domain import (
            DomainEvent, EventCatalog, EventRegistry, check_compatibility, compatibility_report,
        )

        before = EventRegistry()
        before.register(
            type("Paid", (DomainEvent,), {"__annotations__": {"cents": int}}), "Paid"
        )
        now = EventRegistry()
        now.register(
            type("Paid", (DomainEvent,), {"__annotations__": {"cents": int}}), "Paid", version=2
        )
        text = compatibility_report(
            check_compatibility(now, EventCatalog.of(before)), against="events.schema.json"
        )
        assert text.splitlines()[0] == "1 incompatible change(s) against events.schema.json:"
        assert '@registry.upcaster("Paid", from_version=1)' in text
    """
    lines = [f"{len(problems)} incompatible change(s) against {against}:"]
    lines.extend(f"  {problem}" for problem in problems)
    skeletons = [p.skeleton for p in problems if p.skeleton]
    for skeleton in dict.fromkeys(skeletons):  # once each, in order
        lines.extend(["", skeleton.rstrip("\n")])
    return "\n".join(lines)


def _changes(
    registry: EventRegistry,
    before: CatalogedType,
    now: CatalogedType,
    *,
    backward: bool,
    forward: bool,
) -> list[SchemaProblem]:
    name = now.name
    found: list[SchemaProblem] = []
    if now.version < before.version:
        return [
            SchemaProblem(
                name,
                f"v{before.version} -> v{now.version}",
                None,
                f"the version went back: events stored at v{before.version} are newer "
                "than the code",
                f"register it at version {before.version} or later",
            )
        ]
    if now.version == before.version:
        if backward:
            changes = narrowings(before.schema, now.schema)
            skeleton = _skeleton(name, now.version, changes) if changes else None
            for change in changes:
                found.append(_same_version(name, now.version, change, skeleton))
        if forward:
            for change in narrowings(now.schema, before.schema):
                found.append(
                    SchemaProblem(
                        name,
                        f"v{now.version}",
                        change.path or None,
                        f"code at the catalog would refuse today's events: "
                        f"{_forward_words(change)}",
                        "deploy in two steps: first readers that take the new shape, "
                        "then the writers",
                    )
                )
    else:
        if backward:
            found.extend(_bumped(registry, before, now))
        if forward:
            found.append(
                SchemaProblem(
                    name,
                    f"v{before.version} -> v{now.version}",
                    None,
                    f"code at the catalog cannot read v{now.version} events (it knows "
                    f"v{before.version})",
                    f"deploy the code that reads v{now.version} everywhere before any writes it",
                )
            )
    if backward or forward:
        for field_name in sorted(set(before.personal) - set(now.personal)):
            found.append(
                SchemaProblem(
                    name,
                    f"v{now.version}",
                    field_name,
                    "a personal field was made plain: new events would keep it unsealed, "
                    "and forgetting its subject would no longer erase it",
                    f"keep the field marked Personal(subject={before.personal[field_name]!r})",
                )
            )
    return found


def _same_version(
    name: str, version: int, change: Narrowing, skeleton: str | None
) -> SchemaProblem:
    if change.field_added:
        fix = (
            "give the field a default, or bump the version to "
            f"{version + 1} with an upcaster that sets it"
        )
    else:
        fix = f"bump the version to {version + 1} and upcast v{version} events"
    return SchemaProblem(
        name,
        f"v{version}",
        change.path or None,
        change.what,
        fix,
        skeleton,
    )


def _bumped(
    registry: EventRegistry, before: CatalogedType, now: CatalogedType
) -> list[SchemaProblem]:
    name = now.name
    found: list[SchemaProblem] = []
    known = sorted(v for v in now.schemas if v < now.version)
    oldest = min([*known, *now.upcasters, before.version])
    missing = [v for v in range(oldest, now.version) if v not in now.upcasters]
    for version in missing:
        target = now.schemas.get(version + 1)
        source = now.schemas.get(version)
        changes = narrowings(source, target) if source and target else []
        if version >= before.version:
            problem = f"the version was bumped without an upcaster from v{version}"
        else:
            problem = (
                f"the upcaster chain has a gap: no step from v{version}, so events stored "
                f"at v{oldest} to v{version} cannot be read"
            )
        found.append(
            SchemaProblem(
                name,
                f"v{version} -> v{version + 1}",
                None,
                problem,
                f"write the upcaster from v{version}",
                _skeleton(name, version, changes),
            )
        )
    if missing:
        return found
    steps = registry.upcasters_of(name)
    target_class = registry.types[name].cls
    for version in known:
        for full in (False, True):
            data = sample(now.schemas[version], full=full)
            if data is None:
                continue
            failure = _run_chain(steps, data, version, now.version, target_class)
            if failure is None:
                continue
            step, why = failure
            found.append(
                SchemaProblem(
                    name,
                    f"v{version} -> v{now.version}",
                    None,
                    f"a v{version} event ({'every field' if full else 'required fields'}) "
                    f"upcast by the chain {why}",
                    f"make the upcaster from v{step} give what v{step + 1} takes",
                )
            )
            break
    return found


def _run_chain(
    steps: Any, data: dict[str, Any], start: int, end: int, target: Any
) -> tuple[int, str] | None:
    """None when `data` at `start`, upcast to `end`, fits `target`; else the step that
    failed and why."""
    for version in range(start, end):
        step: Callable[[dict[str, Any]], Any] = steps[version]
        try:
            data = step(dict(data))
        except Exception as error:  # the user's upcaster: any error is the finding
            return version, f"fails in the upcaster from v{version}: {error!r}"
        if not isinstance(data, dict):
            return version, f"gets {type(data).__name__}, not a dict, from v{version}"
    try:
        target.model_validate(data)
    except ValidationError as error:
        first = error.errors()[0]
        where = ".".join(str(part) for part in first["loc"]) or "the event"
        return end - 1, f"does not fit v{end} at {where!r}: {first['msg']}"
    return None


def _forward_words(change: Narrowing) -> str:
    if change.field_removed:
        return "a field was added"
    if change.field_added:
        return "a required field was removed"
    return change.what


def _function_name(name: str, version: int) -> str:
    snake = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    snake = re.sub(r"\W+", "_", snake).strip("_").lower() or "event"
    if snake[0].isdigit():
        snake = f"event_{snake}"
    return f"{snake}_v{version}_to_v{version + 1}"


def _skeleton(name: str, version: int, changes: list[Narrowing]) -> str:
    body: list[str] = []
    for change in changes:
        key = change.path.split(".")[0].split("[")[0]
        if not key or key == "*":
            continue
        if change.field_removed and "." not in change.path and "[" not in change.path:
            body.append(f'    data.pop("{key}", None)  # removed in v{version + 1}')
        elif change.field_added and "." not in change.path:
            body.append(
                f'    data["{key}"] = ...  # new in v{version + 1}, required: '
                "what do older events hold?"
            )
        else:
            body.append(f'    data["{key}"] = ...  # {change.path}: {change.what}')
    if not body:
        body.append(f"    ...  # bring the data from v{version} to v{version + 1}")
    return "\n".join(
        [
            f'@registry.upcaster("{name}", from_version={version})',
            f"def {_function_name(name, version)}(data: dict) -> dict:",
            *body,
            "    return data",
            "",
        ]
    )
