"""Kiln: one WebGPU compute runtime shared by Rust, C, Julia, Elixir and Python.

``import kiln`` gives a numpy-style API over kiln-core: ``kiln.asarray``, ``kiln.zeros``, the
``Tensor`` type with numpy operators, functions for every op (numpy / array-API names and
keywords), custom WGSL kernels (``kiln.Kernel``), ``kiln.random`` and the runtime controls
(``kiln.devices``, ``kiln.memory_stats``, ``kiln.synchronize``). Errors are ``kiln.KilnError``
and its subclasses, each with a stable ``.code``.
"""

from __future__ import annotations

import math as _math

import numpy as _np

from . import _kiln, models, random
from ._array_api import (
    __array_api_version__,
    __array_namespace_info__,
    can_cast,
    clip,
    finfo,
    iinfo,
    isdtype,
    result_type,
)
from ._dlpack import dlpack as _dlpack
from ._dlpack import dlpack_device as _dlpack_device
from ._dlpack import from_dlpack
from ._errors import (
    CODE_NAMES,
    ComputeLimitError,
    DeviceLostError,
    DTypeError,
    InternalError,
    InvalidArgumentError,
    KilnError,
    NoAdapterError,
    OutOfMemoryError,
    QuotaExceededError,
    ShaderError,
    ShapeError,
    TimeoutError,
    UnsupportedError,
)
from ._indexing import getitem as _getitem
from ._indexing import iterate as _iterate
from ._indexing import setitem as _setitem
from ._kiln import *  # noqa: F401,F403  (every op, Tensor, Kernel, Device, runtime controls)
from ._kiln import (
    Device,
    Kernel,
    Tensor,
    __version__,
    where,  # `where` is a keyword-free name but not picked up by * on every version
)
from ._manipulation import (
    broadcast_arrays,
    broadcast_to,
    expand_dims,
    eye,
    flip,
    linspace,
    meshgrid,
    moveaxis,
    repeat,
    roll,
    squeeze,
    stack,
    tile,
    tril,
    triu,
    unstack,
)
from ._numpy_protocol import array_function as _array_function
from ._numpy_protocol import array_ufunc as _array_ufunc
from ._profile import Profile, profile
from ._sorting import (
    isin,
    searchsorted,
    unique_all,
    unique_counts,
    unique_inverse,
)

# Indexing is Python over kiln-core's ops (see _indexing.py), installed onto the Rust class.
Tensor.__getitem__ = _getitem
Tensor.__setitem__ = _setitem
Tensor.__iter__ = _iterate
# numpy's dispatch protocols (see _numpy_protocol.py for the rule).
Tensor.__array_function__ = _array_function
Tensor.__array_ufunc__ = _array_ufunc
# DLPack, always through a host copy (see _dlpack.py for the rule).
Tensor.__dlpack__ = _dlpack
Tensor.__dlpack_device__ = _dlpack_device


def _rebuild(data, /):
    return _kiln.asarray(data)


def _reduce(self):
    """Pickling and ``copy.deepcopy``: the host bytes, dtype and shape (a numpy array), uploaded
    again on load to the default device (device handles do not pickle)."""
    return (_rebuild, (self.numpy(),))


Tensor.__reduce__ = _reduce

#: The Array API standard's constants.
e = _math.e
pi = _math.pi
inf = _math.inf
nan = _math.nan
newaxis = None

#: Kiln's dtypes are numpy dtype objects, so ``t.dtype == numpy.float32`` holds.
float32 = _np.dtype("float32")
float16 = _np.dtype("float16")
int32 = _np.dtype("int32")
uint32 = _np.dtype("uint32")
#: One byte an element on the host (numpy's bool); comparisons, logical ops, ``isnan`` and
#: friends, ``all`` and ``any`` give it. (It shadows the builtin inside this module, as in numpy.)
bool = _np.dtype("bool")  # noqa: A001
dtypes = (float32, float16, int32, uint32, bool)

# numpy / array-API aliases and kiln-core's own names (the same function objects).
neg = negative = _kiln.negative
absolute = _kiln.abs
sub = subtract = _kiln.subtract
mul = multiply = _kiln.multiply
div = true_divide = divide = _kiln.divide
floor_divide = _kiln.floor_divide
mod = remainder = _kiln.remainder
power = _kiln.pow
eq = equal = _kiln.equal
ne = not_equal = _kiln.not_equal
lt = less = _kiln.less
le = less_equal = _kiln.less_equal
gt = greater = _kiln.greater
ge = greater_equal = _kiln.greater_equal
where_ = _kiln.where
# numpy's names of the Array API's functions.
arcsin, arccos, arctan, arctan2 = _kiln.asin, _kiln.acos, _kiln.atan, _kiln.atan2
arcsinh, arccosh, arctanh = _kiln.asinh, _kiln.acosh, _kiln.atanh
fix = _kiln.trunc


def positive(x, /):
    """``+x``: a copy of ``x`` (the Array API's ``positive``)."""
    return +(x if isinstance(x, Tensor) else _kiln.asarray(x))

def real(x, /):
    """The real part: Kiln's dtypes are all real, so a copy of ``x`` (the Array API's ``real``)."""
    return _copy(x)


def imag(x, /):
    """The imaginary part of a real tensor: zeros of ``x``'s dtype and shape."""
    return _kiln.zeros_like(x if isinstance(x, Tensor) else _kiln.asarray(x))


def conj(x, /):
    """The complex conjugate of a real tensor: a copy of ``x``."""
    return _copy(x)


def _copy(x):
    t = x if isinstance(x, Tensor) else _kiln.asarray(x)
    return _kiln.astype(t, t.dtype, copy=True)


cast = _kiln.astype
permute = _kiln.permute_dims
concatenate = _kiln.concat
select_device = _kiln.select_adapter
adapters = _kiln.devices
random_uniform = _kiln.random_uniform
random_normal = _kiln.random_normal

_ALIASES = [
    "neg", "absolute", "sub", "mul", "div", "true_divide", "mod", "power", "eq", "ne", "lt", "le", "gt",
    "ge", "where_", "cast", "permute", "concatenate", "select_device", "adapters", "arcsin", "arccos",
    "arctan", "arctan2", "arcsinh", "arccosh", "arctanh", "fix", "positive", "clip", "finfo", "iinfo",
    "isdtype", "result_type", "can_cast", "e", "pi", "inf", "nan", "newaxis", "broadcast_to", "expand_dims",
    "eye", "flip", "linspace", "moveaxis", "squeeze", "stack", "tril", "triu", "broadcast_arrays", "meshgrid",
    "repeat", "roll", "tile", "unstack", "real", "imag", "conj",
]

__all__ = sorted(
    {n for n in dir(_kiln) if not n.startswith("_")}
    | set(_ALIASES)
    | {"float32", "float16", "int32", "uint32", "bool", "dtypes", "random", "KilnError", "InvalidArgumentError",
       "ShapeError", "DTypeError", "OutOfMemoryError", "QuotaExceededError", "ComputeLimitError", "ShaderError",
       "DeviceLostError", "NoAdapterError", "TimeoutError", "UnsupportedError", "InternalError",
       "CODE_NAMES", "__version__", "Profile", "profile", "from_dlpack"}
)
