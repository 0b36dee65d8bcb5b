"""Writer processes for the many-tenant runner's tests (forked: module-level functions)."""

from __future__ import annotations

import random

from eventcraft.eventstore import NewEvent, Tenants


def append_to_tenants(template: str, tenants: list[str], writer: int, per_tenant: int) -> None:
    """Append `per_tenant` events to each of `tenants`, in a shuffled order, one or two an
    append; each event names its tenant, its writer and its number."""
    order = [tenant for tenant in tenants for _ in range(per_tenant)]
    random.Random(writer).shuffle(order)
    counts = dict.fromkeys(tenants, 0)
    with Tenants(template, most_open=3) as opened:
        stores = {tenant: opened.for_tenant(tenant) for tenant in tenants}
        for tenant in order:
            counts[tenant] += 1
            data = {"tenant": tenant, "writer": writer, "n": counts[tenant]}
            stores[tenant].append(f"w{writer}-{counts[tenant] % 5}", [NewEvent("Placed", data)])
