"""The kinds of value a setting takes: each checks a value from a config file or a flag, and
says what it expects in the words an error message and the settings table use.

A kind's :meth:`~Kind.check` takes what TOML gives (a number, a string, a bool, a list) and
returns the value the server uses, or raises :class:`ValueError` saying what it expects; the
loader turns that into one :class:`~envwire.errors.ConfigError` naming the key and where it came
from. :meth:`~Kind.parse` reads a command-line word first (numbers from text, ``off``/``none``),
then checks it the same way, so a flag and a key can never disagree on what is valid.
"""

from __future__ import annotations

import math
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TypeAlias

__all__ = [
    "OFF_WORDS",
    "Choice",
    "Count",
    "Flag",
    "Fraction",
    "Kind",
    "Names",
    "Number",
    "Port",
    "Seconds",
    "Text",
]

#: Words that turn an optional setting off (``none`` in a file, ``off`` on the command line).
OFF_WORDS = ("off", "none", "no")

Value: TypeAlias = str | int | float | bool | tuple[str, ...] | None


def _is_off(value: object) -> bool:
    return isinstance(value, str) and value.strip().lower() in OFF_WORDS


def _number(value: object) -> float:
    """A number (bools are not numbers, nor is text: a flag's word is read by ``parse``)."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError
    return float(value)


def _word(text: str) -> object:
    """A command-line word as the value a config file would hold: a number when it reads as
    one, else the word."""
    for kind in (int, float):
        try:
            return kind(text.strip())
        except ValueError:
            continue
    return text


class Kind:
    """What one setting accepts."""

    @property
    def expects(self) -> str:
        """What the setting expects, as an error message and the settings table say it."""
        return "a value"

    @property
    def metavar(self) -> str | None:
        """The placeholder of its flag's value in ``--help`` (None: a flag without a value)."""
        return "VALUE"

    def check(self, value: object) -> Value:
        """The value the server uses.

        Raises:
            ValueError: ``value`` is not what the setting expects.
        """
        raise NotImplementedError

    def parse(self, text: str) -> Value:
        """A command-line word, checked as :meth:`check` checks a file's value (words that
        read as numbers are numbers).

        Raises:
            ValueError: as :meth:`check`.
        """
        return self.check(_word(text))

    def show(self, value: Value) -> str:
        """A value as the settings table and ``--help`` show it."""
        if value is None:
            return "off"
        if isinstance(value, bool):
            return "true" if value else "false"
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        if isinstance(value, tuple):
            return "[" + ", ".join(value) + "]"
        return str(value)


@dataclass(frozen=True, slots=True)
class Seconds(Kind):
    """A positive, finite number of seconds; ``optional`` ones take ``none`` (no bound);
    ``auto`` ones take ``auto`` (a value the server derives, described by the setting)."""

    optional: bool = False
    auto: bool = False

    @property
    def expects(self) -> str:
        words = ["a number of seconds > 0"] + ["none"] * self.optional + ["auto"] * self.auto
        return ", or ".join(words) if len(words) < 3 else f"{words[0]}, none or auto"

    @property
    def metavar(self) -> str | None:
        return "SECONDS"

    def check(self, value: object) -> Value:
        if self.optional and (value is None or _is_off(value)):
            return None
        if self.auto and isinstance(value, str) and value.strip().lower() == "auto":
            return "auto"
        seconds = _number(value)
        if not (seconds > 0 and math.isfinite(seconds)):
            raise ValueError
        return seconds


@dataclass(frozen=True, slots=True)
class Count(Kind):
    """A whole number of at least ``minimum``; ``optional`` ones take ``none`` (no bound);
    ``auto`` ones take ``auto`` (a value the server derives, described by the setting)."""

    minimum: int = 0
    optional: bool = False
    auto: bool = False

    @property
    def expects(self) -> str:
        words = [f"an integer >= {self.minimum}"]
        words += ["none"] * self.optional + ["auto"] * self.auto
        return ", or ".join(words) if len(words) < 3 else f"{words[0]}, none or auto"

    @property
    def metavar(self) -> str | None:
        return "N"

    def check(self, value: object) -> Value:
        if self.optional and (value is None or _is_off(value)):
            return None
        if self.auto and isinstance(value, str) and value.strip().lower() == "auto":
            return "auto"
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise ValueError
        if isinstance(value, float) and not value.is_integer():
            raise ValueError
        number = int(value)
        if number < self.minimum:
            raise ValueError
        return number


@dataclass(frozen=True, slots=True)
class Number(Kind):
    """A number from ``minimum`` to ``maximum``, in ``unit`` (for the help text)."""

    minimum: float = 0.0
    maximum: float = math.inf
    unit: str = ""

    @property
    def expects(self) -> str:
        unit = f" {self.unit}" if self.unit else ""
        low, high = Kind.show(self, self.minimum), Kind.show(self, self.maximum)
        return f"a number of{unit} from {low} to {high}"

    @property
    def metavar(self) -> str | None:
        return self.unit.upper() or "X"

    def check(self, value: object) -> Value:
        number = _number(value)
        if not self.minimum <= number <= self.maximum:
            raise ValueError
        return number


@dataclass(frozen=True, slots=True)
class Fraction(Kind):
    """A number from 0 to 1."""

    @property
    def expects(self) -> str:
        return "a number from 0 to 1"

    @property
    def metavar(self) -> str | None:
        return "P"

    def check(self, value: object) -> Value:
        number = _number(value)
        if not 0.0 <= number <= 1.0:
            raise ValueError
        return number


@dataclass(frozen=True, slots=True)
class Port(Kind):
    """A TCP port (0 picks a free one), or ``off`` for a listener that is not started."""

    @property
    def expects(self) -> str:
        return "a port number from 0 to 65535, or off"

    @property
    def metavar(self) -> str | None:
        return "PORT"

    def check(self, value: object) -> Value:
        if value is None or value is False or _is_off(value):
            return None
        number = Count().check(value)
        assert isinstance(number, int)
        if number > 65535:
            raise ValueError
        return number


@dataclass(frozen=True, slots=True)
class Choice(Kind):
    """One of a few words."""

    choices: tuple[str, ...] = ()
    optional: bool = False

    @property
    def expects(self) -> str:
        words = [repr(c) for c in self.choices]
        return f"one of {', '.join(words[:-1])} or {words[-1]}" if len(words) > 1 else words[0]

    @property
    def metavar(self) -> str | None:
        return "{" + ",".join(self.choices) + "}"

    def parse(self, text: str) -> Value:
        return self.check(text)  # a word, even one that reads as a number

    def check(self, value: object) -> Value:
        if self.optional and value is None:
            return None
        if not isinstance(value, str) or value not in self.choices:
            raise ValueError
        return value


@dataclass(frozen=True, slots=True)
class Flag(Kind):
    """True or false; on the command line, a flag without a value that turns it on."""

    @property
    def expects(self) -> str:
        return "true or false"

    @property
    def metavar(self) -> str | None:
        return None

    def check(self, value: object) -> Value:
        if not isinstance(value, bool):
            raise ValueError
        return value


@dataclass(frozen=True, slots=True)
class Text(Kind):
    """A non-empty string (a host, a path, a URL); ``optional`` ones may be left unset."""

    what: str = "a string"
    optional: bool = True

    @property
    def expects(self) -> str:
        return f"{self.what}"

    @property
    def metavar(self) -> str | None:
        return self.what.removeprefix("a ").removeprefix("an ").upper().replace(" ", "_")

    def parse(self, text: str) -> Value:
        return self.check(text)  # a word, even one that reads as a number

    def check(self, value: object) -> Value:
        if value is None and self.optional:
            return None
        if isinstance(value, os.PathLike):  # a path given in code
            value = os.fspath(value)
        if not isinstance(value, str) or not value.strip() or len(value) > 4096:
            raise ValueError
        if any(ord(c) < 32 or ord(c) == 127 for c in value):  # no control characters
            raise ValueError
        return value


@dataclass(frozen=True, slots=True)
class Names(Kind):
    """A list of strings (a lone string counts as a list of one); a flag is repeated to give
    several."""

    what: str = "names"

    @property
    def expects(self) -> str:
        return f"a list of {self.what}"

    @property
    def metavar(self) -> str | None:
        return "NAME"

    def parse(self, text: str) -> Value:
        return self.check(text)  # a word, even one that reads as a number

    def check(self, value: object) -> Value:
        if isinstance(value, str):
            value = [value]
        if not isinstance(value, Sequence) or not all(isinstance(v, str) for v in value):
            raise ValueError
        return tuple(value)
