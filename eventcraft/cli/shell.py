"""What every command is given: the store and the App it was pointed at, opened on demand."""

from __future__ import annotations

import sys
from collections.abc import Callable
from contextlib import ExitStack
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import click

from eventcraft.eventstore import EventStore

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

            self._app = load_app(self.app_reference)
        return self._app

    def url(self) -> str:
        """The store URL: `--store`, else `EVENTCRAFT_STORE`, else the App's."""
        url = self.store_url
        if not url and self.app_reference:
            url = self.app().store
        if not url:
            raise InputError("name the store: give --store URL or set EVENTCRAFT_STORE")
        return url

    def store(self, *, create: bool = False) -> EventStore:
        """The store, opened once; a SQLite file that is not there is created only with
        `create`, by a command that writes (`open_store`)."""
        if self._store is None:
            self._store = self._resources.enter_context(open_store(self.url(), create=create))
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
