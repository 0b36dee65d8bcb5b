"""A tenant's SQLite file: its folder made before its store opens, and the file with all
SQLite and the store keep beside it removed when the tenant is dropped.

The store's file holds everything of it: events, snapshots, deletions, tags, the key
table and the retention runs. Beside it SQLite keeps its write-ahead log (`-wal`), its
shared memory (`-shm`) and, in rollback mode, its journal (`-journal`); retention keeps
the file of its lock (`RETENTION_LOCK_SUFFIX`).
"""

from __future__ import annotations

import os
from pathlib import Path

from ..errors import StoreUnavailable
from .retention import RETENTION_LOCK_SUFFIX

BESIDE = ("-wal", "-shm", "-journal", RETENTION_LOCK_SUFFIX)
"""What is added to a store file's path for the files that belong to it."""


def make_folder(folder: str) -> None:
    """Make the tenant's own folder, in a parent that must be there: a mistyped parent
    does not silently become a tree of new folders."""
    path = Path(folder)
    if not path.parent.is_dir():
        raise StoreUnavailable(
            f"the folder {str(path.parent)!r} that tenants' folders are made in does not exist"
        )
    try:
        path.mkdir(exist_ok=True)
    except OSError as error:
        raise StoreUnavailable(f"cannot make the tenant's folder {folder}: {error}") from error


def exists(path: str) -> bool:
    """Whether the tenant's store file is there."""
    return Path(path).is_file()


def names_in(folder: str) -> list[str]:
    """The names in `folder`, sorted; none if it is not there. A name SQLite or the store
    keeps beside a store file (`acme.db-wal` beside `acme.db`) is left out."""
    try:
        names = set(os.listdir(folder or "."))
    except FileNotFoundError:
        return []
    except OSError as error:
        raise StoreUnavailable(f"cannot list the tenants' folder {folder}: {error}") from error
    beside = {name + suffix for name in names for suffix in BESIDE}
    return sorted(names - beside)


def remove(path: str, folder: str | None) -> None:
    """Remove the store file at `path` and the files that belong to it; then `folder`, the
    folder made for the tenant, if nothing else is left in it."""
    for name in (path, *(path + suffix for suffix in BESIDE)):
        try:
            os.remove(name)
        except FileNotFoundError:
            pass
        except OSError as error:
            raise StoreUnavailable(f"cannot remove the tenant's file {name}: {error}") from error
    if folder is not None:
        try:
            os.rmdir(folder)
        except FileNotFoundError:
            pass
        except OSError:
            pass  # it holds files the store did not make: they are not the store's to remove
