"""What the documentation build does beyond mkdocs' own (mkdocs.yml `hooks:`).

- **The packages as installed.** mkdocstrings reads the sources with griffe, which cannot
  follow setuptools' package-dir mapping (`eventcraft.eventstore` is the folder
  `./eventstore`). The build lays out a tree of links as the wheel installs the packages,
  from pyproject's `[tool.setuptools.package-dir]`, and puts it first on mkdocstrings'
  search path (as `scripts/wheel-tree.sh` does for mypy).
- **Sections by folder.** A nav entry that is a folder (`tutorial/`) becomes that
  folder's pages: its `index.md` first, then the pages in the order `index.md` links
  them, then any other page by name. A section whose folder holds no page yet is left
  out, so a writer adds a page without editing mkdocs.yml.
- **The exceptions' tables.** On a page, `<!-- exceptions: eventcraft.eventstore -->`
  becomes a table of the exceptions that package exports (`__all__`): each one's bases
  and when it is raised (the first paragraph of its docstring), in the order of their
  tree. Read from the sources with griffe, as the API pages are, so nothing is imported.
"""

from __future__ import annotations

import atexit
import re
import shutil
import tempfile
import tomllib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import griffe
from mkdocs.config.defaults import MkDocsConfig
from mkdocs.plugins import event_priority
from mkdocs.structure.files import Files
from mkdocs.structure.pages import Page

ROOT = Path(__file__).resolve().parent.parent
EXCEPTIONS = re.compile(r"^<!-- exceptions: ([\w.]+) -->$", re.M)
LINK = re.compile(r"\]\(([^)#\s]+\.md)(?:#[^)]*)?\)")

_trees: list[Path] = []


def package_tree() -> Path:
    """A new folder holding `eventcraft/` laid out as the wheel installs it, in links."""
    tree = Path(tempfile.mkdtemp(prefix="eventcraft-docs-"))
    _trees.append(tree)
    setuptools = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    mapped: dict[str, str] = setuptools.get("package-dir", {})
    for package in sorted(setuptools["packages"], key=lambda name: name.count(".")):
        place = tree.joinpath(*package.split("."))
        if place.exists():
            continue  # inside a package already linked whole
        source = ROOT / mapped.get(package, package.replace(".", "/"))
        if package in mapped:
            place.parent.mkdir(parents=True, exist_ok=True)
            place.symlink_to(source, target_is_directory=True)
        else:
            # A real folder, so that the mapped packages can be linked into it.
            place.mkdir(parents=True)
            for entry in source.iterdir():
                (place / entry.name).symlink_to(entry)
    return tree


@atexit.register
def _remove_trees() -> None:
    while _trees:
        shutil.rmtree(_trees.pop(), ignore_errors=True)


@event_priority(100)  # before mkdocstrings reads its handlers' paths
def on_config(config: MkDocsConfig) -> MkDocsConfig:
    _remove_trees()  # `mkdocs serve` reads the config again for each rebuild
    handlers = config.plugins["mkdocstrings"].config["handlers"]
    python = handlers.setdefault("python", {})
    python["paths"] = [str(package_tree()), *python.get("paths", [])]
    config.nav = list(_expanded(config.nav or [], Path(config.docs_dir)))
    return config


def _expanded(items: list[Any], docs: Path) -> Iterator[Any]:
    """`items` of a nav with each folder entry (`name/`) replaced by its pages."""
    for item in items:
        if isinstance(item, str) and item.endswith("/"):
            yield from folder_pages(docs, item)
        elif isinstance(item, dict):
            ((title, value),) = item.items()
            if isinstance(value, str) and value.endswith("/"):
                value = folder_pages(docs, value)
            elif isinstance(value, list):
                value = list(_expanded(value, docs))
            if value:
                yield {title: value}
        else:
            yield item


def folder_pages(docs: Path, folder: str) -> list[str]:
    """The pages of `docs/folder`, relative to `docs`: index.md, those it links in their
    order, then the others by name."""
    base = docs / folder
    pages = sorted(p.relative_to(docs).as_posix() for p in base.rglob("*.md"))
    if not pages:
        return []
    index = f"{folder}index.md"
    order = [index] if index in pages else []
    if index in pages:
        for link in LINK.findall((docs / index).read_text(encoding="utf-8")):
            target = (base / link).resolve()
            if target.is_relative_to(docs.resolve()):
                page = target.relative_to(docs.resolve()).as_posix()
                if page in pages and page not in order:
                    order.append(page)
    return order + [p for p in pages if p not in order]


def on_page_markdown(markdown: str, page: Page, config: MkDocsConfig, files: Files) -> str:
    if not EXCEPTIONS.search(markdown):
        return markdown
    loader = griffe.GriffeLoader(
        search_paths=[*config.plugins["mkdocstrings"].config["handlers"]["python"]["paths"]]
    )
    # The top package once: its subpackages come with it (the tree's links are followed).
    loader.load("eventcraft", try_relative_path=False)
    loader.resolve_aliases(external=False, implicit=False)
    collection = loader.modules_collection
    return EXCEPTIONS.sub(lambda found: exceptions_table(collection, found[1]), markdown)


def exceptions_table(collection: griffe.ModulesCollection, package: str) -> str:
    """A Markdown table of the exceptions `package` exports, parents before children."""
    module = collection.get_member(package)
    assert isinstance(module, griffe.Module)
    classes: dict[str, griffe.Class] = {}
    for export in module.exports or ():
        name = str(export)
        found = module[name]
        target = found.final_target if isinstance(found, griffe.Alias) else found
        if isinstance(target, griffe.Class) and _is_exception(target):
            classes[name] = target
    rows = ["| Exception | Is a | Raised when |", "| --- | --- | --- |"]
    for name, depth in _tree_order(classes):
        cls = classes[name]
        bases = ", ".join(f"`{_short(base)}`" for base in cls.bases)
        indent = "&nbsp;&nbsp;&nbsp;&nbsp;" * depth
        rows.append(f"| {indent}[`{name}`][{package}.{name}] | {bases} | {_when(cls)} |")
    return "\n".join(rows)


def _is_exception(cls: griffe.Class) -> bool:
    for base in cls.resolved_bases:
        if isinstance(base, griffe.Class) and _is_exception(base):
            return True
    return any(_short(base).endswith(("Error", "Exception")) for base in cls.bases)


def _short(base: object) -> str:
    return str(base).rsplit(".", 1)[-1]


def _tree_order(classes: dict[str, griffe.Class]) -> Iterator[tuple[str, int]]:
    """The names of `classes`, each after the one of them it derives from, with its depth."""
    by_path = {cls.path: name for name, cls in classes.items()}

    def parent(cls: griffe.Class) -> str | None:
        for base in cls.resolved_bases:
            if isinstance(base, griffe.Class) and base.path in by_path:
                return by_path[base.path]
        return None

    children: dict[str | None, list[str]] = {}
    for name, cls in classes.items():
        children.setdefault(parent(cls), []).append(name)

    def walk(name: str | None, depth: int) -> Iterator[tuple[str, int]]:
        for child in sorted(children.get(name, ())):
            yield child, depth
            yield from walk(child, depth + 1)

    yield from walk(None, 0)


def _when(cls: griffe.Class) -> str:
    """The first paragraph of the class's docstring, on one line of a table."""
    text = cls.docstring.value if cls.docstring else ""
    first = text.strip().split("\n\n", 1)[0]
    return " ".join(first.split()).replace("|", "\\|") or "(no docstring)"
