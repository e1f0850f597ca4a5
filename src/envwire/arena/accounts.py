"""Names, passwords and tokens of arena accounts.

Passwords and admin tokens are random (``secrets.token_urlsafe(32)``, 256 bits) and stored only
as salted scrypt hashes: ``scrypt$<n>$<r>$<p>$<salt>$<hash>`` (base64), so the parameters can
change later without breaking stored hashes. Comparisons use ``hmac.compare_digest``.

Hashes carried over from an AISysProj server (``sha256:<hex>``, unsalted: that server made every
password itself, with 256 bits of entropy) are verified too; the arena stores such a password
again as a scrypt hash once it matched (:func:`needs_rehash`).

scrypt costs tens of milliseconds by design, too much for every act request. A
:class:`Verifier` therefore remembers, per account, a keyed digest (HMAC under a random
per-process key) of the last password that matched the stored hash; a later request is checked
against that digest in constant time, and the cache entry is dropped as soon as the stored hash
changes (a password reset). The plaintext password is never kept.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import re
import secrets
import threading

from envwire.errors import InvalidArgumentError

__all__ = [
    "IMPORTED_NAME_MAX",
    "NAME_PATTERN",
    "Verifier",
    "check_imported_name",
    "check_name",
    "hash_secret",
    "needs_rehash",
    "new_secret",
    "verify_secret",
]

#: Arena env and agent names: they appear in URLs and config files.
NAME_PATTERN = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")

_N, _R, _P = 1 << 14, 8, 1
_MAXMEM = 64 << 20


def check_name(name: str, what: str) -> str:
    """``name`` if it is a valid env or agent name.

    Raises:
        InvalidArgumentError: it is not (1-64 of letters, digits, '.', '_', '-'; starting with a
            letter or digit).
    """
    if not NAME_PATTERN.match(name):
        raise InvalidArgumentError(
            f"{what} name {name!r} is not valid: use 1-64 letters, digits, '.', '_' or '-', "
            "starting with a letter or digit"
        )
    return name


#: The longest env, agent or group name taken from another server.
IMPORTED_NAME_MAX = 128


def check_imported_name(name: str, what: str) -> str:
    """``name`` if it can name an env, agent or group carried over from an AISysProj server.

    That server took names envwire's own commands do not make (spaces, brackets, parentheses,
    anything after a first allowed character); envwire serves any name it can put in a URL
    path segment: 1-128 printable characters, no ``/`` or ``\\``, not ``.`` or ``..``, no
    space at either end.

    Raises:
        InvalidArgumentError: it is not such a name.
    """
    if (
        not 0 < len(name) <= IMPORTED_NAME_MAX
        or not name.isprintable()
        or "/" in name
        or "\\" in name
        or name in (".", "..")
        or name != name.strip()
    ):
        raise InvalidArgumentError(
            f"{what} name {name!r} cannot be served: use 1-{IMPORTED_NAME_MAX} printable "
            "characters without '/', '\\' or spaces at either end"
        )
    return name


def needs_rehash(stored: str) -> bool:
    """Whether a stored hash is of an older scheme, to be replaced by a scrypt hash."""
    return stored.startswith("sha256:")


def new_secret() -> str:
    """A fresh random password or token."""
    return secrets.token_urlsafe(32)


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode("ascii")


def hash_secret(secret: str) -> str:
    """A salted scrypt hash of ``secret``, in the self-describing stored form."""
    salt = secrets.token_bytes(16)
    digest = hashlib.scrypt(secret.encode(), salt=salt, n=_N, r=_R, p=_P, maxmem=_MAXMEM)
    return f"scrypt${_N}${_R}${_P}${_b64(salt)}${_b64(digest)}"


def verify_secret(secret: str, stored: str) -> bool:
    """Whether ``secret`` matches the stored hash (False for a malformed stored hash)."""
    if stored.startswith("sha256:"):
        digest = hashlib.sha256(secret.encode()).hexdigest()
        return hmac.compare_digest(digest.encode(), stored[len("sha256:") :].encode())
    try:
        scheme, n, r, p, salt, digest = stored.split("$")
        if scheme != "scrypt":
            return False
        expected = base64.b64decode(digest)
        got = hashlib.scrypt(
            secret.encode(),
            salt=base64.b64decode(salt),
            n=int(n),
            r=int(r),
            p=int(p),
            maxmem=_MAXMEM,
            dklen=len(expected),
        )
    except (ValueError, TypeError):
        return False
    return hmac.compare_digest(got, expected)


class Verifier:
    """Checks passwords against stored hashes, remembering recent matches (module docstring)."""

    def __init__(self, capacity: int = 10_000) -> None:
        self._key = secrets.token_bytes(32)
        self._matched: dict[tuple[str, ...], tuple[str, bytes]] = {}
        self._capacity = capacity
        self._lock = threading.Lock()

    def _digest(self, secret: str) -> bytes:
        return hmac.new(self._key, secret.encode(), hashlib.sha256).digest()

    def verify(self, account: tuple[str, ...], secret: str, stored: str) -> bool:
        """Whether ``secret`` is the password of ``account`` (whose stored hash is ``stored``)."""
        digest = self._digest(secret)
        with self._lock:
            known = self._matched.get(account)
        if known is not None and known[0] == stored:
            return hmac.compare_digest(known[1], digest)
        if not verify_secret(secret, stored):
            return False
        with self._lock:
            if len(self._matched) >= self._capacity:
                self._matched.clear()
            self._matched[account] = (stored, digest)
        return True
