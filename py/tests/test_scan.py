"""The Array API's cumulative_sum / cumulative_prod against numpy 2's (the same signatures):
awkward shapes and axes, runs past one kernel block, integer wrapping, dtype=, include_initial,
special values, and the errors."""

import kiln
import numpy as np
import pytest
from conftest import FLOATS

SHAPES = [
    ((0,), None),
    ((1,), None),
    ((7,), 0),
    ((1025,), -1),
    ((13, 17), 0),
    ((13, 17), 1),
    ((3, 1, 257), 0),
    ((2, 0, 3), 1),
    ((5, 3, 12), -2),
    ((2, 2053), 1),
]
OPS = [("cumulative_sum", np.cumulative_sum), ("cumulative_prod", np.cumulative_prod)]


def values(rng, shape, dtype, prod):
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        lo, hi = (0.99, 1.01) if prod else (-1.0, 1.0)
        return rng.uniform(lo, hi, size=shape).astype(dtype)
    if dtype == np.uint32:
        return rng.integers(0, 100, size=shape, dtype=np.uint32)
    return rng.integers(-100, 100, size=shape, dtype=np.int32)


def reference(f, x, axis, dtype, include_initial):
    """numpy in float64 for floats (rounded to the dtype), in the dtype itself for integers (so
    they wrap, where numpy's default would widen to int64)."""
    ax = 0 if axis is None else axis
    if np.dtype(dtype).kind == "f":
        return f(x.astype(np.float64), axis=ax, include_initial=include_initial)
    return f(x.astype(dtype), axis=ax, dtype=dtype, include_initial=include_initial)


@pytest.mark.parametrize("name,f", OPS)
@pytest.mark.parametrize("dtype", FLOATS + ["int32", "uint32"])
@pytest.mark.parametrize("shape,axis", SHAPES)
def test_matches_numpy(rng, name, f, dtype, shape, axis):
    x = values(rng, shape, dtype, name == "cumulative_prod")
    for include_initial in (False, True):
        got = getattr(kiln, name)(kiln.asarray(x), axis=axis, include_initial=include_initial).numpy()
        want = reference(f, x, axis, dtype, include_initial)
        assert got.dtype == np.dtype(dtype) and got.shape == want.shape
        n = max(shape[0 if axis is None else axis], 1)
        tol = 0 if np.dtype(dtype).kind != "f" else (2e-3 if dtype == "float16" else 1e-6 * (1 + n))
        np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype,lo,hi", [("int32", -(2**31), 2**31 - 1), ("uint32", 0, 2**32 - 1)])
def test_integers_wrap(rng, dtype, lo, hi):
    x = rng.integers(lo, hi, size=(3, 1100), dtype=dtype)
    for name, f in OPS:
        got = getattr(kiln, name)(kiln.asarray(x), axis=1).numpy()
        np.testing.assert_array_equal(got, f(x, axis=1, dtype=dtype))


@pytest.mark.parametrize("dtype", FLOATS)
def test_special_values(rng, dtype):
    vals = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, -0.0, -0.0, 1.5, -2.0, 0.0], dtype=dtype)
    x = np.stack([rng.permutation(vals) for _ in range(4)], axis=1)
    for name, f in OPS:
        got = getattr(kiln, name)(kiln.asarray(x), axis=0).numpy()
        want = f(x.astype(np.float64), axis=0).astype(dtype)
        np.testing.assert_array_equal(got, want)  # NaN matches NaN
        assert np.array_equal(np.signbit(got[want == 0]), np.signbit(want[want == 0])), name


def test_dtype_casts_first():
    b = np.array([[True, False, True], [True, True, False]])
    got = kiln.cumulative_sum(kiln.asarray(b), axis=1, dtype=kiln.int32)
    assert got.dtype == np.int32
    np.testing.assert_array_equal(got.numpy(), np.cumulative_sum(b, axis=1, dtype=np.int32))
    x = np.array([3, -4, 5], np.int32)
    got = kiln.cumulative_prod(kiln.asarray(x), dtype="float32").numpy()
    assert got.dtype == np.float32
    np.testing.assert_array_equal(got, [3.0, -12.0, -60.0])


def test_array_namespace():
    x = kiln.asarray(np.arange(6, dtype=np.float32).reshape(2, 3))
    xp = x.__array_namespace__()
    np.testing.assert_array_equal(xp.cumulative_sum(x, axis=1).numpy(), np.cumulative_sum(x.numpy(), axis=1))


def test_errors():
    x = kiln.asarray(np.ones((2, 3), np.float32))
    for name, _ in OPS:
        f = getattr(kiln, name)
        with pytest.raises(kiln.InvalidArgumentError):
            f(x)  # an axis is required past 1-D
        with pytest.raises(kiln.InvalidArgumentError):
            f(x, axis=2)
        with pytest.raises(kiln.InvalidArgumentError):
            f(kiln.asarray(np.float32(1.0)))
        with pytest.raises(kiln.DTypeError):
            f(kiln.asarray(np.array([True, False])))
        with pytest.raises(kiln.DTypeError):
            f(x, axis=0, dtype="float64")
