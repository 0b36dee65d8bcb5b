"""What two JSON Schemas of one event say about each other, and data made to fit one.

The schemas are those pydantic gives an event class (`model_json_schema()`): objects
with `properties`, `required` and `additionalProperties`, `$ref`s into `$defs`, `anyOf`
for unions and optionals, `enum`/`const`, and the usual bounds. `narrowings(wide,
narrow)` lists where data valid under `wide` may be refused by `narrow` (a field
removed, a type narrowed, a bound tightened, a field made required): stored events
written under `wide` and read by code holding `narrow` fail there. It is a judgement
on the schemas' shapes, sound for what pydantic writes; a construct it cannot compare
(a changed `pattern`) is reported rather than passed.

`sample(schema, full=...)` makes an instance of a schema, the smallest (required
fields only) or the fullest (every field): the compatibility check runs the upcasters
on them. It gives None where it cannot make data sure to fit (a `pattern`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

Schema = Mapping[str, Any]
"""A JSON Schema, as a parsed JSON object."""

_NUMERIC = {"integer", "number"}
_SAMPLE_ORDER = ("object", "array", "string", "integer", "number", "boolean", "null")
"""Which of a schema's types its sample takes, when it names several."""
_SAMPLE_FORMATS: dict[str, str] = {
    "date-time": "2026-01-01T00:00:00Z",
    "date": "2026-01-01",
    "time": "00:00:00",
    "uuid": "00000000-0000-4000-8000-000000000000",
    "email": "someone@example.com",
    "uri": "https://example.com/",
    "duration": "PT1S",
    "ipv4": "127.0.0.1",
    "ipv6": "::1",
}


@dataclass(frozen=True, slots=True)
class Narrowing:
    """One place where data valid under the wider schema may be refused by the other."""

    path: str
    """The field, dotted from the event's top (`lines[].qty`); "" for the event itself."""
    what: str
    """What changed, in words (`integer became string`)."""
    field_removed: bool = False
    field_added: bool = False


class _Resolver:
    def __init__(self, root: Schema) -> None:
        self.defs: Mapping[str, Any] = root.get("$defs", {})

    def __call__(self, schema: Schema) -> Schema:
        seen = 0
        while "$ref" in schema and seen < 32:
            ref = str(schema["$ref"])
            name = ref.rsplit("/", 1)[-1]
            if not ref.startswith("#/$defs/") or name not in self.defs:
                break
            # pydantic puts a field's own keys (title, default) beside the $ref.
            schema = {**self.defs[name], **{k: v for k, v in schema.items() if k != "$ref"}}
            seen += 1
        return schema


def _alternatives(schema: Schema, resolve: _Resolver) -> list[Schema]:
    """The schema as a list of alternatives: its anyOf/oneOf members, or itself."""
    schema = resolve(schema)
    members = schema.get("anyOf") or schema.get("oneOf")
    if not members:
        return [schema]
    found: list[Schema] = []
    for member in members:
        found.extend(_alternatives(member, resolve))
    return found


def _types(schema: Schema) -> set[str]:
    """The JSON types a (resolved, single) schema takes; empty for "anything"."""
    declared = schema.get("type")
    if isinstance(declared, list):
        types = set(declared)
    elif isinstance(declared, str):
        types = {declared}
    elif "enum" in schema or "const" in schema:
        values = schema.get("enum", [schema.get("const")])
        types = {_json_type(value) for value in values}
    elif "properties" in schema:
        types = {"object"}
    else:
        types = set()
    return types


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    if isinstance(value, list):
        return "array"
    return "object"


def _fits_type(kind: str, accepted: set[str]) -> bool:
    return not accepted or kind in accepted or (kind == "integer" and "number" in accepted)


def _describe(schema: Schema) -> str:
    if "enum" in schema:
        return "one of " + ", ".join(repr(v) for v in schema["enum"])
    if "const" in schema:
        return repr(schema["const"])
    types = sorted(_types(schema))
    shown = "|".join(types) if types else "anything"
    return f"{shown} ({schema['format']})" if "format" in schema else shown


def narrowings(wide: Schema, narrow: Schema) -> list[Narrowing]:
    """Where data valid under `wide` may be refused by `narrow`, field by field."""
    found: list[Narrowing] = []
    _compare(wide, narrow, "", _Resolver(wide), _Resolver(narrow), found, depth=0)
    return found


def _compare(
    wide: Schema,
    narrow: Schema,
    path: str,
    wide_resolve: _Resolver,
    narrow_resolve: _Resolver,
    found: list[Narrowing],
    depth: int,
) -> None:
    if depth > 24:  # a recursive model compared with itself: deep enough
        return
    wide_options = _alternatives(wide, wide_resolve)
    narrow_options = _alternatives(narrow, narrow_resolve)
    if len(wide_options) > 1 or len(narrow_options) > 1:
        for option in wide_options:
            partners = [n for n in narrow_options if _could_hold(option, n)]
            if not partners:
                found.append(
                    Narrowing(
                        path,
                        f"{_describe(option)} is no longer taken "
                        f"(now {' or '.join(_describe(n) for n in narrow_options)})",
                    )
                )
            elif len(partners) == 1:
                _compare(option, partners[0], path, wide_resolve, narrow_resolve, found, depth + 1)
        return
    w, n = wide_options[0], narrow_options[0]
    if not _could_hold(w, n):
        found.append(Narrowing(path, f"{_describe(w)} became {_describe(n)}"))
        return
    _compare_values(w, n, path, found)
    if "object" in _types(w) and "object" in _types(n):
        _compare_objects(w, n, path, wide_resolve, narrow_resolve, found, depth)
    if "array" in _types(w) and "array" in _types(n) and "items" in w and "items" in n:
        _compare(
            w["items"], n["items"], f"{path}[]", wide_resolve, narrow_resolve, found, depth + 1
        )


def _could_hold(wide: Schema, narrow: Schema) -> bool:
    """Whether `narrow`'s type takes every type `wide` names (bounds aside)."""
    accepted = _types(narrow)
    if not accepted:
        return True
    offered = _types(wide)
    if not offered:
        return False  # anything became something
    return all(_fits_type(kind, accepted) for kind in offered)


def _compare_values(wide: Schema, narrow: Schema, path: str, found: list[Narrowing]) -> None:
    if "enum" in narrow or "const" in narrow:
        allowed = narrow.get("enum", [narrow.get("const")])
        if "enum" in wide or "const" in wide:
            lost = [v for v in wide.get("enum", [wide.get("const")]) if v not in allowed]
            if lost:
                found.append(Narrowing(path, f"the values {lost} are no longer taken"))
        else:
            found.append(Narrowing(path, f"{_describe(wide)} became {_describe(narrow)}"))
    if narrow.get("format") and narrow.get("format") != wide.get("format"):
        found.append(Narrowing(path, f"{_describe(wide)} became {_describe(narrow)}"))
    for key, tighter in (
        ("maxLength", min),
        ("maxItems", min),
        ("maxProperties", min),
        ("maximum", min),
        ("exclusiveMaximum", min),
        ("minLength", max),
        ("minItems", max),
        ("minProperties", max),
        ("minimum", max),
        ("exclusiveMinimum", max),
    ):
        if key not in narrow:
            continue
        if key not in wide or tighter(wide[key], narrow[key]) == narrow[key] != wide[key]:
            was = f" (was {wide[key]})" if key in wide else ""
            found.append(Narrowing(path, f"{key} {narrow[key]} was set{was}"))
    if "pattern" in narrow and narrow.get("pattern") != wide.get("pattern"):
        found.append(Narrowing(path, f"the pattern {narrow['pattern']!r} was set"))


def _compare_objects(
    wide: Schema,
    narrow: Schema,
    path: str,
    wide_resolve: _Resolver,
    narrow_resolve: _Resolver,
    found: list[Narrowing],
    depth: int,
) -> None:
    wide_fields: Mapping[str, Any] = wide.get("properties", {})
    narrow_fields: Mapping[str, Any] = narrow.get("properties", {})
    wide_required = set(wide.get("required", []))
    narrow_required = set(narrow.get("required", []))
    closed = narrow.get("additionalProperties") is False
    prefix = f"{path}." if path else ""
    for name in wide_fields:
        if name not in narrow_fields and closed:
            found.append(Narrowing(prefix + name, "the field was removed", field_removed=True))
    for name, schema in narrow_fields.items():
        if name not in wide_fields:
            if name in narrow_required:
                found.append(
                    Narrowing(
                        prefix + name,
                        "a required field was added, with no default",
                        field_added=True,
                    )
                )
            continue
        if name in narrow_required and name not in wide_required:
            found.append(Narrowing(prefix + name, "the field became required"))
        _compare(
            wide_fields[name], schema, prefix + name, wide_resolve, narrow_resolve, found, depth + 1
        )
    extra_wide = wide.get("additionalProperties")
    extra_narrow = narrow.get("additionalProperties")
    if isinstance(extra_wide, Mapping) and isinstance(extra_narrow, Mapping):
        _compare(
            extra_wide, extra_narrow, f"{prefix}*", wide_resolve, narrow_resolve, found, depth + 1
        )
    elif isinstance(extra_wide, Mapping) and extra_narrow is False:
        found.append(Narrowing(f"{prefix}*", "the object's free keys are no longer taken"))


def sample(schema: Schema, *, full: bool) -> Any:
    """An instance of `schema`: required fields only, or every field (`full`); None
    where no instance can be made sure to fit (a `pattern`, a bound it cannot meet)."""
    try:
        return _sample(schema, _Resolver(schema), full, depth=0)
    except _CannotSample:
        return None


class _CannotSample(Exception):
    pass


def _sample(schema: Schema, resolve: _Resolver, full: bool, depth: int) -> Any:
    if depth > 12:
        raise _CannotSample
    options = _alternatives(schema, resolve)
    if len(options) > 1:
        usable = [o for o in options if _types(o) != {"null"}] or options
        return _sample(usable[0] if full else options[-1], resolve, full, depth + 1)
    schema = options[0]
    if "const" in schema:
        return schema["const"]
    if "enum" in schema:
        return schema["enum"][0]
    if "pattern" in schema:
        raise _CannotSample
    types = _types(schema) or {"string"}
    kind = next(
        t
        for t in ("object", "array", "string", "integer", "number", "boolean", "null")
        if t in types
    )
    if kind == "object":
        fields: Mapping[str, Any] = schema.get("properties", {})
        required = set(schema.get("required", []))
        return {
            name: _sample(field, resolve, full, depth + 1)
            for name, field in fields.items()
            if full or name in required
        }
    if kind == "array":
        count = max(int(schema.get("minItems", 0)), 1 if full else 0)
        items = schema.get("items", {})
        return [_sample(items, resolve, full, depth + 1) for _ in range(count)]
    if kind == "string":
        if "format" in schema:
            if schema["format"] not in _SAMPLE_FORMATS:
                raise _CannotSample
            return _SAMPLE_FORMATS[schema["format"]]
        length = max(int(schema.get("minLength", 0)), 1)
        if length > int(schema.get("maxLength", length)):
            raise _CannotSample
        return "x" * length
    if kind in _NUMERIC:
        low = schema.get("minimum", schema.get("exclusiveMinimum", 0))
        value: int | float = int(low) + (1 if "exclusiveMinimum" in schema else 0)
        if value < low:
            value = int(low) + 1
        high = schema.get("maximum", schema.get("exclusiveMaximum"))
        if high is not None and (value > high or ("exclusiveMaximum" in schema and value >= high)):
            raise _CannotSample
        return value if kind == "integer" or isinstance(value, int) else float(value)
    if kind == "boolean":
        return False
    return None
