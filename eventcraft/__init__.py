"""eventcraft: event sourcing and CQRS for Python.

The four packages install beneath this one: `eventcraft.eventstore`,
`eventcraft.domain`, `eventcraft.projections` and `eventcraft.sagas`. This
package itself holds the application shell above them (the command line
and the web console, over one operations layer) and the release's version.

`App` is imported on first use: `import eventcraft.eventstore` must not load
the shell and every package above the store.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .app import App

__version__ = "0.2.0"

__all__ = ["App", "__version__"]


def __getattr__(name: str) -> Any:
    if name == "App":
        from .app import App

        return App
    raise AttributeError(f"module 'eventcraft' has no attribute {name!r}")
