"""The reference pages against the code: every public face has its API page, every public
name a docstring, and the hand-written pages name every store URL option, exception,
console page and stored table and column the code has."""

from __future__ import annotations

import dataclasses
import importlib
import re
import types
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from eventcraft.eventstore import EventStore, NewEvent, PostgresTarget, SQLiteTarget, scheme_of
from eventcraft.messaging import IncomingMessage, Mapped

from ..test_boundaries import PUBLIC_FACES
from .reference import DOCS, Documented, docs_hooks, documented

FACES = PUBLIC_FACES | {"eventcraft", "eventcraft.console"}
"""What a user imports: the packages, the faces the boundary test names, the application
(`eventcraft.App`) and the console's `create_app`."""


SHADOWED = {
    "eventcraft.domain.evolve": "eventcraft.domain.evolve.evolve",
    "eventcraft.eventstore.file_lock": "eventcraft.eventstore.file_lock.file_lock",
    "eventcraft.projections.spark.replay": "eventcraft.projections.spark.replay.replay",
}
"""Public names their package's page renders by a directive of their own, with an anchor
of the public name above it: each is a function named as the module it is defined in
(`from .evolve import evolve`), which griffe takes for the module (mkdocstrings/griffe#222,
which its maintainers will not fix). Renaming the module would end the need."""


def faces() -> list[Documented]:
    """The API pages' directives of the public faces."""
    return [d for d in documented() if d.module in FACES]


def test_every_public_face_has_one_api_page() -> None:
    modules = [d.module for d in documented() if d.module not in SHADOWED.values()]
    assert sorted(modules) == sorted(FACES)
    shadowed = [d for d in documented() if d.module in SHADOWED.values()]
    for name, directive in SHADOWED.items():
        (found,) = [d for d in shadowed if d.module == directive]
        assert f"[](){{#{name}}}" in found.page.read_text(encoding="utf-8")


def test_shadowed_lists_every_public_name_griffe_takes_for_a_module(loaded: object) -> None:
    import griffe

    assert isinstance(loaded, griffe.ModulesCollection)
    found = {}
    for face in faces():
        module = loaded.get_member(face.module)
        runtime = importlib.import_module(face.module)
        for name in face.public_names():
            member = module.members.get(name)
            is_module = isinstance(getattr(runtime, name), types.ModuleType)
            if isinstance(member, griffe.Module) and not is_module:
                found[f"{face.module}.{name}"] = f"{getattr(runtime, name).__module__}.{name}"
    assert found == SHADOWED


@pytest.mark.parametrize("face", sorted(FACES))
def test_a_page_renders_its_package_all_or_names_the_members_of_a_module_without_one(
    face: str,
) -> None:
    (page,) = [d for d in faces() if d.module == face]
    module = importlib.import_module(face)
    if hasattr(module, "__all__"):
        # `filters: public` renders exactly __all__; a list here would drift from it.
        assert page.members is None, f"{page.page}: {face} has __all__; drop members:"
    else:
        assert page.members, f"{page.page}: {face} has no __all__: name its members"
        absent = [name for name in page.members if not hasattr(module, name)]
        assert not absent, f"{page.page} names what {face} does not have: {absent}"


STILL_UNDOCUMENTED: frozenset[str] = frozenset()
"""Public names still without a docstring. It only shrinks: the test fails on a name
without one that is not listed, and on a listed name that has one now."""


@pytest.fixture(scope="module")
def loaded() -> Iterator[object]:
    """griffe's view of the faces, as the site's build has it (docstrings of attributes
    included, which Python itself does not keep)."""
    import griffe

    tree = docs_hooks().package_tree()
    loader = griffe.GriffeLoader(search_paths=[str(tree)])
    loader.load("eventcraft", try_relative_path=False)  # and every package beneath it
    loader.resolve_aliases(external=False, implicit=False)
    yield loader.modules_collection


def _undocumented(collection: object, module_name: str, names: list[str]) -> list[str]:
    """Those of `names` in the module that have no docstring, with where they are."""
    import griffe

    assert isinstance(collection, griffe.ModulesCollection)
    module = collection.get_member(module_name)
    missing = []
    for name in names:
        if name.startswith("__"):
            continue  # __version__: a dunder says what it is
        shadowed = SHADOWED.get(f"{module_name}.{name}")
        found = collection.get_member(shadowed) if shadowed else module[name]
        target = found.final_target if isinstance(found, griffe.Alias) else found
        if not (target.docstring and target.docstring.value.strip()):
            where = Path(str(target.filepath)).name if target.filepath else "?"
            missing.append(f"{name} ({where}:{target.lineno})")
    return missing


@pytest.mark.parametrize("face", sorted(FACES))
def test_every_public_name_has_a_docstring(face: str, loaded: object) -> None:
    (page,) = [d for d in faces() if d.module == face]
    undocumented = _undocumented(loaded, face, page.public_names())
    listed = {n.rpartition(".")[2] for n in STILL_UNDOCUMENTED if n.rpartition(".")[0] == face}
    new = [entry for entry in undocumented if entry.split(" ")[0] not in listed]
    assert not new, f"{face}: public names without a docstring: " + ", ".join(new)
    fixed = listed - {entry.split(" ")[0] for entry in undocumented}
    assert not fixed, f"STILL_UNDOCUMENTED lists {sorted(fixed)}, which have docstrings now"


def test_the_docstring_check_finds_a_name_without_one(tmp_path: Path, loaded: object) -> None:
    """The check above can fail: a module of a name with no docstring is caught."""
    import griffe

    (tmp_path / "lacking.py").write_text(
        '"""A module."""\n\n__all__ = ["DOCUMENTED", "bare"]\n\n'
        'DOCUMENTED = 1\n"""It says what it is."""\n\n\ndef bare() -> None:\n    pass\n'
    )
    module = griffe.load("lacking", search_paths=[str(tmp_path)])
    assert isinstance(loaded, griffe.ModulesCollection)
    loaded.set_member("lacking", module)
    assert _undocumented(loaded, "lacking", ["DOCUMENTED", "bare"]) == ["bare (lacking.py:9)"]


# --- the hand-written pages against the code ------------------------------------------


def _text(page: str) -> str:
    return (DOCS / "reference" / page).read_text(encoding="utf-8")


def _row(text: str, name: str) -> str | None:
    """The line of a Markdown table whose first cell is `name` in backticks."""
    found = re.search(rf"^\| `{re.escape(name)}` \|.*$", text, flags=re.M)
    return found[0] if found else None


def _shown(value: object) -> str:
    return f"{value:g}" if isinstance(value, float) else str(value)


@pytest.mark.parametrize(("target", "own"), [(SQLiteTarget, "path"), (PostgresTarget, "conninfo")])
def test_the_store_urls_page_gives_every_option_of_a_url_with_its_default(
    target: type, own: str
) -> None:
    text = _text("store-urls.md")
    for option in dataclasses.fields(target):
        if option.name == own:
            continue  # where the store is: the URL itself, not an option
        row = _row(text, option.name)
        assert row is not None, f"store-urls.md has no row for ?{option.name}="
        if option.default not in (None, dataclasses.MISSING):
            assert f"`{_shown(option.default)}`" in row, f"{option.name}'s default"


def test_every_url_the_store_urls_page_shows_is_one_the_store_reads() -> None:
    urls = re.findall(
        r"`((?:sqlite|postgres\w*|memory)[^`\s]*://[^`\s\[]*)`", _text("store-urls.md")
    )
    assert len(urls) >= 8
    for url in urls:
        scheme = scheme_of(url)
        if "?" in url and scheme == "sqlite":
            SQLiteTarget.from_url(url)
        elif "?" in url and scheme == "postgresql":
            PostgresTarget.from_url(url)


def test_the_console_pages_page_names_every_url_the_console_serves_and_no_other() -> None:
    from starlette.routing import BaseRoute, Mount, Route

    from eventcraft.console import create_app
    from eventcraft.console.messaging_pages import ACTIONS as MESSAGE_ACTIONS
    from eventcraft.console.saga_pages import ACTIONS as SAGA_ACTIONS

    app = create_app("memory://", metrics=True)
    routes: list[BaseRoute] = list(app.routes)
    text = _text("console-pages.md")
    shown = re.findall(r"^\| `(/[^`]*)` \|", text, flags=re.M)
    # A placeholder stands for any value; `/static/...` for any file.
    filled = {url: re.sub(r"\{\w+\}", "1", url) for url in shown}

    def serves(route: BaseRoute, url: str) -> bool:
        assert isinstance(route, Route | Mount)
        return route.path_regex.match(url) is not None

    unserved = [url for url, path in filled.items() if not any(serves(r, path) for r in routes)]
    assert not unserved, f"console-pages.md names URLs the console does not serve: {unserved}"
    for route in routes:
        assert any(serves(route, path) for path in filled.values()), (
            f"console-pages.md does not name {getattr(route, 'path', route)}"
        )
    for action in SAGA_ACTIONS:
        assert f"/saga/{action}" in shown
    for action in MESSAGE_ACTIONS:
        assert f"/messaging/failed/{action}" in shown


def _never_called(message: IncomingMessage) -> Mapped:
    raise AssertionError(f"the inbox took {message!r}: it was given none")


def _tables_a_store_makes(url: str, folder: Path) -> dict[str, set[str]]:
    """Every table (and its columns) a store at `url` and its read models come to hold:
    the store's own, its keys, a retention run's, the projections', an inbox's."""
    import sqlalchemy as sa
    from eventcraft.eventstore.retention import RetentionPolicy
    from eventcraft.messaging import Inbox

    # Made by a relay and by a partition group, which need a broker and partitions to
    # start: their tables as their modules declare them.
    from eventcraft.messaging.relay_state import metadata as relay_tables
    from eventcraft.projections import Database, ProjectionRunner
    from eventcraft.projections.competing import metadata as partition_tables

    from eventcraft.operations import retention

    with EventStore.open(url) as store:
        store.append("audit-1", [NewEvent("Seen", {}), NewEvent("Seen", {})])
        store.keys.sealing(["customer-1"])
        retention.apply(store, [RetentionPolicy("audit", max_count=1)], [], str(folder / "a"))
        with ProjectionRunner(store, []):
            pass
        Inbox("orders", store, _never_called).close()
        database = Database.of(None, store)
        try:
            with database.transaction() as connection:
                relay_tables.create_all(connection)
                partition_tables.create_all(connection)
            with database.reading() as connection, warnings.catch_warnings():
                # The key table's xid8 column: a type SQLAlchemy has no name for.
                warnings.filterwarnings("ignore", "Did not recognize type", sa.exc.SAWarning)
                inspector = sa.inspect(connection)
                return {
                    name: {column["name"] for column in inspector.get_columns(name)}
                    for name in inspector.get_table_names()
                }
        finally:
            database.close()


def test_the_schema_page_names_every_table_and_column_a_store_makes(
    shared_store_url: str, tmp_path: Path
) -> None:
    text = _text("schema.md")
    sections = re.split(r"^### ", text, flags=re.M)[1:]
    documented = {
        section.split("\n", 1)[0].strip(): set(re.findall(r"^\| `(\w+)` \|", section, re.M))
        for section in sections
    }
    made = _tables_a_store_makes(shared_store_url, tmp_path)
    assert set(made) - set(documented) == set(), "tables schema.md does not describe"
    for table, columns in made.items():
        assert columns - documented[table] == set(), f"{table}'s columns schema.md lacks"
