"""The token set: the file format, reloads that keep the old tokens on a bad edit, checks."""

from __future__ import annotations

import base64
import logging
from pathlib import Path

import pytest

from envwire.errors import ConfigError
from envwire.server.security.tokens import TokenSet, presented_token

GOOD = "tok-0123456789abcdef"
OTHER = "tok-fedcba9876543210"


def write(path: Path, text: str) -> Path:
    path.write_text(text)
    path.chmod(0o600)
    return path


def test_file_format_comments_and_blank_lines(tmp_path: Path) -> None:
    path = write(tmp_path / "tokens", f"# the team's tokens\n\n  {GOOD}  \n#{OTHER}\n")
    tokens = TokenSet(path)
    assert len(tokens) == 1
    assert tokens.check(GOOD)
    assert not tokens.check(OTHER)  # commented out
    assert not tokens.check(GOOD + "x")
    assert not tokens.check("")
    assert not tokens.check(None)


@pytest.mark.parametrize(
    ("text", "problem"),
    [("", "holds no token"), ("# only a comment\n", "holds no token"), ("short\n", "line 1")],
)
def test_bad_files_are_refused_without_echoing_tokens(
    tmp_path: Path, text: str, problem: str
) -> None:
    path = write(tmp_path / "tokens", text)
    with pytest.raises(ConfigError, match=problem) as info:
        TokenSet(path)
    assert "short" not in str(info.value)


def test_a_token_with_a_space_is_refused(tmp_path: Path) -> None:
    path = write(tmp_path / "tokens", f"{GOOD}\nhas a space inside it\n")
    with pytest.raises(ConfigError, match="line 2"):
        TokenSet(path)


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="cannot read token file"):
        TokenSet(tmp_path / "nope")


def test_reload_swaps_tokens_and_keeps_them_on_a_bad_edit(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    path = write(tmp_path / "tokens", GOOD + "\n")
    tokens = TokenSet(path)
    write(path, OTHER + "\n")
    assert tokens.reload()
    assert tokens.check(OTHER) and not tokens.check(GOOD)
    write(path, "")  # a bad edit: the server must not end up accepting nothing
    with caplog.at_level(logging.ERROR, "envwire.security"):
        assert not tokens.reload()
    assert tokens.check(OTHER)
    assert "previous tokens stay in force" in caplog.text
    path.unlink()
    assert not tokens.reload()
    assert tokens.check(OTHER)


def test_tokens_are_never_logged(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    path = write(tmp_path / "tokens", GOOD + "\n")
    path.chmod(0o644)
    with caplog.at_level(logging.DEBUG, "envwire.security"):
        tokens = TokenSet(path)
        tokens.reload()
        tokens.check(OTHER)
    assert "readable by other users" in caplog.text
    assert GOOD not in caplog.text and OTHER not in caplog.text


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


def test_of_and_authorization_headers() -> None:
    tokens = TokenSet.of([GOOD, OTHER])
    assert tokens.check_header(f"Bearer {GOOD}")
    assert tokens.check_header(f"bearer   {OTHER} ")
    assert tokens.check_header(basic("envwire", GOOD))  # credentials from a URL
    assert tokens.check_header(basic("", OTHER))
    assert not tokens.check_header(basic(GOOD, "x"))  # the token is the password
    assert not tokens.check_header(f"Basic {GOOD}")  # not base64 of user:password
    assert not tokens.check_header(f"Digest {GOOD}")
    assert not tokens.check_header(GOOD)
    assert not tokens.check_header(None)
    assert presented_token("Bearer ") is None
    assert presented_token("Basic !!!") is None
    with pytest.raises(ConfigError):
        TokenSet.of([])
    with pytest.raises(ConfigError):
        TokenSet.of(["x y z w v u"])


def test_check_compares_every_stored_token(monkeypatch: pytest.MonkeyPatch) -> None:
    """No early exit: a match on the first token costs as many comparisons as no match."""
    import envwire.server.security.tokens as module

    calls: list[int] = []
    real = module.hmac.compare_digest

    def counting(a: bytes, b: bytes) -> bool:
        calls.append(1)
        return real(a, b)

    tokens = TokenSet.of([GOOD, OTHER, "tok-third-token-000"])
    monkeypatch.setattr(module.hmac, "compare_digest", counting)
    assert tokens.check(GOOD)
    matched = len(calls)
    calls.clear()
    assert not tokens.check("tok-nothing-matches")
    assert matched == len(calls) == 3
