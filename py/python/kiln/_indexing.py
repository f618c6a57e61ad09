"""``Tensor.__getitem__`` and ``__setitem__``: the Array API standard's (2024.12) indexing, with
numpy's answers.

A key is an int, a slice (any step, negative too, clamped as Python clamps), ``...``, ``None``
(a new axis), a Python bool, an integer array (a ``kiln.Tensor`` of int32/uint32, a numpy array
or a nested sequence of ints), a boolean mask, or a tuple of those. All-integer keys give a 0-d
tensor. Integer arrays (and, once one is present, the plain ints) are broadcast together and
placed as numpy places them: where the first of them was when they are adjacent, in front
otherwise.

``x[key]`` is built from kiln-core's slice, index_select, reshape, permute and elementwise ops
and never writes into ``x``. Where the answer depends on data, the host reads it:

- a boolean mask is read back to the host (numpy ``nonzero``) and becomes integer arrays, whose
  gather then runs on the GPU (the output shape depends on the mask);
- an integer-array index held in a ``kiln.Tensor`` has its minimum and maximum read back (two
  scalars), so that an out-of-range index raises IndexError as numpy does rather than reading 0.

``x[key] = value`` writes into ``x``'s buffer (see ``setitem`` for how).
"""

from __future__ import annotations

import operator

import numpy as _np

_BAD_TYPE = (
    "only integers, slices (`:`), ellipsis (`...`), newaxis (`None`) and integer or boolean arrays are valid indices"
)
_I32_MAX = 2**31 - 1


def _kiln():
    import kiln

    return kiln


def _classify(e):
    """One entry of a key as (kind, value): new, ell, slice, bool, int, arr (integer indices,
    a Tensor or a numpy array) or mask (a numpy bool array of rank >= 1)."""
    k = _kiln()
    if e is None:
        return ("new", None)
    if e is Ellipsis:
        return ("ell", None)
    if isinstance(e, slice):
        return ("slice", e)
    if isinstance(e, (bool, _np.bool_)):
        return ("bool", bool(e))
    if isinstance(e, (int, _np.integer)):
        return ("int", operator.index(e))
    if isinstance(e, k.Tensor):
        kind = e.dtype.kind
        if kind == "b":
            return ("bool", bool(e.item())) if e.ndim == 0 else ("mask", e.numpy())
        if kind in "iu":
            return ("int", int(e.item())) if e.ndim == 0 else ("arr", e)
        raise IndexError(f"{_BAD_TYPE}; got a {e.dtype} tensor")
    if isinstance(e, (list, tuple, _np.ndarray)):  # a tuple inside the key is a sequence, as in numpy
        a = _np.asarray(e)
        if a.dtype == object:
            raise IndexError(f"{_BAD_TYPE}; got {e!r}")
        if a.size == 0 and a.dtype.kind == "f" and not isinstance(e, _np.ndarray):
            a = a.astype(_np.int64)  # `x[[]]`: numpy reads an empty list as an empty int array
        if a.dtype.kind == "b":
            return ("bool", bool(a)) if a.ndim == 0 else ("mask", a)
        if a.dtype.kind in "iu":
            return ("int", int(a)) if a.ndim == 0 else ("arr", a)
        raise IndexError(f"{_BAD_TYPE}; got an array of {a.dtype}")
    try:
        return ("int", operator.index(e))
    except TypeError:
        raise IndexError(f"{_BAD_TYPE}; got {type(e).__name__} {e!r}") from None


def _expand(x, key):
    """The key as one (kind, value) entry per axis of x with its new axes inserted, and that
    shape. Masks become integer arrays (their nonzero), bool scalars an index of length 1 or 0 on
    a new axis of size 1, as numpy treats them."""
    if not isinstance(key, tuple):
        key = (key,)
    items = [_classify(e) for e in key]
    ells = sum(1 for kind, _ in items if kind == "ell")
    if ells > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    consumed = sum(1 for kind, _ in items if kind in ("int", "slice", "arr"))
    consumed += sum(v.ndim for kind, v in items if kind == "mask")
    if consumed > x.ndim:
        raise IndexError(f"too many indices for array: array is {x.ndim}-dimensional, but {consumed} were indexed")
    fill = [("slice", slice(None))] * (x.ndim - consumed)
    if ells:
        i = next(i for i, (kind, _) in enumerate(items) if kind == "ell")
        items = items[:i] + fill + items[i + 1 :]
    else:
        items = items + fill
    entries, shape, a = [], [], 0
    for kind, v in items:
        if kind == "new":
            entries.append(("slice", slice(None)))
            shape.append(1)
        elif kind == "bool":
            entries.append(("arr", _np.zeros(1 if v else 0, dtype=_np.int64)))
            shape.append(1)
        elif kind == "mask":
            for j, m in enumerate(v.shape):
                n = x.shape[a + j]
                if m != n:
                    raise IndexError(
                        f"boolean index did not match indexed array along axis {a + j}; size of axis is {n} "
                        f"but size of corresponding boolean axis is {m}"
                    )
            for nz in _np.nonzero(v):
                entries.append(("arr", nz.astype(_np.int64)))
                shape.append(x.shape[a])
                a += 1
        else:
            if kind == "int":
                n = x.shape[a]
                if not -n <= v < n:
                    raise IndexError(f"index {v} is out of bounds for axis {a} with size {n}")
                v = v % n
            entries.append((kind, v))
            shape.append(x.shape[a])
            a += 1
    return entries, shape


def _slice_axis(y, ax, s, n, device):
    """``y`` sliced by the Python slice ``s`` along ``ax`` (of length ``n``); ``y`` itself when
    the slice keeps the whole axis in order."""
    k = _kiln()
    start, stop, step = s.indices(n)
    r = range(start, stop, step)
    if step == 1 and len(r) == n:
        return y
    if len(r) <= 1:
        # Also keeps a step past any length (2**70) away from kiln-core's integer arguments.
        return k.slice(y, ax, r[0], r[0] + 1, 1) if len(r) else k.slice(y, ax, 0, 0, 1)
    if step > 0:
        return k.slice(y, ax, start, stop, step)
    # kiln-core's slice takes steps >= 1; a negative step is a gather of the positions it visits.
    return k.index_select(y, ax, k.arange(r[0], r[-1] - 1, step, dtype="int32", device=device))


def _index_tensor(v, ax, n, device):
    """An integer-array index as an int32 tensor on ``device``, negative entries counted from
    the end; IndexError for entries outside ``[-n, n)`` (a tensor's min and max are read back)."""
    k = _kiln()
    if isinstance(v, _np.ndarray):
        bad = v[(v < -n) | (v >= n)]
        if bad.size:
            raise IndexError(f"index {int(bad.flat[0])} is out of bounds for axis {ax} with size {n}")
        return k.asarray(_np.where(v < 0, v + n, v).astype(_np.int32), device=device)
    if v.size == 0:
        return k.astype(v, "int32")
    lo, hi = int(k.min(v).item()), int(k.max(v).item())
    for i in (lo, hi):
        if not -n <= i < n:
            raise IndexError(f"index {i} is out of bounds for axis {ax} with size {n}")
    t = k.astype(v, "int32")
    return k.where(k.less(t, 0), k.add(t, n), t) if lo < 0 else t


def _advanced(y, entries, device):
    """``y`` (every non-array axis already sliced) gathered by the integer-array entries."""
    k = _kiln()
    pos = [i for i, (kind, _) in enumerate(entries) if kind == "arr"]
    try:
        b = tuple(_np.broadcast_shapes(*(tuple(entries[p][1].shape) for p in pos)))
    except ValueError:
        shapes = " ".join(str(tuple(entries[p][1].shape)) for p in pos)
        raise IndexError(
            f"shape mismatch: indexing arrays could not be broadcast together with shapes {shapes}"
        ) from None
    shape = list(y.shape)
    idx = [_index_tensor(entries[p][1], p, shape[p], device) for p in pos]
    if len(pos) == 1:
        p = pos[0]
        out = k.index_select(y, p, k.reshape(idx[0], (-1,)))
        return k.reshape(out, tuple(shape[:p]) + b + tuple(shape[p + 1 :]))
    sizes = [shape[p] for p in pos]
    if _np.prod(sizes, dtype=_np.float64) > _I32_MAX:
        raise IndexError(f"integer-array indexing over axes of sizes {sizes}: more than 2**31 positions")
    # One gather over the indexed axes flattened together: position = sum of index * stride.
    lin, stride = None, 1
    for t, n in zip(reversed(idx), reversed(sizes)):
        term = k.multiply(t, stride) if stride != 1 else t
        lin = term if lin is None else k.add(lin, term)
        stride *= n
    if tuple(lin.shape) != b:
        lin = k.broadcast_to(lin, b)
    rest = [i for i in range(len(shape)) if i not in pos]
    flat = k.reshape(k.permute_dims(y, tuple(pos + rest)), (int(_np.prod(sizes)),) + tuple(shape[i] for i in rest))
    out = k.index_select(flat, 0, k.reshape(lin, (-1,)))
    out = k.reshape(out, b + tuple(shape[i] for i in rest))
    adjacent = pos == list(range(pos[0], pos[0] + len(pos)))
    if adjacent and pos[0] > 0:
        nb = len(b)
        order = list(range(nb, nb + pos[0])) + list(range(nb)) + list(range(nb + pos[0], out.ndim))
        out = k.permute_dims(out, tuple(order))
    return out


def getitem(x, key):
    """``x[key]`` (see the module docstring): a new tensor, or one sharing ``x``'s buffer when
    the key selects everything in order."""
    k = _kiln()
    entries, shape = _expand(x, key)
    device = x.device
    y = k.reshape(x, tuple(shape))
    advanced = any(kind == "arr" for kind, _ in entries)
    if advanced:
        # With an array present, the standard (and numpy) treat each int as a 0-d index array.
        entries = [("arr", _np.asarray(v, dtype=_np.int64)) if kind == "int" else (kind, v) for kind, v in entries]
    for ax, (kind, v) in enumerate(entries):
        if kind == "slice":
            y = _slice_axis(y, ax, v, shape[ax], device)
        elif kind == "int":
            y = k.slice(y, ax, v, v + 1, 1)
    if advanced:
        return _advanced(y, entries, device)
    keep = tuple(d for d, (kind, _) in zip(y.shape, entries) if kind != "int")
    return k.reshape(y, keep)


def _host_key(key):
    """The key with kiln tensors read back to numpy arrays, for numpy to resolve."""
    k = _kiln()

    def host(e):
        return e.numpy() if isinstance(e, k.Tensor) else e

    return tuple(host(e) for e in key) if isinstance(key, tuple) else host(key)


def _value(x, value, r):
    """``value`` as a tensor of ``x.dtype`` that broadcasts to ``r`` (numpy's rules and errors),
    and whether it was a scalar."""
    k = _kiln()
    if isinstance(value, k.Tensor):
        v = value
        while v.ndim > len(r) and v.shape[0] == 1:
            v = k.reshape(v, tuple(v.shape[1:]))  # numpy drops leading 1s of the value
        try:
            ok = tuple(_np.broadcast_shapes(tuple(v.shape), r)) == r
        except ValueError:
            ok = False
        if not ok:
            raise ValueError(f"could not broadcast input array from shape {tuple(value.shape)} into shape {r}")
        return (v if v.dtype == x.dtype else k.astype(v, x.dtype)), False
    host = _np.empty(r, dtype=x.dtype)
    host[...] = value  # numpy's broadcasting, casting and errors
    scalar = _np.ndim(value) == 0
    return k.asarray(host.reshape(-1)[:1].reshape(()) if scalar and host.size else host, device=x.device), scalar


def _basic_map(entries, shape, r, device):
    """For a key of ints and slices over ``shape``: which elements it selects (a bool tensor
    broadcasting to ``shape``, None for all) and each one's flat position in the ``r``-shaped
    value (an int32 tensor, None when ``r`` has one element). Built from one small array per
    axis, so nothing of ``x``'s size crosses to the GPU."""
    k = _kiln()
    rstride = [int(_np.prod(r[j + 1 :])) for j in range(len(r))]
    mask = lin = None
    j = 0
    for d, (kind, v) in enumerate(entries):
        n = shape[d]
        sel = _np.full(n, -1, dtype=_np.int32)
        if kind == "int":
            sel[v], stride, whole = 0, 0, n == 1
        else:
            rng = range(*v.indices(n))
            sel[_np.arange(rng.start, rng.stop, rng.step)] = _np.arange(len(rng), dtype=_np.int32)
            stride, whole = rstride[j], rng.step == 1 and len(rng) == n
            j += 1
        dims = [1] * len(shape)
        dims[d] = n
        t = k.asarray(sel.reshape(dims), device=device)
        if not whole:
            m = k.greater_equal(t, 0)
            mask = m if mask is None else k.logical_and(mask, m)
        if stride and n > 1:
            term = k.multiply(k.maximum(t, 0), stride) if stride != 1 else k.maximum(t, 0)
            lin = term if lin is None else k.add(lin, term)
    return mask, lin


def setitem(x, key, value):
    """``x[key] = value``, written into ``x``'s own buffer (so its reshapes see it too).

    ``key`` is anything ``x[key]`` takes; ``value`` a Python scalar, an array-like or a tensor
    that broadcasts to ``x[key].shape`` (cast to ``x.dtype`` as numpy casts; numpy's errors for
    values that do not fit). Where positions repeat, the last write wins, as in numpy.

    How: a key of ints, slices, ``...`` and ``None`` is resolved per axis (an array of each
    axis's length goes up); any other key (integer arrays, masks) is resolved on the host
    against ``x``'s shape (numpy on an index grid; a tensor inside the key is read back) into a
    position map of ``x.size`` int32 that is uploaded. Either way one gather and a ``where``
    build the new contents on the GPU and one buffer copy writes them into ``x``.
    """
    k = _kiln()
    n = x.size
    if n > _I32_MAX:
        raise ValueError(f"x[key] = value: {n} elements are past int32 positions")
    entries, shape = _expand(x, key)  # numpy's errors for a bad key
    basic = not any(kind == "arr" for kind, _ in entries)
    if basic:
        r = tuple(len(range(*v.indices(shape[d]))) for d, (kind, v) in enumerate(entries) if kind == "slice")
    else:
        pos = _np.asarray(_np.arange(n, dtype=_np.int32).reshape(x.shape)[_host_key(key)])
        r = pos.shape
    v, scalar = _value(x, value, r)
    size = int(_np.prod(r))
    if size == 0:
        return
    target = k.reshape(x, tuple(shape))
    if basic:
        mask, lin = _basic_map(entries, shape, r, x.device)
    else:
        inv = _np.full(n, size, dtype=_np.int32)
        inv[pos.reshape(-1)] = _np.arange(size, dtype=_np.int32)
        lin = k.asarray(inv.reshape(x.shape), device=x.device)
        mask = k.less(lin, size)
    if scalar or lin is None:
        new = k.reshape(v, ())  # one value for every selected element
    else:
        if tuple(v.shape) != r:
            v = k.broadcast_to(v, r)
        if tuple(lin.shape) != tuple(shape):
            lin = k.broadcast_to(lin, tuple(shape))
        # Positions no write lands on index past the end (reading 0); the mask keeps x there.
        new = k.reshape(k.index_select(k.reshape(v, (-1,)), 0, k.reshape(lin, (-1,))), tuple(shape))
    out = new if mask is None else k.where(mask, new, target)
    if tuple(out.shape) != tuple(shape):
        out = k.broadcast_to(out, tuple(shape))
    k._assign(x, k.reshape(out, tuple(x.shape)))


def iterate(x):
    """``iter(x)``: ``x[0], x[1], …`` along the first axis (TypeError for a 0-d tensor, as
    numpy gives), rather than Python's fallback of indexing until IndexError."""
    if x.ndim == 0:
        raise TypeError("iteration over a 0-d tensor")
    return (x[i] for i in range(x.shape[0]))
