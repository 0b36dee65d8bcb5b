"""Each package's public API: a sorted `__all__` of names that exist, and type information."""

from __future__ import annotations

import importlib
from pathlib import Path

import pytest

PACKAGES = [
    "eventcraft",
    "eventcraft.console",
    "eventcraft.eventstore",
    "eventcraft.domain",
    "eventcraft.messaging",
    "eventcraft.projections",
    "eventcraft.projections.spark",
    "eventcraft.sagas",
]


@pytest.mark.parametrize("name", PACKAGES)
def test_a_package_exports_a_sorted_all_of_names_it_has(name: str) -> None:
    package = importlib.import_module(name)
    exported = package.__all__
    assert exported == sorted(exported, key=lambda n: (not n.isupper(), n))
    assert len(set(exported)) == len(exported)
    missing = [n for n in exported if not hasattr(package, n)]
    assert not missing, f"{name}.__all__ names what it does not have: {missing}"
    assert package.__file__ is not None
    assert (Path(package.__file__).parent / "py.typed").exists()
