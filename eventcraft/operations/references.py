"""Objects a user names as `module:attribute` on the command line (an App, a Fold)."""

from __future__ import annotations

import importlib
import os
import sys

from .errors import InputError


def load_reference(reference: str, what: str) -> object:
    """The object `module:attribute` names, its module found from the current folder too.

    A console script's path lacks the folder it runs in, which `python -m`
    has; a service's own modules are usually there (uvicorn and celery look
    there too). `what` names the object in errors ("the app", "the fold").
    """
    module_name, _, attribute = reference.partition(":")
    if not module_name or not attribute:
        raise InputError(f"name {what} as module:attribute, not {reference!r}")
    if os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        return getattr(importlib.import_module(module_name), attribute)
    except Exception as error:  # the user's module may fail in any way as it loads
        raise InputError(
            f"cannot load {what} {reference!r}: {type(error).__name__}: {error}"
        ) from error
