"""What every command is given: the store and the App it was pointed at, opened on demand."""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import click

from eventcraft.eventstore import EventStore, redacted

from ..operations import tenants
from ..operations.errors import InputError
from ..operations.stores import open_store

if TYPE_CHECKING:
    from ..app import App

F = TypeVar("F", bound=Callable[..., Any])

NO_TERMINAL = "there is no terminal to confirm this at: pass --yes to go ahead"

yes_option: Callable[[F], F] = click.option(
    "--yes", "-y", is_flag=True, help="Do it without asking for confirmation."
)


@dataclass
class Shell:
    """The global options, and what they open, closed when the command ends."""

    store_url: str | None
    app_reference: str | None
    debug: bool
    tenant: str | None = None
    """`--tenant`: the tenant whose store every command works on, in a template URL."""
    _app: App | None = None
    _store: EventStore | None = None
    _resources: ExitStack = field(default_factory=ExitStack)

    def app(self) -> App:
        """The App named by `--app` or `EVENTCRAFT_APP`; the command needs one."""
        if self._app is None:
            if not self.app_reference:
                raise InputError(
                    "this command needs the service's definitions: "
                    "give --app MODULE:NAME or set EVENTCRAFT_APP"
                )
            from ..app import load_app

            app = load_app(self.app_reference)
            if self.tenant is not None:
                app = tenants.app_for_tenant(app, self.tenant)
            self._app = app
        return self._app

    def given_url(self) -> str:
        """The store URL as given: `--store`, else `EVENTCRAFT_STORE`, else the App's; a
        template with `{tenant}` stays one."""
        url = self.store_url
        if not url and self.app_reference:
            url = self.app().store
        if not url:
            raise InputError("name the store: give --store URL or set EVENTCRAFT_STORE")
        return url

    def template(self) -> str:
        """The template URL naming each tenant's place, for commands about tenants."""
        url = self.given_url()
        if not tenants.is_template(url):
            raise InputError(
                f"{redacted(url)!r} is one store, not a store per tenant: give --store a URL "
                "with {tenant} where each tenant's place is named "
                "(sqlite:///tenants/{tenant}.db, postgresql://host/db?schema=shop_{tenant})"
            )
        return url

    def url(self) -> str:
        """The URL of the one store the command works on: the given URL, or, with
        `--tenant`, where that tenant's store is in the template."""
        url = self.given_url()
        if self.tenant is not None:
            if not tenants.is_template(url):
                raise InputError(
                    f"--tenant {self.tenant} needs a store URL with {{tenant}} where each "
                    f"tenant's place is named, and {redacted(url)!r} has none "
                    "(sqlite:///tenants/{tenant}.db, postgresql://host/db?schema=shop_{tenant})"
                )
            return tenants.place_of(url, self.tenant).url
        if tenants.is_template(url):
            raise InputError(
                f"{redacted(url)!r} names a store per tenant: give --tenant TENANT (or set "
                "EVENTCRAFT_TENANT) for the tenant whose store this command works on "
                "(`eventcraft tenant list` lists them)"
            )
        return url

    def store(self, *, create: bool = False) -> EventStore:
        """The store, opened once; a SQLite file that is not there is created only with
        `create`, by a command that writes (`open_store`). With `--tenant`, the tenant's
        store, by the template's `?tenant=`."""
        if self._store is None:
            url = self.url()  # refused here if the URL and --tenant do not go together
            if self.tenant is not None:
                url = tenants.tenant_url(self.given_url(), self.tenant)
            self._store = self._resources.enter_context(open_store(url, create=create))
        return self._store

    def close(self) -> None:
        self._resources.close()


def shell() -> Shell:
    """The running command's shell."""
    found = click.get_current_context().find_object(Shell)
    assert found is not None, "commands run under the eventcraft group"
    return found


def opened() -> tuple[EventStore, App]:
    """The store and the App the command was pointed at; the command needs both."""
    found = shell()
    app = found.app()
    return found.store(), app


def interactive() -> bool:
    """Whether there is a person at a terminal to ask."""
    return sys.stdin.isatty()


def confirmed(
    question: str, yes: bool, *, refusal: str = NO_TERMINAL, can_ask: bool = True
) -> None:
    """Go on if `--yes` was given or the person at the terminal agrees; otherwise abort
    (exit 1), or, with no terminal to ask (or stdin taken by data), refuse (exit 2) with
    `refusal` rather than hang."""
    if yes:
        return
    if not (can_ask and interactive()):
        raise InputError(refusal)
    click.confirm(question, abort=True)
