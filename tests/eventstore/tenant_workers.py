"""What the processes of the tenant tests run: module-level, so that a spawned process can
import it."""

from __future__ import annotations

from typing import Any

from eventcraft.eventstore import EventStore, NewEvent, Tenants, WrongExpectedVersion


def claim(
    template: str, own: str, shared: str, writer: int, rounds: int, barrier: Any
) -> tuple[list[bool], list[bool]]:
    """Each round, at the same moment as the other process: claim the next version of
    `order-1` in tenant `own` (this process's alone), then in tenant `shared` (both
    processes'). Whether each claim won, round by round."""
    own_won, shared_won = [], []
    with Tenants(template, most_open=1) as tenants:
        mine, ours = tenants.for_tenant(own), tenants.for_tenant(shared)
        for round_ in range(rounds):
            barrier.wait()
            own_won.append(_claimed(mine, writer, round_))
            shared_won.append(_claimed(ours, writer, round_))
    return own_won, shared_won


def _claimed(store: EventStore, writer: int, version: int) -> bool:
    try:
        store.append("order-1", [NewEvent("Claimed", {"writer": writer})], expected_version=version)
    except WrongExpectedVersion:
        return False
    return True
