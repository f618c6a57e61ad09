"""The Array API's creation and manipulation functions that kiln-core has no op of its own for,
composed from its ops (reshape, permute, concat, index_select, where, arange, comparisons):
``eye``, ``linspace``, ``tril``, ``triu``, ``expand_dims``, ``squeeze``, ``flip``,
``broadcast_to``, ``stack``, ``moveaxis``. Each is a few kernel launches; none reads back."""

from __future__ import annotations

import numpy as _np


def _kiln():
    import kiln

    return kiln


def _t(x):
    k = _kiln()
    return x if isinstance(x, k.Tensor) else k.asarray(x)


def _axis(axis, ndim, what):
    if not isinstance(axis, int) or isinstance(axis, bool):
        raise TypeError(f"{what}: an axis must be an int, got {axis!r}")
    if not -ndim <= axis < ndim:
        raise IndexError(f"{what}: axis {axis} is out of range for {ndim} dimensions")
    return axis % ndim


def _axes(axis, ndim, what):
    axes = axis if isinstance(axis, tuple) else (axis,)
    out = [_axis(a, ndim, what) for a in axes]
    if len(set(out)) != len(out):
        raise ValueError(f"{what}: repeated axis in {axis!r}")
    return out


def expand_dims(x, /, axis=0):
    """``x`` with a new axis of size 1 at ``axis`` (in ``[-x.ndim - 1, x.ndim]``)."""
    x = _t(x)
    a = _axis(axis, x.ndim + 1, "expand_dims")
    shape = list(x.shape)
    shape.insert(a, 1)
    return _kiln().reshape(x, tuple(shape))


def squeeze(x, /, axis):
    """``x`` without the size-1 axes ``axis`` (an int or a tuple); ValueError for an axis whose
    size is not 1."""
    x = _t(x)
    axes = _axes(axis, x.ndim, "squeeze")
    for a in axes:
        if x.shape[a] != 1:
            raise ValueError(f"squeeze: axis {a} has size {x.shape[a]}, not 1")
    return _kiln().reshape(x, tuple(d for i, d in enumerate(x.shape) if i not in axes))


def flip(x, /, *, axis=None):
    """``x`` with the order of elements reversed along ``axis`` (every axis when None)."""
    k = _kiln()
    x = _t(x)
    axes = range(x.ndim) if axis is None else _axes(axis, x.ndim, "flip")
    out = x
    for a in axes:
        n = x.shape[a]
        if n > 1:
            out = k.index_select(out, a, k.arange(n - 1, -1, -1, dtype="int32"))
    return k.copy(x) if out is x else out


def moveaxis(x, source, destination, /):
    """``x`` with the axes ``source`` moved to ``destination`` (ints or tuples of one length),
    the other axes keeping their order."""
    x = _t(x)
    src = _axes(source, x.ndim, "moveaxis")
    dst = _axes(destination, x.ndim, "moveaxis")
    if len(src) != len(dst):
        raise ValueError("moveaxis: source and destination need the same number of axes")
    order = [a for a in range(x.ndim) if a not in src]
    for d, s in sorted(zip(dst, src)):
        order.insert(d, s)
    return _kiln().permute_dims(x, tuple(order))


def broadcast_to(x, /, shape):
    """``x`` broadcast to ``shape`` (numpy's rules; a copy, bit-exact: -0 and NaN payloads kept)."""
    k = _kiln()
    x = _t(x)
    shape = tuple(int(d) for d in shape)
    try:
        ok = _np.broadcast_shapes(x.shape, shape) == shape
    except ValueError:
        ok = False
    if not ok:
        raise ValueError(f"broadcast_to: cannot broadcast shape {x.shape} to {shape}")
    return k.where(k.ones(shape, dtype="uint32"), x, x)


def stack(arrays, /, *, axis=0):
    """The arrays (one shape, one dtype) joined along a new axis ``axis``."""
    arrays = [_t(a) for a in arrays]
    if not arrays:
        raise ValueError("stack needs at least one array")
    a = _axis(axis, arrays[0].ndim + 1, "stack")
    return _kiln().concat([expand_dims(t, axis=a) for t in arrays], axis=a)


def _tri_mask(x, k, lower):
    kl = _kiln()
    n, m = x.shape[-2], x.shape[-1]
    rows = kl.reshape(kl.arange(n, dtype="int32"), (n, 1))
    cols = kl.reshape(kl.arange(m, dtype="int32"), (1, m))
    d = kl.subtract(cols, rows)
    return kl.less_equal(d, k) if lower else kl.greater_equal(d, k)


def tril(x, /, *, k=0):
    """The lower triangle of the last two axes of ``x``: elements with ``col - row <= k`` kept,
    the rest 0."""
    x = _t(x)
    if x.ndim < 2:
        raise ValueError("tril needs at least two dimensions")
    return _kiln().where(_tri_mask(x, k, True), x, 0)


def triu(x, /, *, k=0):
    """The upper triangle of the last two axes of ``x``: elements with ``col - row >= k`` kept,
    the rest 0."""
    x = _t(x)
    if x.ndim < 2:
        raise ValueError("triu needs at least two dimensions")
    return _kiln().where(_tri_mask(x, k, False), x, 0)


def eye(n_rows, n_cols=None, /, *, k=0, dtype=None, device=None):
    """A ``n_rows x n_cols`` array with ones on the ``k``-th diagonal, zeros elsewhere (float32
    unless ``dtype`` says otherwise)."""
    kl = _kiln()
    n_cols = n_rows if n_cols is None else n_cols
    dtype = kl.float32 if dtype is None else dtype
    z = kl.zeros((n_rows, n_cols), dtype=dtype, device=device)
    if n_rows == 0 or n_cols == 0:
        return z
    rows = kl.reshape(kl.arange(n_rows, dtype="int32", device=device), (n_rows, 1))
    cols = kl.reshape(kl.arange(n_cols, dtype="int32", device=device), (1, n_cols))
    return kl.where(kl.equal(kl.subtract(cols, rows), k), 1, z)


def linspace(start, stop, /, num, *, dtype=None, device=None, endpoint=True):
    """``num`` evenly spaced values from ``start`` to ``stop`` (``stop`` included when
    ``endpoint``), as numpy's ``linspace`` computes them in float64, rounded once to ``dtype``
    (float32 by default). The values are computed on the host and uploaded."""
    kl = _kiln()
    if isinstance(start, complex) or isinstance(stop, complex):
        raise TypeError("linspace: Kiln has no complex dtype")
    if int(num) != num or num < 0:
        raise ValueError(f"linspace: num must be a non-negative integer, got {num!r}")
    dtype = kl.float32 if dtype is None else _np.dtype(dtype)
    v = _np.linspace(float(start), float(stop), int(num), endpoint=endpoint)
    return kl.asarray(v.astype(dtype), device=device)


def broadcast_arrays(*arrays):
    """The arrays broadcast against each other (numpy's rules), as a list."""
    arrays = [_t(a) for a in arrays]
    try:
        shape = _np.broadcast_shapes(*(a.shape for a in arrays))
    except ValueError as e:
        raise ValueError(f"broadcast_arrays: {e}") from None
    return [a if a.shape == shape else broadcast_to(a, shape) for a in arrays]


def unstack(x, /, *, axis=0):
    """The slices of ``x`` along ``axis``, as a tuple of arrays without that axis."""
    k = _kiln()
    x = _t(x)
    a = _axis(axis, x.ndim, "unstack")
    return tuple(squeeze(k.slice(x, a, i, i + 1), axis=a) for i in range(x.shape[a]))


def meshgrid(*arrays, indexing="xy"):
    """Coordinate grids from 1-D arrays (``indexing="xy"``: the first two axes swapped, as
    numpy's default), as a list."""
    if indexing not in ("xy", "ij"):
        raise ValueError(f"meshgrid: indexing must be 'xy' or 'ij', got {indexing!r}")
    arrays = [_t(a) for a in arrays]
    for a in arrays:
        if a.ndim != 1:
            raise ValueError(f"meshgrid takes 1-D arrays, got shape {a.shape}")
    n = len(arrays)
    shape = [a.shape[0] for a in arrays]
    if indexing == "xy" and n > 1:
        shape[0], shape[1] = shape[1], shape[0]
    out = []
    for i, a in enumerate(arrays):
        ax = 1 - i if indexing == "xy" and n > 1 and i < 2 else i
        s = [1] * n
        s[ax] = a.shape[0]
        out.append(broadcast_to(_kiln().reshape(a, tuple(s)), tuple(shape)))
    return out


def roll(x, /, shift, *, axis=None):
    """``x`` with its elements shifted by ``shift`` along ``axis`` (an int or a tuple, with a
    tuple of shifts), wrapping around; over the flattened array when ``axis`` is None."""
    k = _kiln()
    x = _t(x)
    if axis is None:
        if not isinstance(shift, int):
            raise TypeError("roll: with axis=None the shift must be an int")
        return k.reshape(roll(k.reshape(x, (-1,)), shift, axis=0), x.shape)
    axes = axis if isinstance(axis, tuple) else (axis,)
    shifts = shift if isinstance(shift, tuple) else (shift,) * len(axes)
    if len(shifts) != len(axes):
        raise ValueError("roll: shift and axis need the same length")
    out = x
    for s, a in zip(shifts, axes):
        a = _axis(a, x.ndim, "roll")
        n = x.shape[a]
        if n > 1 and s % n:
            # Source index of each output position: (i - shift) mod n, by kiln-core's remainder.
            idx = k.remainder(k.subtract(k.arange(n, dtype="int32"), s % n), n)
            out = k.index_select(out, a, idx)
    return k.copy(x) if out is x else out


def tile(x, repetitions, /):
    """``x`` repeated ``repetitions[i]`` times along each axis (numpy's ``tile``: the shorter of
    the two is padded with leading ones)."""
    k = _kiln()
    x = _t(x)
    reps = tuple(int(r) for r in repetitions)
    if any(r < 0 for r in reps):
        raise ValueError("tile: repetitions must be non-negative")
    nd = max(len(reps), x.ndim)
    reps = (1,) * (nd - len(reps)) + reps
    out = k.reshape(x, (1,) * (nd - x.ndim) + tuple(x.shape))
    for a, r in enumerate(reps):
        if r == 0:
            out = k.slice(out, a, 0, 0)
        elif r > 1:
            out = k.concat([out] * r, axis=a)
    return k.copy(x) if out is x else out


def repeat(x, repeats, /, *, axis=None):
    """Each element of ``x`` repeated along ``axis`` (the flattened array when None):
    ``repeats`` an int or one count per element of that axis (a sequence or an array, which is
    read back: the output shape depends on it)."""
    k = _kiln()
    x = _t(x)
    if axis is None:
        x, axis = k.reshape(x, (-1,)), 0
    a = _axis(axis, x.ndim, "repeat")
    n = x.shape[a]
    if isinstance(repeats, int):
        if repeats < 0:
            raise ValueError("repeat: repeats must be non-negative")
        idx = k.floor_divide(k.arange(n * repeats, dtype="int32"), repeats) if repeats else None
    else:
        r = _np.asarray(repeats.numpy() if isinstance(repeats, k.Tensor) else repeats).astype(_np.int64)
        if r.shape in ((), (1,)):  # one count broadcasts along the axis (numpy's rule), empty axes too
            r = _np.broadcast_to(r.reshape(()), (n,))
        if r.shape != (n,) or (r < 0).any():
            raise ValueError(f"repeat: repeats must be {n} non-negative counts, got {r.tolist()}")
        idx = k.asarray(_np.repeat(_np.arange(n, dtype=_np.int32), r)) if r.sum() else None
    if idx is None:
        return k.slice(x, a, 0, 0)
    return k.index_select(x, a, idx)
