"""`TenantsIntake`: one HTTP intake for many tenants, each message stored in its sender's.

Which tenant a request belongs to is an answer about who sent it, so the application's
authentication hook gives it (`tenant_of`), from the credentials it checks: never the
body, a header or a path the client chose, which a client of one tenant could set to
another's. Each tenant's messages go through an `Inbox` on that tenant's store (made by
`inbox(store)` on its first message), so idempotency keys, event ids and error stores
are the tenant's own: two tenants may send the same key and both are stored.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, TypeAlias

from eventcraft.eventstore import EventStore, InvalidTenant, Tenants, check_tenant

from .errors import MessagingConfigError
from .inbox import Inbox
from .intake import (
    _JSON,
    HttpIntake,
    Receive,
    Scope,
    Send,
    _answer,
    _lifespan,
    checked_max_body,
    hook_verdict,
    media_types,
)

if TYPE_CHECKING:
    from starlette.requests import Request

log = logging.getLogger("eventcraft.messaging")

TenantOf: TypeAlias = Callable[["Request"], "str | Awaitable[str | None] | None"]
"""The hook naming the tenant of a request's sender: see `TenantsIntake`.

Example::

    from eventcraft.messaging import TenantOf, Unauthenticated
    from starlette.requests import Request

    TOKENS = {"Bearer acme-s3cret": "acme", "Bearer globex-s3cret": "globex"}

    def tenant_of(request: Request) -> str | None:
        # The token says who is calling, and so whose tenant it is; None: 401.
        return TOKENS.get(request.headers.get("authorization", ""))

    hook: TenantOf = tenant_of
"""


class TenantsIntake:
    """An ASGI application storing each POSTed message in the tenant of its sender, once by
    its key in that tenant, as `HttpIntake` does for one store.

    `tenant_of` is called with the Starlette `Request` (not its body) on every request,
    retries too, before anything is read or stored; it returns the sender's tenant id, or
    None to refuse the request (401). Raising `Unauthenticated` (401) or `Forbidden` (403)
    refuses it with that detail; any other exception is 503, logged without its message.
    An id that is no tenant id (`check_tenant`) is the application's mistake: 500,
    logged, nothing stored. `inbox` makes the inbox of a tenant's store (the same name,
    mapping and options for every tenant, as a rule); it is called once per tenant.
    `max_body` and `content_types` are `HttpIntake`'s.

    Example::

        from eventcraft.eventstore import Tenants
        from eventcraft.messaging import Inbox, IncomingMessage, Mapped, TenantsIntake
        from starlette.testclient import TestClient

        def order_received(message: IncomingMessage) -> Mapped:
            return Mapped(f"order-{message.json()['order']}", "OrderReceived", message.json())

        tokens = {"Bearer acme-s3cret": "acme", "Bearer globex-s3cret": "globex"}
        with Tenants("sqlite:///tenant-{tenant}.db") as tenants:
            app = TenantsIntake(
                tenants,
                lambda store: Inbox("orders-http", store, order_received),
                tenant_of=lambda request: tokens.get(request.headers.get("authorization", "")),
            )
            client = TestClient(app)
            for token in tokens:
                sent = {"Idempotency-Key": "order-7", "Authorization": token}
                assert client.post("/orders", json={"order": 7}, headers=sent).status_code == 202
            unknown = {"Idempotency-Key": "order-7", "Authorization": "Bearer guess"}
            assert client.post("/orders", json={"order": 7}, headers=unknown).status_code == 401
            assert [tenants.for_tenant(t).high_water_mark() for t in ("acme", "globex")] == [1, 1]
    """

    def __init__(
        self,
        tenants: Tenants,
        inbox: Callable[[EventStore], Inbox],
        *,
        tenant_of: TenantOf,
        max_body: int = 1024 * 1024,
        content_types: Sequence[str] | None = _JSON,
    ) -> None:
        if not isinstance(tenants, Tenants):
            raise MessagingConfigError(
                f"a tenants' intake stores through Tenants (eventcraft.eventstore), not {tenants!r}"
            )
        if not callable(inbox):
            raise MessagingConfigError(
                f"inbox must be callable with a tenant's store and give its Inbox, not {inbox!r}"
            )
        if not callable(tenant_of):
            raise MessagingConfigError(
                f"tenant_of must be callable with a request, not {tenant_of!r}"
            )
        try:
            from starlette.requests import Request  # noqa: F401
        except ImportError as error:
            raise MessagingConfigError(
                f"tenant_of is handed a Starlette Request: pip install 'eventcraft[service]' "
                f"({error})"
            ) from None
        self.tenants = tenants
        self.inbox = inbox
        self.tenant_of = tenant_of
        self.max_body = checked_max_body(max_body)
        self.content_types = media_types(content_types)
        self._intakes: dict[str, HttpIntake] = {}
        self._lock = threading.Lock()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await _lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        if scope["method"] != "POST":
            await _answer(send, 405, {"error": "only POST is accepted"}, [(b"allow", b"POST")])
            return
        verdict, refusal = await hook_verdict(self.tenant_of, scope, "tenants")
        if refusal is not None:
            await _answer(send, *refusal)
            return
        if verdict is None:
            await _answer(send, 401, {"error": "the request is not authenticated"})
            return
        try:
            tenant = check_tenant(verdict)
        except InvalidTenant:
            # The hook's own mistake: the id is not told to a client, who did not choose it.
            log.error(
                "HTTP intake for tenants: tenant_of returned no tenant id (a %s)",
                type(verdict).__name__,
            )
            told = "the intake could not decide whose message this is"
            await _answer(send, 500, {"error": told})
            return
        await self._intake(tenant)(scope, receive, send)

    def _intake(self, tenant: str) -> HttpIntake:
        """The intake of `tenant`'s inbox, made at its first message."""
        with self._lock:
            intake = self._intakes.get(tenant)
            if intake is None:
                inbox = self.inbox(self.tenants.for_tenant(tenant))
                intake = self._intakes[tenant] = HttpIntake(
                    inbox, max_body=self.max_body, content_types=self.content_types
                )
            return intake
