"""The operations layer: every query and action of the command line and the console.

Each function takes a store (and an `App` where it needs the service's
definitions) and returns plain data; the shells only parse and print.
"""

from .errors import InputError, NotFound, OperationError, Problems

__all__ = ["InputError", "NotFound", "OperationError", "Problems"]
