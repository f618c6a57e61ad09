"""The Array API standard's inspection and data-type functions over Kiln's dtypes.

``kiln`` itself is the namespace (``x.__array_namespace__() is kiln``); this module holds what
the standard asks of a namespace beyond the functions: ``__array_api_version__``,
``__array_namespace_info__``, ``finfo``/``iinfo``, ``result_type``/``can_cast``/``isdtype`` with
the standard's type-promotion table restricted to Kiln's dtypes, and ``clip``.

Kiln's dtypes are float32, float16, int32 and uint32 (and bool, where the package defines
``kiln.bool``). There is no float64, int64 or complex dtype (WebGPU has none portable): a
promotion that would need one (int32 with uint32) raises TypeError, as do mixed-kind promotions
(integer with floating), which the standard leaves unspecified.
"""

from __future__ import annotations

import numpy as _np

__array_api_version__ = "2024.12"

_F16 = _np.dtype("float16")
_F32 = _np.dtype("float32")
_I32 = _np.dtype("int32")
_U32 = _np.dtype("uint32")
_BOOL = _np.dtype("bool")

_KINDS = ("bool", "signed integer", "unsigned integer", "integral", "real floating", "complex floating", "numeric")


def _kiln():
    import kiln

    return kiln


def _all_dtypes():
    """Kiln's dtypes by name; bool only once the package defines ``kiln.bool``."""
    out = {"float32": _F32, "float16": _F16, "int32": _I32, "uint32": _U32}
    b = getattr(_kiln(), "bool", None)
    if isinstance(b, _np.dtype) and b == _BOOL:
        out["bool"] = _BOOL
    return out


def _as_dtype(x):
    """A dtype from a dtype, an array (its ``.dtype``) or anything numpy reads as one."""
    d = getattr(x, "dtype", x)
    try:
        d = _np.dtype(d)
    except TypeError:
        raise TypeError(f"not a dtype or an array: {x!r}") from None
    if d not in _all_dtypes().values():
        raise TypeError(f"{d} is not a Kiln dtype (Kiln has {', '.join(_all_dtypes())})")
    return d


def isdtype(dtype, kind):
    """Whether ``dtype`` is of ``kind``: a dtype, one of the standard's kind names
    (``"bool"``, ``"signed integer"``, ``"unsigned integer"``, ``"integral"``,
    ``"real floating"``, ``"complex floating"``, ``"numeric"``) or a tuple of them."""
    dtype = _as_dtype(dtype)
    if isinstance(kind, tuple):
        return any(isdtype(dtype, k) for k in kind)
    if isinstance(kind, str):
        if kind not in _KINDS:
            raise ValueError(f"isdtype: unknown kind {kind!r} (one of {', '.join(_KINDS)})")
        k = dtype.kind
        return {
            "bool": k == "b",
            "signed integer": k == "i",
            "unsigned integer": k == "u",
            "integral": k in "iu",
            "real floating": k == "f",
            "complex floating": False,
            "numeric": k in "iuf",
        }[kind]
    return dtype == _as_dtype(kind)


# The standard's promotion lattice restricted to Kiln's dtypes: within a kind the wider type
# wins; int32 with uint32 would need int64, which Kiln lacks.
_PROMOTE = {
    (_F16, _F32): _F32,
    (_F32, _F16): _F32,
}


def _promote(a, b):
    if a == b:
        return a
    r = _PROMOTE.get((a, b))
    if r is not None:
        return r
    if {a.kind, b.kind} == {"i", "u"}:
        raise TypeError(f"no promotion of {a} with {b} in Kiln (the standard's result, int64, is not a Kiln dtype)")
    raise TypeError(f"no promotion of {a} with {b}: the standard leaves mixed-kind promotion unspecified")


def _scalar_fits(s, d):
    """A Python scalar joins an array dtype of a kind it fits (the standard's rule)."""
    if isinstance(s, bool):
        return d.kind == "b"
    if isinstance(s, int):
        return d.kind in "iuf"
    if isinstance(s, float):
        return d.kind == "f"
    return False


def result_type(*arrays_and_dtypes):
    """The dtype that the standard's promotion rules give for arrays, dtypes and (2024.12)
    Python scalars together; TypeError where Kiln has no such dtype or the standard none."""
    scalars = [x for x in arrays_and_dtypes if isinstance(x, (bool, int, float, complex))]
    typed = [_as_dtype(x) for x in arrays_and_dtypes if not isinstance(x, (bool, int, float, complex))]
    if not typed:
        raise TypeError("result_type needs at least one array or dtype")
    r = typed[0]
    for d in typed[1:]:
        r = _promote(r, d)
    for s in scalars:
        if not _scalar_fits(s, r):
            raise TypeError(f"result_type: a Python {type(s).__name__} does not join {r}")
    return r


def can_cast(from_, to, /):
    """Whether the promotion rules allow ``from_`` (a dtype or an array) to become ``to``."""
    f, t = _as_dtype(from_), _as_dtype(to)
    try:
        return _promote(f, t) == t
    except TypeError:
        return False


class finfo_object:
    """Machine limits of a floating-point dtype (``kiln.finfo``): exact for float16 and float32."""

    def __init__(self, dtype):
        fi = _np.finfo(dtype)
        self.bits = int(fi.bits)
        self.eps = float(fi.eps)
        self.max = float(fi.max)
        self.min = float(fi.min)
        self.smallest_normal = float(fi.smallest_normal)
        self.dtype = dtype

    def __repr__(self):
        return (f"finfo(bits={self.bits}, eps={self.eps!r}, max={self.max!r}, min={self.min!r}, "
                f"smallest_normal={self.smallest_normal!r}, dtype={self.dtype})")


class iinfo_object:
    """Limits of an integer dtype (``kiln.iinfo``)."""

    def __init__(self, dtype):
        ii = _np.iinfo(dtype)
        self.bits = int(ii.bits)
        self.max = int(ii.max)
        self.min = int(ii.min)
        self.dtype = dtype

    def __repr__(self):
        return f"iinfo(bits={self.bits}, max={self.max}, min={self.min}, dtype={self.dtype})"


def finfo(type, /):
    """Limits of a floating-point dtype, or of an array's: ``bits``, ``eps``, ``max``, ``min``,
    ``smallest_normal``, ``dtype``."""
    d = _as_dtype(type)
    if d.kind != "f":
        raise TypeError(f"finfo needs a floating-point dtype, got {d}")
    return finfo_object(d)


def iinfo(type, /):
    """Limits of an integer dtype, or of an array's: ``bits``, ``max``, ``min``, ``dtype``."""
    d = _as_dtype(type)
    if d.kind not in "iu":
        raise TypeError(f"iinfo needs an integer dtype, got {d}")
    return iinfo_object(d)


class _Info:
    """What ``kiln.__array_namespace_info__()`` answers (the standard's inspection API)."""

    def capabilities(self):
        # Boolean masks index by reading the mask back to the host (see _indexing.py), and
        # nonzero / unique_* read their output's size back the same way; kiln-core tensors
        # have at most 8 dimensions.
        return {"boolean indexing": True, "data-dependent shapes": True, "max dimensions": 8}

    def default_device(self):
        return _kiln().default_device()

    def devices(self):
        return list(_kiln().devices())

    def default_dtypes(self, *, device=None):
        # No complex dtype, so no "complex floating" entry.
        return {"real floating": _F32, "integral": _I32, "indexing": _I32}

    def dtypes(self, *, device=None, kind=None):
        ds = _all_dtypes()
        if kind is None:
            return dict(ds)
        return {n: d for n, d in ds.items() if isdtype(d, kind)}


def __array_namespace_info__():
    """The namespace's inspection object: ``capabilities()``, ``default_device()``,
    ``devices()``, ``default_dtypes()``, ``dtypes(kind=...)``."""
    return _Info()


def clip(x, /, min=None, max=None):
    """``x`` limited to ``[min, max]`` (either may be None, a Python scalar or an array that
    broadcasts against ``x``): ``minimum(maximum(x, min), max)``, so a NaN in ``x``, ``min`` or
    ``max`` gives NaN, and the result keeps ``x``'s dtype."""
    k = _kiln()
    if not isinstance(x, k.Tensor):
        x = k.asarray(x)
    r = x
    if min is not None:
        r = k.maximum(r, min)
    if max is not None:
        r = k.minimum(r, max)
    if r is x:
        r = x.copy()
    if r.shape != x.shape:
        raise ValueError(f"clip: the bounds broadcast x from {x.shape} to {r.shape}")
    return r
