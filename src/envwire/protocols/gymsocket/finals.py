"""gym-socket: the ``FINAL_OBS`` field of a vector step reply, both ends.

In ``SameStep`` mode Gymnasium's vector info carries the ended copies' last observations as
``final_obs`` (an object array: an array for each ended copy, None for the others) with its
mask ``_final_obs``, and their last steps' infos as ``final_info`` with ``_final_info``.
Typed JSON writes each final observation as base64 inside the info. With the ``FINAL_OBS``
handshake flag a vector step reply ends instead with one more field, after the info:

- ``u8 kind``: 0 (nothing: no copy ended, or the final observations stay in the info JSON,
  where they are not one tensor), or the bits 1 (final observations follow) and 2 (every
  ended copy's final info was empty: ``final_info`` is ``{}`` and ``_final_info`` is the
  same mask, and neither is in the info JSON);
- with bit 1: a string tensor bool[N] (``_final_obs``), then a type 2 tensor batch (u8 2,
  string tensor) of the final observations of the copies it marks, in copy order, whose
  first dimension is their count. ``final_obs`` and ``_final_obs`` are not in the info JSON.

The client puts the keys back where Gymnasium has them, so both forms read as the same info.
"""

from __future__ import annotations

import functools
import math
from typing import Any, Final, NamedTuple

import numpy as np
import numpy.typing as npt

from envwire.errors import ProtocolError
from envwire.messages import FinalsInfo
from envwire.protocols.gymsocket.packets import (
    CODE_BY_DTYPE,
    MAX_FIELD,
    OBS_TENSOR,
    TENSOR_HEADERS,
    U32,
    pack_column,
    unpack_tensor,
)
from envwire.tensor import NDARRAY

__all__ = [
    "FINALS_EMPTY_INFO",
    "FINALS_OBS",
    "NO_FINALS",
    "UsualFinals",
    "merge_finals",
    "read_finals",
    "split_finals",
    "usual_finals",
]

#: The kind bits: final observations follow; the final infos were all empty.
FINALS_OBS: Final = 1
FINALS_EMPTY_INFO: Final = 2
#: The field of a reply without final observations outside the info.
NO_FINALS: Final = b"\x00"
_KINDS: Final = {kind: bytes((kind,)) for kind in (1, 3)}
#: An observation batch's kind (a tensor), before its field.
_TENSOR_FIELD: Final = bytes((OBS_TENSOR,))

_FINAL_OBS, _FINAL_OBS_MASK = "final_obs", "_final_obs"
_FINAL_INFO, _FINAL_INFO_MASK = "final_info", "_final_info"
_BOOL: Final = np.dtype(np.bool_)
_OBJECT: Final = np.dtype(object)
#: The keys of the usual SameStep info where copies ended: nothing but what the field carries.
_USUAL: Final = [_FINAL_OBS, _FINAL_OBS_MASK, _FINAL_INFO, _FINAL_INFO_MASK]
#: The info's first keys when final observations leave it, and the next two when the final
#: infos leave it too (the order in which the client puts them back).
_FIRST: Final = [_FINAL_OBS, _FINAL_OBS_MASK]
_NEXT: Final = [_FINAL_INFO, _FINAL_INFO_MASK]
#: (kind, ``_final_obs``, the batch of final observations, the field's end).
Finals = tuple[int, npt.NDArray[np.bool_], npt.NDArray[Any], int]


def split_finals(infos: dict[str, Any]) -> tuple[dict[str, Any], bytes]:
    """The vector info without what travels in the final field, and that field's bytes.

    The final observations leave the info when ``final_obs`` is an object array whose mask
    ``_final_obs`` (a bool array of the same length) marks arrays of one native tensor dtype
    and one shape, and whose other items are None; the final infos with them when
    ``final_info`` is ``{}`` and ``_final_info`` equals ``_final_obs``. Any other info stays
    whole (the field is :data:`NO_FINALS`). A :class:`~envwire.messages.FinalsInfo` as it
    was made gives its field from its list of final observations.
    """
    if type(infos) is FinalsInfo and (kept := infos.kept()) is not None:
        field = _rows_field(FINALS_OBS | FINALS_EMPTY_INFO, kept[1].tobytes(), kept[0])
        if field is not None:
            return {}, field
    keys = list(infos)
    if keys == _USUAL:
        field = _usual_field(*infos.values())
        if field is not None:
            return {}, field
    if keys[:2] != _FIRST:  # the client puts them first, where Gymnasium's vector env has them
        return infos, NO_FINALS
    final, mask = infos[_FINAL_OBS], infos[_FINAL_OBS_MASK]
    if (
        type(final) is not np.ndarray
        or type(mask) is not np.ndarray
        or final.dtype.kind != "O"
        or mask.dtype != _BOOL
        or final.ndim != 1
        or mask.shape != final.shape
    ):
        return infos, NO_FINALS
    ended = mask.tolist()
    rows = _marked(final, ended)
    if rows is None:
        return infos, NO_FINALS
    kind = FINALS_OBS
    final_info, info_mask = infos.get(_FINAL_INFO), infos.get(_FINAL_INFO_MASK)
    if (
        keys[2:4] == _NEXT
        and type(final_info) is dict
        and not final_info
        and type(info_mask) is np.ndarray
        and info_mask.dtype == _BOOL
        and info_mask.shape == mask.shape
        and info_mask.tolist() == ended
    ):
        kind |= FINALS_EMPTY_INFO
    field = _rows_field(kind, mask.tobytes(), rows)
    if field is None:
        return infos, NO_FINALS
    gone = _FIRST + _NEXT if kind & FINALS_EMPTY_INFO else _FIRST
    return {key: value for key, value in infos.items() if key not in gone}, field


def _usual_field(
    final: object, mask: object, final_info: object, info_mask: object
) -> bytes | None:
    """:func:`split_finals`'s field for the usual SameStep info (its four keys alone: the ended
    copies' final observations, of one native tensor dtype and shape, and their final infos
    all empty), or None for any other, which :func:`split_finals` then reads in full."""
    if (
        type(final) is not NDARRAY
        or type(mask) is not NDARRAY
        or type(info_mask) is not NDARRAY
        or type(final_info) is not dict
        or final_info
        or mask.dtype is not _BOOL
        or info_mask.dtype is not _BOOL
        or final.dtype is not _OBJECT
        or final.ndim != 1
        or mask.shape != final.shape
        or info_mask.shape != final.shape
    ):
        return None
    flags = mask.tobytes()
    if info_mask.tobytes() != flags:
        return None
    rows = _marked(final, flags)
    return None if rows is None else _rows_field(FINALS_OBS | FINALS_EMPTY_INFO, flags, rows)


def _marked(final: npt.NDArray[Any], flags: bytes | list[bool]) -> list[Any] | None:
    """The items of ``final`` that ``flags`` marks, when each of them is an array and every
    other item is None; else None."""
    rows = []
    for item, flag in zip(final.tolist(), flags, strict=True):
        if flag:
            if type(item) is not NDARRAY:
                return None
            rows.append(item)
        elif item is not None:
            return None
    return rows


def _rows_field(kind: int, flags: bytes, rows: list[Any]) -> bytes | None:
    """The final field of ``kind`` with the mask's bytes ``flags`` and the final
    observations ``rows`` (``pack_column`` of the mask and ``pack_tensor(np.stack(rows))``:
    the same bytes without the copy ``np.stack`` makes and its Python-level checks), or None
    unless they are one or more arrays of one native tensor dtype and one shape."""
    if not rows or type(first := rows[0]) is not NDARRAY:
        return None
    dtype, shape = first.dtype, first.shape
    code = CODE_BY_DTYPE.get(dtype)
    if code is None or not dtype.isnative or len(shape) >= 32:
        return None
    for row in rows:
        if type(row) is not NDARRAY or (row.dtype is not dtype and row.dtype != dtype):
            return None
        if row.shape != shape:
            return None
    ndim = len(shape) + 1
    header = TENSOR_HEADERS[ndim].pack(code, ndim, len(rows), *shape)
    data = b"".join([row.tobytes() for row in rows])
    return b"".join(
        (
            _KINDS[kind],
            _mask_head(len(flags)),
            flags,
            _TENSOR_FIELD,
            U32.pack(len(header) + len(data)),
            header,
            data,
        )
    )


def read_finals(
    data: bytes | bytearray | memoryview, pos: int, size: int, num_envs: int
) -> Finals | None:
    """The final field at ``data[pos:size]`` of a reply of ``num_envs`` copies: (kind, mask,
    batch, its end); None while it is incomplete. A kind 0 field has an empty mask and batch.

    Raises:
        ProtocolError: the field cannot be read (an unknown kind, a tensor that is not what
            the field says, a mask that is not one per copy, a batch whose count is not the
            mask's).
    """
    if size <= pos:
        return None
    kind = data[pos]
    if not kind:
        return 0, _NO_MASK, _NO_MASK, pos + 1
    if kind not in (FINALS_OBS, FINALS_OBS | FINALS_EMPTY_INFO):
        raise ProtocolError(f"unknown final observations kind {kind}")
    head = _mask_head(num_envs)
    start = pos + 1 + len(head)
    if size >= start + num_envs and data[pos + 1 : start] == head:  # the usual mask's header
        mask, end = np.frombuffer(data, _BOOL, num_envs, start).copy(), start + num_envs
    else:
        mask_field = _field(data, pos + 1, size)
        if mask_field is None:
            return None
        mask, end = unpack_tensor(data[: mask_field[1]], mask_field[0])
        if mask.dtype != _BOOL or mask.shape != (num_envs,) or end != mask_field[1]:
            raise ProtocolError(f"final observations' mask is {mask.dtype}{list(mask.shape)}")
    if size <= end:
        return None
    if data[end] != OBS_TENSOR:
        raise ProtocolError(f"final observations of type {data[end]} (expected 2, a tensor)")
    batch_field = _field(data, end + 1, size)
    if batch_field is None:
        return None
    batch, stop = unpack_tensor(data[: batch_field[1]], batch_field[0])
    count = len(mask.nonzero()[0])
    if stop != batch_field[1] or not batch.ndim or batch.shape[0] != count:
        raise ProtocolError(f"final observations {list(batch.shape)} for {count} ended copies")
    return kind, mask, batch, stop


class UsualFinals(NamedTuple):
    """The fixed bytes of the usual final field of ``num_envs`` copies (kind 3: the final
    observations of the ended copies as one tensor of ``dtype``, rows of ``shape``, and every
    final info empty), for the client's lean reads: ``before`` comes before the mask's
    ``num_envs`` bytes; ``heads[k]`` between the mask and the data of ``k`` rows, whose
    shape and size are ``shapes[k]`` and ``sizes[k]``."""

    before: bytes
    heads: tuple[bytes, ...]
    shapes: tuple[tuple[int, ...], ...]
    sizes: tuple[int, ...]


def usual_finals(num_envs: int, dtype: np.dtype[Any], shape: tuple[int, ...]) -> UsualFinals | None:
    """The usual final field's fixed bytes (as :func:`split_finals` writes them) for final
    observations of ``dtype`` and ``shape``; None for a dtype or shape it never writes so."""
    if dtype not in CODE_BY_DTYPE or not dtype.isnative or len(shape) >= 32:
        return None
    ndim, code = len(shape) + 1, CODE_BY_DTYPE[dtype]
    row = dtype.itemsize * math.prod(shape)
    heads, shapes, sizes = [], [], []
    for k in range(num_envs + 1):
        header = TENSOR_HEADERS[ndim].pack(code, ndim, k, *shape)
        heads.append(_TENSOR_FIELD + U32.pack(len(header) + k * row) + header)
        shapes.append((k, *shape))
        sizes.append(k * row)
    before = _KINDS[FINALS_OBS | FINALS_EMPTY_INFO] + _mask_head(num_envs)
    return UsualFinals(before, tuple(heads), tuple(shapes), tuple(sizes))


@functools.lru_cache(maxsize=16)
def _mask_head(num_envs: int) -> bytes:
    """The bytes before a mask of ``num_envs`` copies: its field's length and tensor header."""
    return pack_column(np.zeros(num_envs, _BOOL), _BOOL)[: -num_envs or None]


def _field(data: bytes | bytearray | memoryview, pos: int, size: int) -> tuple[int, int] | None:
    """Where a length-prefixed field at ``pos`` begins and ends, None while incomplete."""
    if size < pos + 4:
        return None
    length = U32.unpack_from(data, pos)[0]
    if length > MAX_FIELD:
        raise ProtocolError(f"field of {length} bytes exceeds the {MAX_FIELD}-byte limit")
    end = pos + 4 + length
    return None if size < end else (pos + 4, end)


def merge_finals(
    infos: dict[str, Any], kind: int, mask: npt.NDArray[np.bool_], batch: npt.NDArray[Any]
) -> dict[str, Any]:
    """``infos`` with the final field's keys put back first, as Gymnasium has them (a new
    dict; ``infos`` itself for a kind 0 field)."""
    if not kind:
        return infos
    final = np.empty(len(mask), dtype=object)
    # a batch of scalars' rows as 0-d arrays, as they were sent (iterating gives scalars)
    rows = batch if batch.ndim > 1 else [batch[j, ...] for j in range(len(batch))]
    for i, row in zip(mask.nonzero()[0].tolist(), rows, strict=True):
        final[i] = row
    if kind & FINALS_EMPTY_INFO:
        merged = {
            _FINAL_OBS: final,
            _FINAL_OBS_MASK: mask,
            _FINAL_INFO: {},
            _FINAL_INFO_MASK: mask.copy(),
        }
    else:
        merged = {_FINAL_OBS: final, _FINAL_OBS_MASK: mask}
    if infos:
        merged.update(infos)
    return merged


_NO_MASK: Final = np.zeros(0, _BOOL)
