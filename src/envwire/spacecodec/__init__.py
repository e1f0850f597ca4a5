"""Gymnasium spaces <-> JSON descriptions, samples <-> JSON, and action validation.

Sans-IO: plain data in, plain data out. Three jobs, each a ``functools.singledispatch`` over the
space classes of ``gymnasium.spaces``:

* :func:`describe` / :func:`from_description`: a space as a JSON object. Style ``"envwire"``
  describes every Gymnasium space exactly (``from_description(describe(s)) == s``, dtype, bound
  flags, Dict key order and Text charset order included); style ``"gym-socket"`` keeps the legacy
  forms of the gym-socket protocol for the types it knew and falls back to ``"envwire"`` for the
  others. :func:`from_description` reads both.
* :func:`to_json` / :func:`from_json`: a sample as JSON. Arrays travel as nested lists or as
  ``{"__ndarray__": base64, "dtype", "shape"}`` objects; decoding restores the exact types Gymnasium
  samples have (``np.int64`` for ``Discrete``, ndarrays of the space dtype, tuples, dicts,
  ``GraphInstance``).
* :func:`check`: ``value in space`` with an error that says what is wrong.

Errors: a malformed description is a :class:`~envwire.errors.ProtocolError`; a malformed sample
is an :class:`~envwire.errors.InvalidArgumentError` (callers re-label it); a sample outside its
space is an :class:`~envwire.errors.InvalidActionError`; a space class envwire cannot describe is
a :class:`~envwire.errors.ConfigError`. See ``docs/protocols/spaces.md`` for the wire forms.
"""

from envwire.spacecodec.checks import check, checker
from envwire.spacecodec.descriptions import Style, describe
from envwire.spacecodec.read import from_description
from envwire.spacecodec.samples import Arrays, from_json, is_uint8_array_space, to_json

__all__ = [
    "Arrays",
    "Style",
    "check",
    "checker",
    "describe",
    "from_description",
    "from_json",
    "is_uint8_array_space",
    "to_json",
]
