"""The processes the tests start to race, crash or share a store: real ones, each with its
own memory, connections and clock, forked by a server that imported eventcraft once.

Started by the spawn method, each imported eventcraft, SQLAlchemy, pydantic and psycopg
afresh: half a second of CPU or more apiece, two hundred of them, the largest share of
`make test-fast` (issue 52). The fork server (`forkserver`) is a process of its own,
started by a pytest-xdist worker when its first test asks for a process, with those
modules imported and nothing else: no thread, socket or connection of a test, which a
plain fork would copy. A process forked from it imports the module of the function it
runs, as a spawned one does, and starts in the asking test's working directory; its
environment is the one the worker had when it started the server, so a test that sets a
variable for a process passes it as an argument.
"""

from __future__ import annotations

import multiprocessing

PRELOADED = [
    "eventcraft.eventstore",
    "eventcraft.domain",
    "eventcraft.projections",
    "eventcraft.sagas",
    "eventcraft.messaging",
]
"""What the fork server imports before it forks: the packages the processes' functions
use (and, through them, SQLAlchemy, pydantic and psycopg)."""

PROCESSES = multiprocessing.get_context("forkserver")
"""The start method of every process a test starts: `PROCESSES.Process(...)`,
`ProcessPoolExecutor(n, mp_context=PROCESSES)`, `PROCESSES.Manager()`."""
PROCESSES.set_forkserver_preload(PRELOADED)
