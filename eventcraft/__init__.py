"""eventcraft: event sourcing and CQRS for Python.

The four packages install beneath this one: `eventcraft.eventstore`,
`eventcraft.domain`, `eventcraft.projections` and `eventcraft.sagas`. This
package itself holds the application shell above them (the command line
and the web console, over one operations layer) and the release's version.
"""

__version__ = "0.2.0"

__all__ = ["__version__"]
