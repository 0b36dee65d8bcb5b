"""The web console: browse, view and download the log's events, and watch (and, when
allowed, act on) the App's projections and sagas. Served by `eventcraft console`, or
mounted in a service's own ASGI app with `create_app`.

Every page calls the same `eventcraft.operations` functions as the command line.
"""

from .application import create_app
from .security import Refused

__all__ = ["Refused", "create_app"]
