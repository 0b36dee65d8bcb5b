"""The status line an action leaves: signed by the running console, so that a page
shows only what the console itself said.

An action redirects to its page with `?message=TEXT&signed=MAC`. A link carrying a
message of someone else's ("Session expired: log in at ...") has no MAC the
console made, and the page shows nothing. The key is the process's own, made
when the console is: a restart forgets the messages, which are of the moment.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import secrets
from collections.abc import Mapping
from urllib.parse import urlencode


class Flash:
    """Signs the messages of one console and tells them from any other text."""

    def __init__(self) -> None:
        self._key = secrets.token_bytes(32)

    def query(self, message: str) -> str:
        """The query a redirect carries `message` in, signed."""
        return urlencode({"message": message, "signed": self._mac(message)})

    def said(self, params: Mapping[str, str]) -> str | None:
        """The message in `params` if this console signed it; None otherwise."""
        message, mac = params.get("message"), params.get("signed")
        if message is None or mac is None:
            return None
        return message if hmac.compare_digest(mac.encode(), self._mac(message).encode()) else None

    def _mac(self, message: str) -> str:
        digest = hmac.new(self._key, message.encode(), hashlib.sha256).digest()
        return base64.urlsafe_b64encode(digest).rstrip(b"=").decode()
