"""`eventcraft forget SUBJECT`: erase a data subject's key, so its personal fields read as
forgotten everywhere, and what the error stores keep of it."""

from __future__ import annotations

import click

from ..operations import personal as operations
from ..operations.errors import InputError, Problems
from .output import console, emit_json, json_option
from .shell import Shell, confirmed, shell, yes_option


@click.command(
    epilog="\b\nExamples:\n  eventcraft --store postgresql://db/app forget customer-42 --yes\n"
    "  eventcraft forget customer-42 --keys postgresql://keys-db/app --yes --json"
)
@click.argument("subject")
@click.option(
    "--keys",
    "keys_url",
    metavar="URL",
    help="The key store, when it is not the store's own database (it must exist).",
)
@yes_option
@json_option
def forget(subject: str, keys_url: str | None, yes: bool, as_json: bool) -> None:
    """Erase SUBJECT's key: its personal fields read as forgotten from now on, in every
    reader, the archive included. The error messages of parked projection events holding
    them, and the failed inbox messages naming SUBJECT, are erased too (in the App's
    read-model database as well, with --app). Read models that copied the fields keep
    them until rebuilt. Run again to complete an erasure a forget reported pending
    (exit 1)."""
    found_shell = shell()
    # With --keys and no store named, only the key is erased: the error stores live in
    # the store's database.
    store = found_shell.store() if _store_named(found_shell) or not keys_url else None
    databases: list[str | None] = [None]
    if found_shell.app_reference and found_shell.app().database:
        databases.append(found_shell.app().database)
    if keys_url:
        keys = operations.open_key_store(keys_url)
    else:
        assert store is not None
        keys = store.keys
    try:
        found = operations.subject_keys(keys, subject)
        if found.live:
            confirmed(
                f"Forget {subject!r}? Its {found.live} key(s) in {found.key_store} will be "
                "erased; its personal fields cannot be read again, by anyone",
                yes,
            )
        done = operations.forget(keys, subject, store, databases)
    finally:
        if keys_url:
            keys.close()
    if as_json:
        emit_json(done)
        _pending(done, subject)
        return
    if done.erased:
        console().print(
            f"forgot {subject!r}: {done.erased} key(s) erased; its personal fields now read "
            f"as {done.replacement!r}. Rebuild the read models that copied them."
        )
    elif done.key_store_empty:
        console().print(
            f"{subject!r} has no key to erase: the key store {done.key_store} holds no keys at "
            "all, so nothing was ever sealed with it. If this store's keys live in another "
            "database, name it: --keys URL"
        )
    else:
        console().print(
            f"{subject!r} has no key to erase: nothing was sealed for it since "
            "it was last forgotten, or ever"
        )
    for place in done.places[1:]:
        console().print(f"{place.place} erased: {place.erased} ({place.table} in {place.database})")
    _pending(done, subject)


def _store_named(found: Shell) -> bool:
    try:
        found.url()
    except InputError:
        return False
    return True


def _pending(done: operations.Forgotten, subject: str) -> None:
    if done.pending:
        raise Problems(
            f"the erasure from {done.key_store}'s files is pending: a transaction older than "
            f"the forget is still open there. Run `eventcraft forget {subject}` again once "
            "it has ended (any forget completes it)"
        )
