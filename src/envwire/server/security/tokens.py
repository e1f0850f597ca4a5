"""The tokens a server accepts: read from a file, reloaded on demand, checked in constant time.

The token file holds one token per line; blank lines and lines starting with ``#`` are
ignored. A token is 8 to 1024 printable ASCII characters without spaces (it travels in HTTP
headers and gRPC metadata, which allow nothing else). :meth:`TokenSet.reload` re-reads the file
(``envwire serve`` calls it on SIGHUP): a file that has become unreadable, empty or malformed
keeps the previous tokens in force and logs why.

Only SHA-256 digests of the tokens are kept. A presented token is digested and compared with
every stored digest with :func:`hmac.compare_digest`, without stopping at a match, so the time a
check takes tells nothing about the tokens. Tokens are never logged, and error messages name
the file and line, never the token.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import logging
import os
import stat
import threading
from collections.abc import Iterable
from pathlib import Path

from envwire.errors import ConfigError

__all__ = ["MAX_TOKEN", "MIN_TOKEN", "TokenSet", "presented_token"]

log = logging.getLogger("envwire.security")

#: The shortest and longest token accepted (characters).
MIN_TOKEN = 8
MAX_TOKEN = 1024


#: How a token's principal starts (a short digest of it follows).
_PRINCIPAL = "token "


def _digest(token: str | bytes) -> bytes:
    data = token.encode("utf-8", "surrogateescape") if isinstance(token, str) else token
    return hashlib.sha256(data).digest()


def _valid(token: str) -> bool:
    return MIN_TOKEN <= len(token) <= MAX_TOKEN and all(33 <= ord(c) <= 126 for c in token)


def presented_token(header: str | None) -> str | None:
    """The token an ``Authorization`` header value carries: ``Bearer <token>``, or ``Basic``
    with the token as the password (any user name), for clients that can only carry
    credentials in a URL (``ws://envwire:<token>@host:8000``). None for anything else."""
    if not header:
        return None
    scheme, _, value = header.strip().partition(" ")
    value = value.strip()
    if not value:
        return None
    match scheme.lower():
        case "bearer":
            return value
        case "basic":
            try:
                decoded = base64.b64decode(value, validate=True).decode("utf-8")
            except (ValueError, UnicodeDecodeError):
                return None
            _, sep, password = decoded.partition(":")
            return password if sep and password else None
    return None


class TokenSet:
    """The accepted tokens (see the module docstring). Thread-safe.

    Args:
        path: the token file; None for a set given in code (:meth:`of`).

    Raises (from the constructor):
        ConfigError: the file cannot be read, holds a malformed line, or holds no token.
    """

    def __init__(self, path: str | os.PathLike[str] | None) -> None:
        self.path = None if path is None else Path(path)
        self._digests: tuple[bytes, ...] = ()
        self._lock = threading.Lock()
        if self.path is not None:
            self._digests = self._read(self.path)

    @classmethod
    def of(cls, tokens: Iterable[str]) -> TokenSet:
        """A set of the given tokens (no file; :meth:`reload` keeps them).

        Raises:
            ConfigError: a token is malformed, or there is none.
        """
        made = cls(None)
        kept = list(tokens)
        if not kept or not all(_valid(t) for t in kept):
            raise ConfigError(
                f"tokens must be {MIN_TOKEN}-{MAX_TOKEN} printable ASCII characters without "
                "spaces, and there must be at least one"
            )
        made._digests = tuple(_digest(t) for t in kept)
        return made

    def __len__(self) -> int:
        return len(self._digests)

    @staticmethod
    def _read(path: Path) -> tuple[bytes, ...]:
        try:
            text = path.read_text(encoding="utf-8")
            mode = path.stat().st_mode
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read token file {path}: {exc}") from None
        digests = []
        for number, line in enumerate(text.splitlines(), 1):
            token = line.strip()
            if not token or token.startswith("#"):
                continue
            if not _valid(token):
                raise ConfigError(
                    f"token file {path}, line {number}: a token is {MIN_TOKEN}-{MAX_TOKEN} "
                    "printable ASCII characters without spaces"
                )
            digests.append(_digest(token))
        if not digests:
            raise ConfigError(f"token file {path} holds no token")
        if mode & (stat.S_IRWXG | stat.S_IRWXO):
            log.warning("token file %s is readable by other users (chmod 600 it)", path)
        return tuple(digests)

    def reload(self) -> bool:
        """Re-read the file; True when the new tokens are in force.

        A file that cannot be used keeps the old tokens (the reason is logged): a server never
        ends up accepting nothing, or everything, because of a bad edit.
        """
        if self.path is None:
            return False
        try:
            digests = self._read(self.path)
        except ConfigError as exc:
            log.error("%s; the previous tokens stay in force", exc)
            return False
        with self._lock:
            self._digests = digests
        log.warning("token file %s reloaded: %d tokens", self.path, len(digests))
        return True

    def check(self, token: str | bytes | None) -> bool:
        """Whether ``token`` is one of the accepted tokens (constant time in the token)."""
        if token is None:
            return False
        presented = _digest(token)
        found = False
        for stored in self._digests:  # no early exit: every check costs the same
            found |= hmac.compare_digest(presented, stored)
        return found

    def check_header(self, header: str | None) -> bool:
        """Whether an ``Authorization`` header value carries an accepted token."""
        return self.check(presented_token(header))

    def holds(self, principal: str) -> bool:
        """Whether the token :meth:`principal` named ``principal`` is still accepted (after a
        reload took it out, the connections it opened are closed)."""
        if not principal.startswith(_PRINCIPAL):
            return True  # not a token's: an address, which a reload does not concern
        prefix = principal[len(_PRINCIPAL) :]
        return any(stored.hex().startswith(prefix) for stored in self._digests)

    def principal(self, token: str | bytes | None) -> str | None:
        """Who presents ``token``: a short name of it (never the token), or None when it is not
        accepted. A token is a principal: limits per client count by it once it is shown."""
        if not self.check(token):
            return None
        assert token is not None
        return _PRINCIPAL + _digest(token).hex()[:12]
