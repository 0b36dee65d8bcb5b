"""A bank service on asyncio: Starlette, the async repository, and a read model kept live.

    uvicorn 'examples.async_service:create_app' --factory    # EVENTCRAFT_URL names the store

- `POST /accounts/{id}` opens an account (`{"owner": "Ann"}`), and
  `POST /accounts/{id}/deposits` deposits (`{"amount_cents": 500}`): each runs a
  command through `AsyncRepository.execute`. The client's `Idempotency-Key`
  header (a UUID, or any text, hashed to one) becomes the event's id, so a
  request sent again (after a timeout, a lost answer) stores nothing new and
  answers the same position: the client may resend until it hears back, and
  the request-reply of HTTP becomes the store's fire-and-forget append.
- `GET /accounts/{id}` reads the balances read model, kept by a task that
  subscribes to the log. `?after=P` waits (a few seconds at most) until the
  model has applied position P: a client reads its own write.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from typing import Any

from eventcraft.domain import AggregateNotFound, AsyncRepository, DomainError
from eventcraft.eventstore import AsyncEventStore, RecordedEvent, WrongExpectedVersion
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from examples.bank import BankAccount

KEYS = uuid.UUID("5b1c3e52-8d4f-4c39-9a57-3f0e4b9c2d11")
"""The namespace in which an Idempotency-Key that is not a UUID is hashed to one."""

ATTEMPTS = 50
"""Lost races a command retries on a fresh load before the service answers 409."""

READ_WAIT = 5.0
"""Longest a GET waits for the read model to reach `after`, in seconds."""


@dataclass
class Balances:
    """The read model: each account's owner and balance, and the last position applied."""

    accounts: dict[str, dict[str, Any]] = field(default_factory=dict)
    position: int = 0
    moved: asyncio.Condition = field(default_factory=asyncio.Condition)

    async def apply(self, event: RecordedEvent) -> None:
        account = self.accounts.setdefault(event.stream_id.split("-", 1)[1], {"balance_cents": 0})
        if event.type == "AccountOpened":
            account["owner"] = event.data["owner"]
        elif event.type == "MoneyDeposited":
            account["balance_cents"] += event.data["amount_cents"]
        elif event.type == "MoneyWithdrawn":
            account["balance_cents"] -= event.data["amount_cents"]
        async with self.moved:
            self.position = event.position
            self.moved.notify_all()

    async def reached(self, position: int, timeout: float) -> bool:
        async with self.moved:
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(timeout):
                    await self.moved.wait_for(lambda: self.position >= position)
            return self.position >= position


def create_app(url: str | None = None) -> Starlette:
    """The service on the store at `url` (by default `$EVENTCRAFT_URL`)."""
    store_url = url or os.environ.get("EVENTCRAFT_URL", "sqlite:///bank.db")

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        async with await AsyncEventStore.open(store_url) as store:
            balances = Balances()
            app.state.store = store
            app.state.accounts = AsyncRepository(store, BankAccount)
            app.state.balances = balances
            keeper = asyncio.create_task(_keep(store, balances))
            try:
                yield
            finally:
                keeper.cancel()
                with contextlib.suppress(asyncio.CancelledError):
                    await keeper

    return Starlette(
        routes=[
            Route("/accounts/{account_id}", open_account, methods=["POST"]),
            Route("/accounts/{account_id}/deposits", deposit, methods=["POST"]),
            Route("/accounts/{account_id}", read_account, methods=["GET"]),
        ],
        lifespan=lifespan,
    )


async def _keep(store: AsyncEventStore, balances: Balances) -> None:
    async for event in store.subscribe(after=balances.position, categories="account"):
        await balances.apply(event)


async def open_account(request: Request) -> JSONResponse:
    body = await _json(request)
    owner = body.get("owner")
    if not isinstance(owner, str) or not owner:
        return _problem(422, "owner must be a non-empty string")
    return await _run(
        request, lambda account: account.open(owner), create=True, conflict="already open"
    )


async def deposit(request: Request) -> JSONResponse:
    body = await _json(request)
    amount = body.get("amount_cents")
    if not isinstance(amount, int) or isinstance(amount, bool) or amount <= 0:
        return _problem(422, "amount_cents must be a positive integer")
    return await _run(request, lambda account: account.deposit(amount))


async def read_account(request: Request) -> JSONResponse:
    balances: Balances = request.app.state.balances
    after = request.query_params.get("after", "0")
    if not after.isdigit():
        return _problem(422, "after must be a position: a non-negative integer")
    if not await balances.reached(int(after), READ_WAIT):
        return _problem(503, f"the read model has not reached position {after} yet")
    account = balances.accounts.get(request.path_params["account_id"])
    if account is None or "owner" not in account:
        return _problem(404, "no such account")
    return JSONResponse({**account, "position": balances.position})


async def _run(
    request: Request,
    command: Callable[[BankAccount], None],
    *,
    create: bool = False,
    conflict: str = "",
) -> JSONResponse:
    """Run `command` on the account, keyed by the request's Idempotency-Key."""
    store: AsyncEventStore = request.app.state.store
    accounts: AsyncRepository[BankAccount] = request.app.state.accounts
    key = _key(request.headers.get("Idempotency-Key"))
    if key is None:
        return _problem(400, "an Idempotency-Key header is required")
    # Sent before? Then its events are stored: answer as the first time did.
    account_id = request.path_params["account_id"]
    earlier = await store.read_event(key)
    if earlier is not None and earlier.stream_id != BankAccount.stream_id_of(account_id):
        return _problem(422, "this Idempotency-Key was used for another account")
    if earlier is None:
        try:
            await accounts.execute(
                account_id, command, create=create, attempts=ATTEMPTS, idempotency_key=key
            )
        except AggregateNotFound:
            return _problem(404, "no such account")
        except WrongExpectedVersion:
            return _problem(409, conflict or "too many concurrent changes; send it again")
        except DomainError as error:
            return _problem(409, str(error))
        earlier = await store.read_event(key)
    assert earlier is not None  # stored by this request or by the one it repeats
    return JSONResponse({"position": earlier.position, "version": earlier.version}, 201)


def _key(header: str | None) -> uuid.UUID | None:
    if not header:
        return None
    try:
        return uuid.UUID(header)
    except ValueError:
        return uuid.uuid5(KEYS, header)


async def _json(request: Request) -> dict[str, Any]:
    try:
        body = await request.json()
    except ValueError:
        return {}
    return body if isinstance(body, dict) else {}


def _problem(status: int, detail: str) -> JSONResponse:
    return JSONResponse({"detail": detail}, status)
