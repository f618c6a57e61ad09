"""The Array API's searching, sorting and set functions over kiln-core's ops (the sort is a
stable bitonic network on the GPU): ``sort``, ``argsort``, ``searchsorted``, ``count_nonzero``,
``nonzero``, ``unique_all``, ``unique_counts``, ``unique_inverse``, ``unique_values`` and
``isin``. ``sort``, ``argsort``, ``count_nonzero``, ``nonzero`` and ``unique_values`` are the
extension's own functions; this module adds the two-operand promotion of ``searchsorted`` and
``isin`` and the named tuples of ``unique_*``.

``nonzero`` and ``unique_*`` have data-dependent output sizes: the count is read back to the
host (one synchronisation), the rest stays on the GPU.
"""

from __future__ import annotations

from typing import NamedTuple

from . import _kiln
from ._array_api import result_type
from ._errors import ShapeError


class UniqueAllResult(NamedTuple):
    values: object
    indices: object
    inverse_indices: object
    counts: object


class UniqueCountsResult(NamedTuple):
    values: object
    counts: object


class UniqueInverseResult(NamedTuple):
    values: object
    inverse_indices: object


def _common(x1, x2, what):
    """Both operands as tensors of their promoted dtype (Python scalars join the array's)."""
    if not isinstance(x1, _kiln.Tensor) and not isinstance(x2, _kiln.Tensor):
        x1 = _kiln.asarray(x1)
    if not isinstance(x1, _kiln.Tensor):
        x1 = _kiln.asarray(x1, dtype=x2.dtype)
    if not isinstance(x2, _kiln.Tensor):
        x2 = _kiln.asarray(x2, dtype=x1.dtype)
    dt = result_type(x1, x2)
    return (x1 if x1.dtype == dt else x1.astype(dt)), (x2 if x2.dtype == dt else x2.astype(dt))


def searchsorted(x1, x2, /, *, side="left", sorter=None):
    """numpy/Array API ``searchsorted``: for each element of ``x2``, the int32 index at which
    it would be inserted into the 1-D ``x1`` (sorted ascending, or put in order by the indices
    ``sorter``) to keep it sorted; ``side="left"`` puts it before equal elements, ``"right"``
    after. NaNs sort last and -0 equals +0, as in ``sort``."""
    if side not in ("left", "right"):
        raise ValueError(f"searchsorted: side must be 'left' or 'right', got {side!r}")
    if not isinstance(x1, _kiln.Tensor):
        x1 = _kiln.asarray(x1)
    if sorter is not None:
        if x1.ndim != 1:
            raise ShapeError(f"searchsorted: x1 must be 1-D, got shape {x1.shape}")
        x1 = _kiln.take(x1, sorter, axis=0)
    x1, x2 = _common(x1, x2, "searchsorted")
    return _kiln._searchsorted(x1, x2, side == "right")


def isin(x1, x2, /, *, invert=False):
    """Whether each element of ``x1`` equals an element of ``x2`` (bool, ``x1``'s shape), or
    with ``invert`` whether it equals none. -0 equals +0; NaN equals nothing, so it is never
    found."""
    x1, x2 = _common(x1, x2, "isin")
    return _kiln._isin(x1, x2, invert=bool(invert))


def unique_all(x, /):
    """The distinct values of ``x`` (flattened, sorted) with the index of each one's first
    occurrence, the index into ``values`` of every element (``x``'s shape) and the counts (int32).
    -0 and +0 are one value; every NaN is distinct (count 1 each), as the standard says."""
    return UniqueAllResult(*_kiln._unique_all(x))


def unique_counts(x, /):
    """``unique_all``'s values and counts."""
    u = _kiln._unique_all(x)
    return UniqueCountsResult(u[0], u[3])


def unique_inverse(x, /):
    """``unique_all``'s values and inverse indices (``x``'s shape)."""
    u = _kiln._unique_all(x)
    return UniqueInverseResult(u[0], u[2])
