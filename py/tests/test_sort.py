"""sort, argsort, searchsorted, count_nonzero, nonzero, unique_* and isin against numpy (and
array-api-strict for the standard's descending order), on special values (NaN, ±inf, ±0),
duplicates, sorted and reversed input and awkward shapes."""

import kiln
import numpy as np
import pytest
from conftest import HAS_F16

DTYPES = ["float32", "int32", "uint32", "bool"] + (["float16"] if HAS_F16 else [])
SHAPES = [((0,), 0), ((1,), 0), ((7,), -1), ((13, 17), 1), ((13, 17), 0), ((3, 1, 257), -1), ((2, 0, 3), 1),
          ((600,), 0), ((4, 5, 6), 1)]
POOLS = {
    "float32": [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 3e38, 1e-40],
    "float16": [np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 0.5, 65504.0, 6e-8],
    "int32": [0, 1, -1, 2**31 - 1, -(2**31), 7],
    "uint32": [0, 1, 2**32 - 1, 2**31, 7],
    "bool": [0, 1],
}


def awkward(rng, shape, dtype):
    """Few distinct values (ties everywhere) mixed with the dtype's special values."""
    pool = np.array(POOLS[dtype], dtype=np.float64 if dtype.startswith("float") else np.int64)
    v = pool[rng.integers(0, len(pool), size=shape)]
    if dtype.startswith("float"):
        v = np.where(rng.integers(0, 3, size=shape) == 0, np.round(rng.uniform(-3, 3, size=shape)), v)
    with np.errstate(over="ignore"):
        return np.asarray(v).astype(dtype)


def same(got, want):
    """Bit-for-bit equality as numpy values (any NaN matches any NaN; -0 differs from +0)."""
    g = got.numpy() if isinstance(got, kiln.Tensor) else np.asarray(got)
    want = np.asarray(want)
    assert g.shape == want.shape, (g.shape, want.shape)
    assert g.dtype == want.dtype, (g.dtype, want.dtype)
    if g.dtype.kind == "f":
        nan = np.isnan(want)
        assert np.array_equal(np.isnan(g), nan)
        assert np.array_equal(g[~nan], want[~nan]) and np.array_equal(np.signbit(g[~nan]), np.signbit(want[~nan]))
    else:
        assert np.array_equal(g, want)


def argsort_ref(x, axis, descending):
    if not descending:
        return np.argsort(x, axis=axis, kind="stable")
    n = x.shape[axis]
    return n - 1 - np.flip(np.argsort(np.flip(x, axis=axis), axis=axis, kind="stable"), axis=axis)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,axis", SHAPES)
def test_sort_and_argsort_match_numpy(rng, dtype, shape, axis):
    x = awkward(rng, shape, dtype)
    t = kiln.asarray(x)
    for desc in (False, True):
        idx = argsort_ref(x, axis, desc).astype(np.int32)
        same(kiln.argsort(t, axis=axis, descending=desc), idx)
        same(kiln.sort(t, axis=axis, descending=desc, stable=True), np.take_along_axis(x, idx, axis=axis))


def test_descending_matches_array_api_strict(rng):
    xp = pytest.importorskip("array_api_strict")
    x = awkward(rng, (9, 31), "float32")
    for axis in (0, 1):
        want = xp.argsort(xp.asarray(x), axis=axis, descending=True)
        same(kiln.argsort(kiln.asarray(x), axis=axis, descending=True), np.asarray(want).astype(np.int32))
        # array-api-strict's sort(descending=True) flips the ascending sort, which reverses the
        # order of -0.0 and 0.0 (equal, so the standard's stability keeps them in place): the
        # values must agree under ==, and be exactly x taken in argsort's order.
        got = kiln.sort(kiln.asarray(x), axis=axis, descending=True)
        w = np.asarray(xp.sort(xp.asarray(x), axis=axis, descending=True))
        assert np.array_equal(got.numpy(), w, equal_nan=True)
        same(got, np.take_along_axis(x, np.asarray(want), axis=axis))


def test_sorted_reversed_and_long_rows():
    n = 3001
    for x in (np.arange(n, dtype=np.float32), np.arange(n, 0, -1).astype(np.float32), np.zeros(n, np.float32)):
        same(kiln.argsort(kiln.asarray(x)), np.argsort(x, kind="stable").astype(np.int32))


def test_the_namespace_has_them(rng):
    x = kiln.asarray(awkward(rng, (5, 4), "float32"))
    xp = x.__array_namespace__()
    for name in ("sort", "argsort", "searchsorted", "count_nonzero", "nonzero", "unique_all", "unique_counts",
                 "unique_inverse", "unique_values", "isin"):
        assert callable(getattr(xp, name)), name
    assert xp.__array_namespace_info__().capabilities()["data-dependent shapes"]


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint32"] + (["float16"] if HAS_F16 else []))
def test_searchsorted_matches_numpy(rng, dtype):
    for m, shape2 in ((0, (4,)), (1, (5,)), (20, (3, 7)), (300, (41,))):
        x1 = np.sort(awkward(rng, (m,), dtype), kind="stable")
        x2 = awkward(rng, shape2, dtype)
        if m:
            x2.reshape(-1)[::2] = x1[rng.integers(0, m, size=x2.reshape(-1)[::2].shape)]
        for side in ("left", "right"):
            same(kiln.searchsorted(kiln.asarray(x1), kiln.asarray(x2), side=side),
                 np.searchsorted(x1, x2, side=side).astype(np.int32))
    # sorter, and a Python scalar x2.
    x1 = awkward(rng, (30,), dtype)
    order = np.argsort(x1, kind="stable")
    x2 = awkward(rng, (9,), dtype)
    same(kiln.searchsorted(kiln.asarray(x1), kiln.asarray(x2), sorter=kiln.asarray(order.astype(np.int32))),
         np.searchsorted(x1, x2, sorter=order).astype(np.int32))
    same(kiln.searchsorted(kiln.asarray(np.sort(x1)), 1), np.asarray(np.searchsorted(np.sort(x1), 1), np.int32))


@pytest.mark.parametrize("dtype", DTYPES)
def test_count_nonzero_and_nonzero_match_numpy(rng, dtype):
    for shape, axis in (((0,), None), ((1,), None), ((7,), 0), ((13, 17), 1), ((3, 4, 5), (0, 2)), ((2, 0, 3), 1),
                        ((1031,), None)):
        x = awkward(rng, shape, dtype)
        for keepdims in (False, True):
            same(kiln.count_nonzero(kiln.asarray(x), axis=axis, keepdims=keepdims),
                 np.asarray(np.count_nonzero(x, axis=axis, keepdims=keepdims)).astype(np.int32))
        got = kiln.nonzero(kiln.asarray(x))
        want = np.nonzero(x)
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            same(g, w.astype(np.int32))


@pytest.mark.parametrize("dtype", DTYPES)
def test_unique_matches_numpy(rng, dtype):
    for shape in ((0,), (1,), (7,), (13, 17), (3, 1, 257), (2, 0, 3)):
        x = awkward(rng, shape, dtype)
        t = kiln.asarray(x)
        want = np.unique_all(x)  # every NaN distinct, inverse of x's shape: the standard's
        got = kiln.unique_all(t)
        same(got.values, want.values)
        same(got.indices, want.indices.astype(np.int32))
        same(got.inverse_indices, want.inverse_indices.astype(np.int32))
        same(got.counts, want.counts.astype(np.int32))
        c = kiln.unique_counts(t)
        same(c.values, want.values)
        same(c.counts, want.counts.astype(np.int32))
        i = kiln.unique_inverse(t)
        same(i.inverse_indices, want.inverse_indices.astype(np.int32))
        same(kiln.unique_values(t), want.values)


@pytest.mark.parametrize("dtype", DTYPES)
def test_isin_matches_numpy(rng, dtype):
    for s1, s2 in (((5, 7), (9,)), ((6,), (0,)), ((0, 2), (4,)), ((13, 17), (3, 4)), ((1,), (1,))):
        x1, x2 = awkward(rng, s1, dtype), awkward(rng, s2, dtype)
        for invert in (False, True):
            same(kiln.isin(kiln.asarray(x1), kiln.asarray(x2), invert=invert), np.isin(x1, x2, invert=invert))


def test_bad_input_raises():
    x = kiln.asarray(np.ones((2, 3), np.float32))
    with pytest.raises(kiln.InvalidArgumentError):
        kiln.sort(x, axis=2)
    with pytest.raises(kiln.InvalidArgumentError):
        kiln.argsort(kiln.asarray(np.float32(1.0)))
    with pytest.raises(kiln.InvalidArgumentError):
        kiln.nonzero(kiln.asarray(np.float32(1.0)))
    with pytest.raises(kiln.ShapeError):
        kiln.searchsorted(x, x)
    with pytest.raises(ValueError):
        kiln.searchsorted(kiln.asarray(np.ones(3, np.float32)), 1.0, side="middle")
    with pytest.raises(TypeError):
        kiln.isin(kiln.asarray(np.ones(3, np.int32)), kiln.asarray(np.ones(3, np.uint32)))
    with pytest.raises(kiln.InvalidArgumentError):
        kiln.count_nonzero(x, axis=(0, 0))
