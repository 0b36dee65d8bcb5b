"""What an operation refuses or finds, for the shells to show in one line.

::

    OperationError
    ├── InputError (ValueError)    a name, URL, argument or file the operation cannot use
    │   └── NotFound (LookupError) a stream, event, projection or saga that does not exist
    └── Problems                   the operation ran and found something wrong
"""

from __future__ import annotations


class OperationError(Exception):
    """Base of what the operations layer raises on purpose."""


class InputError(OperationError, ValueError):
    """The caller named or gave something the operation cannot use."""


class NotFound(InputError, LookupError):
    """What the caller named does not exist."""


class Problems(OperationError):
    """The operation ran, and what it checked or tried was not all well."""
