"""Pages of events are built with Python's cycle collector paused.

A page of 1,000 events makes some 3,000 objects the cycle collector tracks
(the driver's row, the id and the event, per event), none of them in a
cycle. Built with the collector running, a page sets off four or five young
collections, and every tenth of those promotes whatever of the page is alive
by then to the oldest generation, whose growth is what sets off full
collections. On a 1,000-event SQLite page that cost was 0.8 to 1.2 ms of
2.3 ms, in an interpreter holding only 70,000 objects; the more a program
holds, the dearer each full collection. Paused, the page is built in one go
and the collector runs once at the next allocation after it, when the page
has usually been taken by its reader.

Nothing that needs collecting is missed: the collector only finds cycles,
and it runs again as soon as the pause ends. The pause is the interpreter's
own switch, so it is taken only when the collector is on, and given back by
whoever took it; a program that switches the collector off for good does so
with it off, before reading.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_enabled = gc.isenabled
_disable = gc.disable
_enable = gc.enable


@contextmanager
def collector_paused() -> Iterator[None]:
    """Run the body with the cycle collector off, if it was on."""
    if not _enabled():
        yield
        return
    _disable()
    try:
        yield
    finally:
        _enable()
