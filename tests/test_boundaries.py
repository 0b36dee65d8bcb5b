"""Packages import each other through their public faces, not their private modules.

Each module of the shell (eventcraft/) and of the feature packages is parsed, and
every import of `eventcraft.<package>.<module>` made from outside <package> is
listed. A package's own modules may import each other freely; another package, or
the shell, may import only a public face: the package itself, or one of the
modules and subpackages its documentation names as public (`PUBLIC_FACES`).

import-linter holds the same rule (`pyproject.toml`, the contract "Packages meet at
their faces"), but it sees modules, not names: `from eventcraft.eventstore import
file_lock` imports the function the face exports, and to import-linter it is the
module of that name, so that contract lets every import of such a module through.
This test tells the two apart, and stays the guard for them.
"""

from __future__ import annotations

import ast
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

# The folders of the feature packages, each installed as eventcraft.<folder>.
PACKAGES = ("domain", "eventstore", "messaging", "projections", "sagas")

# Faces the README documents beside the packages themselves. The Spark replay is a
# subpackage with its own __init__ and extra; the other four are modules a user
# imports by name. eventcraft.eventstore.postgres is not among them: what a user
# needs of it (PostgresTarget) is re-exported by eventcraft.eventstore.
PUBLIC_FACES = frozenset(
    {
        *(f"eventcraft.{package}" for package in PACKAGES),
        "eventcraft.eventstore.retention",
        "eventcraft.eventstore.telemetry",
        "eventcraft.eventstore.testing",
        "eventcraft.projections.reducers",
        "eventcraft.projections.spark",
    }
)


def _module_name(path: Path) -> str:
    """The name a file is installed under: eventcraft.<folder>.<module>."""
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    if parts[0] != "eventcraft":
        parts.insert(0, "eventcraft")
    return ".".join(parts)


def _owner(module: str) -> str | None:
    """The feature package a module belongs to, or None for the shell's."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 and parts[1] in PACKAGES else None


def _is_module(name: str) -> bool:
    """Whether `eventcraft.<package>.<...>` names a module or subpackage of ours."""
    parts = name.split(".")
    if len(parts) < 3 or parts[1] not in PACKAGES:
        return False
    path = ROOT.joinpath(*parts[1:])
    return path.with_suffix(".py").exists() or (path / "__init__.py").exists()


def _exported(module: str) -> set[str]:
    """The names a package's __init__ lists in its `__all__`."""
    init = ROOT.joinpath(*module.split(".")[1:], "__init__.py")
    if not init.exists():
        return set()
    for node in ast.parse(init.read_text()).body:
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets
        ):
            return set(ast.literal_eval(node.value))
    return set()


def _imports(path: Path) -> list[tuple[str, str]]:
    """Each (module, name) a file imports; name is "" for `import module`."""
    module = _module_name(path)
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found: list[tuple[str, str]] = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.extend((alias.name, "") for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")
                anchor = anchor[: len(anchor) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                # `from eventcraft.projections import schema` reaches the module too,
                # unless the face exports a name of its own so called (spark's replay).
                submodule = f"{base}.{alias.name}"
                if _is_module(submodule) and alias.name not in _exported(base):
                    found.append((submodule, ""))
                else:
                    found.append((base, alias.name))
    return found


def _deep_imports() -> set[str]:
    folders = [ROOT / "eventcraft", *(ROOT / package for package in PACKAGES)]
    deep: set[str] = set()
    for folder in folders:
        for path in sorted(folder.rglob("*.py")):
            importer = _owner(_module_name(path))
            for module, name in _imports(path):
                target = _owner(module)
                if target is None or target == importer or module in PUBLIC_FACES:
                    continue
                where = path.relative_to(ROOT).as_posix()
                target_name = f"{module}.{name}" if name else module
                deep.add(f"{where}: {target_name.removeprefix('eventcraft.')}")
    return deep


def test_packages_import_each_other_only_through_their_public_faces() -> None:
    deep = sorted(_deep_imports())
    assert not deep, "imports past a package's public face (import from its face instead):\n" + (
        "\n".join(deep)
    )


def _shadowed() -> set[str]:
    """Modules named as a name their face exports (`eventcraft.eventstore.file_lock`,
    whose face exports the function `file_lock`)."""
    return {
        f"{face}.{name}"
        for face in PUBLIC_FACES
        for name in _exported(face)
        if _is_module(f"{face}.{name}")
    }


def test_import_linter_lets_through_the_faces_and_no_other_module() -> None:
    """The import-linter contract forbids every module of every package and passes the
    faces this test passes, and the modules it cannot tell from an exported name."""
    config = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["importlinter"]
    (contract,) = [c for c in config["contracts"] if c["type"] == "forbidden"]
    assert contract["source_modules"] == ["eventcraft.*"]
    assert sorted(contract["forbidden_modules"]) == [f"eventcraft.{p}.**" for p in PACKAGES]
    assert contract["allow_indirect_imports"] is True
    passed = {line.removeprefix("eventcraft.** -> ") for line in contract["ignore_imports"]}
    submodule_faces = {face for face in PUBLIC_FACES if face.count(".") > 1}
    assert passed == submodule_faces | _shadowed()
