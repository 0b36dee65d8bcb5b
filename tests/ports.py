"""Ports for the servers tests start in other processes, which cannot be told port 0 and
report the port they took back (PostgreSQL, nats-server, the console's Host check), or
which must come back on the same port after a stop (a proxy cut and restored).

Asking the kernel for a free port (binding port 0) and starting the server on it later
leaves a window in which another process's bind(0) may be given the same port: with the
suite run by several pytest-xdist workers at once, that other process is another worker.
So each worker takes its ports from a range of its own below the kernel's ephemeral
range (`/proc/sys/net/ipv4/ip_local_port_range`), from which neither bind(0) nor an
outgoing connection ever takes a port: no other worker and no client socket can take it
in that window. A port something already listens on (another test run on the machine,
a broker) is passed over. A run without workers asks the kernel, as there is no other
worker to meet.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import random
import socket
from collections.abc import Iterator

FIRST = 10_000
"""The lowest port a worker's range starts at: above the well-known services' ports."""
SPAN = 500
"""Ports in each worker's range: more than any one worker's tests ask for."""


def _ephemeral_start() -> int:
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as ranges:
            return int(ranges.read().split()[0])
    except (OSError, ValueError, IndexError):
        return 32_768  # Linux's default; elsewhere bind(0)'s own range may differ


def worker_index() -> int | None:
    """This pytest-xdist worker's number (`gw3`: 3); None outside xdist."""
    name = os.environ.get("PYTEST_XDIST_WORKER", "")
    return int(name[2:]) if name.startswith("gw") and name[2:].isdigit() else None


def _worker_ports() -> Iterator[int] | None:
    """This worker's range, from a random place in it and round again; None when there is
    no worker, or no room for its range below the ephemeral ports."""
    index = worker_index()
    if index is None:
        return None
    low = FIRST + index * SPAN
    if low + SPAN > _ephemeral_start():
        return None
    # A random start: a second test run on the machine, whose worker of the same number
    # has the same range, starts elsewhere in it.
    start = random.randrange(SPAN)
    return itertools.cycle([low + (start + n) % SPAN for n in range(SPAN)])


_PORTS = _worker_ports()


def _free(port: int) -> bool:
    """Whether nothing is bound to `port` on any IPv4 or IPv6 address."""
    families = [(socket.AF_INET, "0.0.0.0")]
    if socket.has_ipv6:
        families.append((socket.AF_INET6, "::"))
    for family, address in families:
        try:
            probe = socket.socket(family, socket.SOCK_STREAM)
        except OSError:
            continue  # no such family on this machine: nothing can listen there
        with probe:
            if family == socket.AF_INET6:
                with contextlib.suppress(OSError):
                    probe.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
            try:
                probe.bind((address, port))
            except OSError:
                return False
    return True


def free_port() -> int:
    """A port no server listens on, that no other worker of this run is given."""
    if _PORTS is None:
        with socket.socket() as probe:
            probe.bind(("127.0.0.1", 0))
            return int(probe.getsockname()[1])
    for _ in range(SPAN):
        port = next(_PORTS)
        if _free(port):
            return port
    raise RuntimeError(f"no free port in worker {worker_index()}'s range of {SPAN}")
