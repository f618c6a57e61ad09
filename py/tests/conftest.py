"""Shared helpers: seeded inputs, numpy references, tolerances per dtype."""

import math

import kiln
import numpy as np
import pytest

TOL = {
    np.dtype("float32"): dict(rtol=2e-5, atol=2e-5),
    np.dtype("float16"): dict(rtol=1e-2, atol=1e-2),
    np.dtype("int32"): dict(rtol=0, atol=0),
    np.dtype("uint32"): dict(rtol=0, atol=0),
    np.dtype("bool"): dict(rtol=0, atol=0),
}

HAS_F16 = kiln.default_device().shader_f16
FLOATS = ["float32"] + (["float16"] if HAS_F16 else [])
needs_f16 = pytest.mark.skipif(not HAS_F16, reason="the adapter has no SHADER_F16")


@pytest.fixture
def rng(request):
    # One seed per test, derived from its name: reproducible, different across tests.
    seed = sum(ord(c) * (i + 1) for i, c in enumerate(request.node.name)) % (2**32)
    return np.random.default_rng(seed)


def rand(rng, shape, dtype="float32", low=-2.0, high=2.0):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        return rng.uniform(low, high, size=shape).astype(dtype)
    if dtype == np.uint32:
        return rng.integers(0, max(int(high), 1) * 50, size=shape, dtype=np.uint32)
    return rng.integers(int(low) * 50, max(int(high), 1) * 50, size=shape, dtype=dtype)


def check(got, want, dtype=None, scale=1.0, **kw):
    """Compares a kiln result with a numpy reference (computed in float64), shape and dtype too."""
    assert isinstance(got, kiln.Tensor), type(got)
    arr = got.numpy()
    want = np.asarray(want)
    assert arr.shape == want.shape, (arr.shape, want.shape)
    if dtype is not None:
        assert arr.dtype == np.dtype(dtype), (arr.dtype, dtype)
    tol = dict(TOL[arr.dtype])
    tol = {k: v * scale for k, v in tol.items()}
    tol.update(kw)
    np.testing.assert_allclose(arr.astype(np.float64), want.astype(np.float64), **tol)
    return arr


def f64(a):
    """The float64 values a kiln input holds (references compute in float64)."""
    return np.asarray(a).astype(np.float64)


_erf = np.vectorize(math.erf, otypes=[np.float64])


def erf(x):
    return _erf(x)
