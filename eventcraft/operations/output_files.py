"""Output files: what a command may write where its user says, and how it writes a file.

Every file or folder a command writes at a path its user gives (an export's
file, a Parquet archive) is checked here first, its path resolved as the
system will (the current folder, `..`, symbolic links; a hard link is the
same file):

- never one of the store's own files: a SQLite database, the `-wal`, `-shm`
  and `-journal` files SQLite keeps beside it, and its retention lock; not
  even with `force`. An archive is neither one of them nor the folder that
  holds them.
- never over an existing file, unless `force`. A device or a pipe
  (`/dev/null`, `/dev/stdout`, also when the shell sent it to a file) is written as
  it is: there is no file to lose that the user has not given.

A file is written beside its place and takes it only once whole (`new_file`),
so an export refused or broken part-way leaves what was there, or nothing.
"""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import IO, TypeVar

from eventcraft.eventstore import RETENTION_LOCK_SUFFIX, SQLiteTarget, scheme_of

from .errors import InputError

T = TypeVar("T")

COMPANIONS = {
    "": "database",
    "-wal": "write-ahead log",
    "-shm": "shared-memory index",
    "-journal": "rollback journal",
    RETENTION_LOCK_SUFFIX: "retention lock",
}
"""What is added to a SQLite store's database path to name each of its files."""


def store_files(url: str) -> dict[str, str]:
    """The files the store at `url` keeps, by absolute path, each with what it is: those
    of a SQLite database, beside the path its URL gives and beside the file a link there
    leads to; none for a store in memory or on a server."""
    if scheme_of(url) != "sqlite":
        return {}
    path = SQLiteTarget.from_url(url).path
    if path.startswith(":memory:"):
        return {}
    files: dict[str, str] = {}
    for database in (os.path.abspath(path), os.path.realpath(path)):
        for suffix, what in COMPANIONS.items():
            files.setdefault(os.path.abspath(database + suffix), what)
            files.setdefault(os.path.realpath(database + suffix), what)
    return files


def check_file(target: str, store_url: str, *, force: bool = False) -> str:
    """The path a file written at `target` lands at, its links resolved; `InputError` if
    that is one of the store's own files (whatever `force` says), or an existing file
    and not `force`."""
    path = os.path.realpath(target)
    found = _store_file(path, store_files(store_url))
    if found is not None:
        kind, where = found
        raise InputError(
            f"cannot write {target!r}: it is the store's own {kind} ({where}), which nothing "
            "is ever written over, not even with --force: write to another file"
        )
    if os.path.isfile(path) and not force and not _in_place(target):
        raise InputError(f"{target!r} already exists: pass --force to replace it")
    return path


def check_folder(folder: str, store_url: str, *, role: str = "the archive") -> None:
    """`InputError` if `folder`, resolved, is one of the store's own files (a new folder
    would take its name) or the folder that holds them: `role` is said to need a folder
    of its own."""
    path = os.path.realpath(folder)
    files = store_files(store_url)
    found = _store_file(path, files)
    if found is not None:
        kind, where = found
        raise InputError(
            f"{role} {folder!r} is the store's own {kind} ({where}): give {role} a folder "
            "of its own"
        )
    for where, kind in files.items():
        if kind == COMPANIONS[""] and _same(path, os.path.dirname(where)):
            raise InputError(
                f"{role} {folder!r} is the folder of the store's own {kind} ({where}): give "
                f"{role} a folder of its own"
            )


@contextmanager
def new_file(target: str, store_url: str, *, force: bool = False) -> Iterator[IO[bytes]]:
    """A file to write at `target` (`check_file`'s rules), made beside it and put in its
    place once the block ends without error; a block that raises leaves what was there.

    Without `force`, a file that appeared at `target` meanwhile is not replaced either.
    A device or a pipe is written as it is.
    """
    path = check_file(target, store_url, force=force)
    if _in_place(target):
        # Opened by the name given: /dev/stdout resolves to a pipe's name, not a file's.
        with _opened(target, lambda: open(target, "wb")) as out:
            yield out
        return
    folder, name = os.path.split(path)
    handle, partial = _opened(
        target, lambda: tempfile.mkstemp(prefix=f".{name}.", suffix=".partial", dir=folder)
    )
    try:
        os.chmod(partial, _mode_for(path))
        with os.fdopen(handle, "wb") as out:
            yield out
            out.flush()
            os.fsync(out.fileno())  # whole on disk before it takes the old file's place
        check_file(target, store_url, force=force)  # checked again just before acting
        _put(partial, path, target, force=force)
    except BaseException:
        _remove(partial)
        raise


def _in_place(target: str) -> bool:
    """Whether `target` is written as it is, not replaced: a device, a pipe, or a name of
    one of the process's open files (`/dev/stdout` redirected to a file by the shell,
    which has opened it as it was told)."""
    name = os.path.abspath(target)
    if name in ("/dev/stdout", "/dev/stderr") or name.startswith(("/dev/fd/", "/proc/self/fd/")):
        return True
    return os.path.exists(name) and not os.path.isfile(name)


def _store_file(path: str, files: dict[str, str]) -> tuple[str, str] | None:
    """What `path` (resolved) is of `files`, and where that file is, if it is one."""
    if path in files:
        return files[path], path
    for where, kind in files.items():
        if _same(path, where):  # a hard link, or another name of the same folder
            return kind, where
    return None


def _same(path: str, other: str) -> bool:
    """Whether two paths name one file or folder, each being there."""
    try:
        return os.path.samefile(path, other)
    except OSError:
        return False


def _put(partial: str, path: str, target: str, *, force: bool) -> None:
    """Give the whole file at `partial` the name `path`: replacing what is there only if
    `force`."""
    if force:
        os.replace(partial, path)
        return
    try:
        # A link fails where a file exists: one that appeared since the check is kept.
        os.link(partial, path)
    except FileExistsError:
        raise InputError(f"{target!r} already exists: pass --force to replace it") from None
    except OSError:  # a filesystem without hard links: the check above must do
        os.replace(partial, path)
        return
    _remove(partial)


def _remove(path: str) -> None:
    with suppress(FileNotFoundError):
        os.unlink(path)


def _opened(target: str, opening: Callable[[], T]) -> T:
    try:
        return opening()
    except OSError as error:
        raise InputError(f"cannot write {target!r}: {error.strerror}") from None


def _mode_for(path: str) -> int:
    """The permissions the file had, or those `open` would give a new one (mkstemp's are
    the owner's alone)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except FileNotFoundError:
        mask = os.umask(0)
        os.umask(mask)
        return 0o666 & ~mask
