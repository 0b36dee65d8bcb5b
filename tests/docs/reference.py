"""What the reference pages document, read from them as the site's build reads them.

An API page (docs/reference/api/*.md) holds one `::: module` directive of mkdocstrings,
with its options indented below it. A package with `__all__` is rendered from it (the
site's `filters: public`); a module without one names its public members in the
`members:` option, and that list is then what counts as its public names.
"""

from __future__ import annotations

import importlib
import importlib.util
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from ..conftest import missing

ROOT = Path(__file__).resolve().parent.parent.parent
DOCS = ROOT / "docs"
API = DOCS / "reference" / "api"

_DIRECTIVE = re.compile(r"^::: (?P<name>[\w.]+)\n(?P<options>(?:[ \t]+.*\n|\n)*)", re.M)


@dataclass(frozen=True)
class Documented:
    """One `::: module` directive of an API page."""

    page: Path
    module: str
    options: dict[str, Any]

    @property
    def members(self) -> list[str] | None:
        """The names its page gives in `members:`, if it gives them."""
        members = self.options.get("members")
        return list(members) if isinstance(members, list) else None

    def public_names(self) -> list[str]:
        """What the page documents: the module's `__all__`, or the page's `members:`."""
        exported = getattr(importlib.import_module(self.module), "__all__", None)
        names = exported if exported is not None else self.members
        assert names is not None, f"{self.page}: {self.module} has no __all__ and no members:"
        return list(names)


def documented() -> list[Documented]:
    """Every `:::` directive of the API pages, in page order."""
    try:
        import yaml  # type: ignore[import-untyped]  # mkdocs brings PyYAML, without types
    except ImportError as error:
        missing(f"the docs extra is not installed ({error}): pip install -e '.[docs]'")
    found = []
    for page in sorted(API.glob("*.md")):
        for directive in _DIRECTIVE.finditer(page.read_text(encoding="utf-8")):
            block = yaml.safe_load(textwrap.dedent(directive["options"])) or {}
            found.append(Documented(page, directive["name"], dict(block.get("options", {}))))
    return found


def docs_hooks() -> ModuleType:
    """docs/hooks.py, the build's hooks (they lay out the packages for griffe)."""
    try:
        import griffe  # noqa: F401
        import mkdocs  # noqa: F401
    except ImportError as error:
        missing(f"the docs extra is not installed ({error}): pip install -e '.[docs]'")
    spec = importlib.util.spec_from_file_location("eventcraft_docs_hooks", DOCS / "hooks.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
