"""prod, std, sum(dtype=) and diff against numpy 2 (the Array API's signatures): awkward shapes,
integers that wrap, dtype= casting first, corrections, prepend / append, and the errors."""

import warnings

import kiln
import numpy as np
import pytest
from conftest import FLOATS

AXES = [
    ((0,), None),
    ((7,), 0),
    ((13, 17), 1),
    ((13, 17), (0, 1)),
    ((3, 1, 257), -1),
    ((2, 0, 3), 1),
    ((5, 3, 4), (0, 2)),
]


@pytest.mark.parametrize("dtype", FLOATS + ["int32", "uint32"])
@pytest.mark.parametrize("shape,axis", AXES)
def test_prod_matches_numpy(rng, dtype, shape, axis):
    if np.dtype(dtype).kind == "f":
        x = rng.uniform(0.9, 1.1, size=shape).astype(dtype)
        want = np.prod(x.astype(np.float64), axis=axis, keepdims=True)
        tol = 2e-3 if dtype == "float16" else 1e-5
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=np.int64).astype(dtype)
        want = np.prod(x, axis=axis, keepdims=True, dtype=dtype)  # wraps in the dtype
        tol = 0
    got = kiln.prod(kiln.asarray(x), axis=axis, keepdims=True)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got.numpy().astype(np.float64), want.astype(np.float64), rtol=tol, atol=tol)


def test_prod_and_sum_dtype():
    x = np.array([[70000, 70000, -2], [3, 4, 5]], np.int32)
    got = kiln.prod(kiln.asarray(x), axis=1, dtype="float32").numpy()
    np.testing.assert_array_equal(got, np.prod(x.astype(np.float32), axis=1))
    b = np.array([[True, True, False], [True, True, True]])
    np.testing.assert_array_equal(kiln.prod(kiln.asarray(b), axis=1, dtype=kiln.int32).numpy(), [0, 1])
    np.testing.assert_array_equal(kiln.sum(kiln.asarray(b), axis=1, dtype=kiln.int32).numpy(), [2, 3])
    s = kiln.sum(kiln.asarray(x), dtype=kiln.float32)
    assert s.dtype == np.float32 and float(s) == float(x.astype(np.float64).sum())
    assert kiln.sum(kiln.asarray(x)).dtype == np.int32  # the default integer, as the standard says
    with pytest.raises(kiln.DTypeError):
        kiln.prod(kiln.asarray(b))
    with pytest.raises(kiln.DTypeError):
        kiln.sum(kiln.asarray(b))


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape,axis", AXES)
@pytest.mark.parametrize("correction", [0, 1])
def test_std_matches_numpy(rng, dtype, shape, axis, correction):
    x = rng.uniform(-3, 3, size=shape).astype(dtype)
    got = kiln.std(kiln.asarray(x), axis=axis, correction=correction).numpy()
    with np.errstate(all="ignore"), warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # an empty axis: NaN, as kiln gives
        want = np.std(x.astype(np.float64), axis=axis, ddof=correction)
    tol = 1e-2 if dtype == "float16" else 1e-5
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint32"])
@pytest.mark.parametrize("shape,axis", [((0,), 0), ((1,), -1), ((7,), 0), ((13, 17), 0), ((3, 1, 257), -1)])
@pytest.mark.parametrize("n", [0, 1, 2, 9])
def test_diff_matches_numpy(rng, dtype, shape, axis, n):
    if np.dtype(dtype).kind == "f":
        x = rng.uniform(-5, 5, size=shape).astype(dtype)
    else:
        info = np.iinfo(dtype)
        x = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=np.int64).astype(dtype)
    pre_shape = list(shape)
    pre_shape[axis] = 2
    pre = np.ones(pre_shape, dtype)
    for kw in ({}, {"prepend": pre}, {"prepend": pre, "append": pre}):
        got = kiln.diff(kiln.asarray(x), axis=axis, n=n, **{k: kiln.asarray(v) for k, v in kw.items()}).numpy()
        want = np.diff(x, axis=axis, n=n, **kw)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(got, want)


def test_diff_errors():
    x = kiln.asarray(np.ones((2, 3), np.float32))
    with pytest.raises(kiln.ShapeError):
        kiln.diff(x, prepend=kiln.asarray(np.ones((3, 1), np.float32)))
    with pytest.raises(kiln.DTypeError):
        kiln.diff(x, append=kiln.asarray(np.ones((2, 1), np.int32)))
    with pytest.raises(kiln.InvalidArgumentError):
        kiln.diff(x, axis=2)
    with pytest.raises(kiln.InvalidArgumentError):
        kiln.diff(kiln.asarray(np.float32(1)))


@pytest.mark.parametrize(
    "s1,s2,axis",
    [((0,), (0,), -1), ((7,), (7,), -1), ((13, 17), (17,), -1), ((3, 1, 25), (5, 25), -1), ((4, 6), (4, 6), 0)],
)
@pytest.mark.parametrize("dtype", FLOATS + ["int32"])
def test_vecdot_matches_numpy(rng, s1, s2, axis, dtype):
    a = rng.integers(-20, 21, size=s1).astype(dtype) if dtype == "int32" else rng.uniform(-1, 1, size=s1).astype(dtype)
    b = rng.integers(-20, 21, size=s2).astype(dtype) if dtype == "int32" else rng.uniform(-1, 1, size=s2).astype(dtype)
    got = kiln.vecdot(kiln.asarray(a), kiln.asarray(b), axis=axis).numpy()
    want = np.vecdot(a.astype(np.float64), b.astype(np.float64), axis=axis)
    tol = 0 if dtype == "int32" else (1e-2 if dtype == "float16" else 1e-5)
    assert got.dtype == np.dtype(dtype)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=tol, atol=tol)


@pytest.mark.parametrize(
    "s1,s2,axes",
    [
        ((3, 4, 5), (4, 5, 6), 2),
        ((3, 4), (4, 7), 1),
        ((3, 4), (5,), 0),
        ((2, 3, 5), (5, 3, 7), ([1, 2], [1, 0])),
        ((2, 3, 5), (3, 2), ([-3, 1], [1, 0])),
        ((2, 3), (3, 4), (1, 0)),
        ((4, 0), (0, 5), 1),
    ],
)
def test_tensordot_matches_numpy(rng, s1, s2, axes):
    a, b = rng.uniform(-1, 1, size=s1).astype(np.float32), rng.uniform(-1, 1, size=s2).astype(np.float32)
    got = kiln.tensordot(kiln.asarray(a), kiln.asarray(b), axes=axes).numpy()
    want = np.tensordot(a.astype(np.float64), b.astype(np.float64), axes=axes)
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_linalg_errors():
    a = kiln.asarray(np.ones((2, 3), np.float32))
    b = kiln.asarray(np.ones((2, 4), np.float32))
    with pytest.raises(kiln.ShapeError):
        kiln.vecdot(a, b)
    with pytest.raises(kiln.ShapeError):
        kiln.tensordot(a, b, axes=1)
    with pytest.raises(kiln.InvalidArgumentError):
        kiln.tensordot(a, b, axes=3)
    with pytest.raises(kiln.InvalidArgumentError):
        kiln.tensordot(a, b, axes=-1)
    with pytest.raises(kiln.InvalidArgumentError):
        kiln.tensordot(a, b, axes="x")
    with pytest.raises(kiln.DTypeError):
        kiln.tensordot(a, kiln.asarray(np.ones((3, 2), np.int32)), axes=1)
