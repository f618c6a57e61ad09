"""The Array API namespace (2024.12) and the standard's float functions, checked against numpy
(the independent reference) on special values, awkward sizes and the promotion table."""

import math

import kiln
import numpy as np
import pytest
from conftest import FLOATS

# Special values: signed zeros, infinities, NaN, the dtype's extremes, subnormals, halves.
F32_SPECIALS = [
    0.0,
    -0.0,
    np.inf,
    -np.inf,
    np.nan,
    1.0,
    -1.0,
    0.5,
    -0.5,
    1.5,
    2.5,
    -2.5,
    3.5,
    1e-3,
    -1e-3,
    1e-10,
    -1e-10,
    0.999,
    -0.999,
    1.001,
    10.0,
    -10.0,
    88.0,
    89.0,
    -89.0,
    100.0,
    1e10,
    -1e10,
    7.93e14,
    3e38,
    -3e38,
    float(np.finfo(np.float32).max),
    float(np.finfo(np.float32).tiny),
    1e-40,
    -1e-40,
    8388607.5,
    -8388608.5,
    16777216.0,
]
F16_SPECIALS = [
    0.0,
    -0.0,
    np.inf,
    -np.inf,
    np.nan,
    1.0,
    -1.0,
    0.5,
    -0.5,
    1.5,
    2.5,
    -2.5,
    1e-3,
    0.999,
    10.0,
    -10.0,
    11.0,
    65504.0,
    -65504.0,
    6.1035e-05,
    5.96e-08,
    1000.5,
]
SPECIALS = {"float32": F32_SPECIALS, "float16": F16_SPECIALS}

UNARY = [
    "asin",
    "acos",
    "atan",
    "sinh",
    "cosh",
    "asinh",
    "acosh",
    "atanh",
    "log1p",
    "expm1",
    "log2",
    "log10",
    "ceil",
    "trunc",
    "round",
    "sign",
    "reciprocal",
    "square",
]
NUMPY = {
    "asin": np.arcsin,
    "acos": np.arccos,
    "atan": np.arctan,
    "asinh": np.arcsinh,
    "acosh": np.arccosh,
    "atanh": np.arctanh,
    "atan2": np.arctan2,
}
EXACT = {"ceil", "trunc", "round", "sign", "square", "copysign", "nextafter", "remainder", "floor_divide"}


def np_fn(name):
    return NUMPY.get(name, getattr(np, name))


def check(got, want, exact, what):
    """NaN where numpy has NaN, the same infinity, zeros with numpy's sign, else within 4 ULP
    of the float64 result (or bit-equal for the exact ops)."""
    got = np.asarray(got)
    assert got.dtype == want.dtype, what
    g, w = got.astype(np.float64), want.astype(np.float64)
    nan = np.isnan(w)
    assert np.array_equal(np.isnan(g), nan), f"{what}: NaN at {np.nonzero(np.isnan(g) != nan)}"
    special = ~nan & ((w == 0) | np.isinf(w) | exact)
    bad = special & ((g != w) | (np.signbit(g) != np.signbit(w)))
    assert not bad.any(), f"{what}: got {got[bad]}, numpy {want[bad]}"
    rest = ~nan & ~special
    ulp = np.spacing(np.abs(want[rest])).astype(np.float64)
    err = np.abs(g[rest] - w[rest]) / ulp
    assert err.size == 0 or err.max() <= 4, f"{what}: {err.max()} ULP"


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("name", UNARY)
def test_unary_special_values_match_numpy(name, dtype):
    x = np.array(SPECIALS[dtype], dtype=dtype)
    with np.errstate(all="ignore"):
        # numpy in float64 rounded once: the correctly rounded result numpy's float32 loops approach.
        want = np_fn(name)(x.astype(np.float64)).astype(dtype)
    for n in (len(x), len(x) // 4 * 4):  # the scalar kernel and the vec4 kernel
        check(getattr(kiln, name)(kiln.asarray(x[:n])).numpy(), want[:n], name in EXACT, f"{name} {dtype} n={n}")


BINARY = ["atan2", "hypot", "logaddexp", "copysign", "nextafter", "remainder", "floor_divide"]
B32 = [
    0.0,
    -0.0,
    np.inf,
    -np.inf,
    np.nan,
    1.0,
    -1.0,
    2.0,
    -2.0,
    0.5,
    -0.5,
    2.5,
    -7.5,
    0.1,
    1e10,
    -1e10,
    3e38,
    1e-3,
    7.0,
]


@pytest.mark.parametrize("name", BINARY)
def test_binary_special_value_pairs_match_numpy(name):
    v = np.array(B32, dtype=np.float32)
    a, b = v.reshape(-1, 1), v
    with np.errstate(all="ignore"):
        if name in ("nextafter", "remainder", "floor_divide", "copysign"):
            want = np_fn(name)(a, b)  # numpy's float32 loops: exact in float32
        else:
            want = np_fn(name)(a.astype(np.float64), b.astype(np.float64)).astype(np.float32)
    got = getattr(kiln, name)(kiln.asarray(a), kiln.asarray(b)).numpy()
    check(got, want, name in EXACT, name)


@pytest.mark.parametrize("n", [0, 1, 7, 257, 1031])
def test_random_inputs_on_awkward_sizes(rng, n):
    x = rng.uniform(-50, 50, n).astype(np.float32)
    y = rng.uniform(-5, 5, n).astype(np.float32)
    k, ky = kiln.asarray(x), kiln.asarray(y)
    with np.errstate(all="ignore"):
        check((k % ky).numpy(), np.remainder(x, y), True, "%")
        check((k // ky).numpy(), np.floor_divide(x, y), True, "//")
        check((k % 3.0).numpy(), np.remainder(x, np.float32(3)), True, "% scalar")
        check((7.0 // k).numpy(), np.floor_divide(np.float32(7), x), True, "scalar //")
        check(kiln.atan2(k, ky).numpy(), np.arctan2(x.astype(np.float64), y).astype(np.float32), False, "atan2")
        check(kiln.round(k).numpy(), np.round(x), True, "round")
    i = rng.integers(-1000, 1000, n).astype(np.int32)
    j = rng.integers(-9, 9, n).astype(np.int32)
    with np.errstate(all="ignore"):
        assert np.array_equal((kiln.asarray(i) % kiln.asarray(j)).numpy(), np.where(j == 0, 0, np.remainder(i, j)))
        assert np.array_equal(
            (kiln.asarray(i) // kiln.asarray(j)).numpy(), np.where(j == 0, 0, i // np.where(j == 0, 1, j))
        )
    for f in ("ceil", "trunc", "round", "sign", "square"):
        assert np.array_equal(getattr(kiln, f)(kiln.asarray(i)).numpy(), getattr(np, f)(i)), f


def test_accuracy_where_naive_formulas_fail():
    x = np.array([1e-10, -1e-10, 1e-7, 3e-5], np.float32)
    for f in (kiln.log1p, kiln.expm1):
        got = f(kiln.asarray(x)).numpy().astype(np.float64)
        want = getattr(np, f.__name__)(x.astype(np.float64))
        assert np.all(np.abs(got - want) <= 2 * np.spacing(np.abs(want).astype(np.float32))), f.__name__
    assert kiln.sinh(kiln.asarray(np.float32([89.0]))).numpy()[0] == np.float32(np.sinh(89.0))  # e^89 overflows f32
    assert kiln.remainder(kiln.asarray(np.float32([1e30])), 7.0).numpy()[0] == np.remainder(
        np.float32(1e30), np.float32(7)
    )
    assert kiln.floor_divide(kiln.asarray(np.float32([1.0])), 0.1).numpy()[0] == np.floor_divide(
        np.float32(1), np.float32(0.1)
    )


def test_clip_propagates_nan_and_takes_scalars_or_arrays():
    x = np.array([-3.0, -1.0, 0.0, 1.0, 3.0, np.nan], np.float32)
    k = kiln.asarray(x)
    assert np.array_equal(kiln.clip(k, -1.5, 2).numpy(), np.clip(x, -1.5, 2), equal_nan=True)
    assert np.array_equal(kiln.clip(k, max=0.5).numpy(), np.minimum(x, 0.5), equal_nan=True)
    assert np.array_equal(kiln.clip(k, min=0).numpy(), np.maximum(x, 0), equal_nan=True)
    lo = np.array([0, np.nan, 0, 0, 0, 0], np.float32)
    assert np.array_equal(kiln.clip(k, kiln.asarray(lo), 2).numpy(), np.clip(x, lo, 2), equal_nan=True)
    assert np.array_equal(kiln.clip(k).numpy(), x, equal_nan=True)
    i = kiln.asarray(np.arange(-5, 5, dtype=np.int32))
    assert np.array_equal(kiln.clip(i, -2, 3).numpy(), np.clip(np.arange(-5, 5), -2, 3).astype(np.int32))
    with pytest.raises(ValueError):
        kiln.clip(kiln.asarray(np.float32([1.0])), kiln.asarray(np.zeros(3, np.float32)))


def test_namespace_version_constants_and_dtypes():
    x = kiln.asarray(np.float32([1, 2]))
    assert x.__array_namespace__() is kiln and x.__array_namespace__(api_version="2024.12") is kiln
    assert kiln.__array_api_version__ == "2024.12"
    assert (kiln.e, kiln.pi, kiln.inf) == (math.e, math.pi, math.inf) and math.isnan(kiln.nan)
    assert kiln.newaxis is None
    assert x.dtype == kiln.float32 and kiln.asarray(np.int32([1])).dtype == kiln.int32
    info = kiln.__array_namespace_info__()
    assert info.default_dtypes() == {"real floating": kiln.float32, "integral": kiln.int32, "indexing": kiln.int32}
    ds = info.dtypes()
    assert {"float32", "float16", "int32", "uint32"} <= set(ds) and "float64" not in ds
    assert info.dtypes(kind="real floating") == {"float32": kiln.float32, "float16": kiln.float16}
    assert info.dtypes(kind=("signed integer", "unsigned integer")) == {"int32": kiln.int32, "uint32": kiln.uint32}
    assert info.capabilities()["boolean indexing"] is True and info.capabilities()["max dimensions"] == 8
    assert info.default_device() in info.devices()
    assert kiln.arcsin is kiln.asin and kiln.arctan2 is kiln.atan2


@pytest.mark.parametrize("dtype", ["float32", "float16"])
def test_finfo_matches_numpy(dtype):
    f, n = kiln.finfo(getattr(kiln, dtype)), np.finfo(dtype)
    assert (f.bits, f.eps, f.max, f.min, f.smallest_normal) == (
        n.bits,
        float(n.eps),
        float(n.max),
        float(n.min),
        float(n.smallest_normal),
    )
    assert f.dtype == np.dtype(dtype)
    assert kiln.finfo(kiln.asarray(np.zeros(2, dtype))).eps == float(n.eps)
    assert f.eps == 2.0 ** -(23 if dtype == "float32" else 10)


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
def test_iinfo_matches_numpy(dtype):
    i, n = kiln.iinfo(getattr(kiln, dtype)), np.iinfo(dtype)
    assert (i.bits, i.max, i.min, i.dtype) == (n.bits, int(n.max), int(n.min), np.dtype(dtype))
    with pytest.raises(TypeError):
        kiln.finfo(getattr(kiln, dtype))
    with pytest.raises(TypeError):
        kiln.iinfo(kiln.float32)


def test_promotion_table_and_casting():
    f16, f32, i32, u32 = kiln.float16, kiln.float32, kiln.int32, kiln.uint32
    # The standard's table where it stays inside Kiln's dtypes (numpy agrees on each).
    for a, b, r in [(f16, f32, f32), (f32, f16, f32), (f16, f16, f16), (i32, i32, i32), (u32, u32, u32)]:
        assert kiln.result_type(a, b) == r == np.result_type(a, b)
    assert kiln.result_type(f16, kiln.asarray(np.float32([1])), f16) == f32
    # Python scalars join a dtype of their kind (2024.12).
    assert kiln.result_type(f16, 1.5) == f16 and kiln.result_type(i32, 3) == i32 and kiln.result_type(f32, 2) == f32
    with pytest.raises(TypeError):
        kiln.result_type(i32, 1.5)
    with pytest.raises(TypeError):
        kiln.result_type(i32, u32)  # int64 in the standard: not a Kiln dtype
    with pytest.raises(TypeError):
        kiln.result_type(i32, f32)  # mixed kinds: unspecified by the standard
    with pytest.raises(TypeError):
        kiln.result_type(np.float64)
    assert kiln.can_cast(f16, f32) and not kiln.can_cast(f32, f16) and not kiln.can_cast(i32, f32)
    assert not kiln.can_cast(u32, i32) and kiln.can_cast(kiln.asarray(np.int32([1])), i32)
    assert kiln.isdtype(f32, "real floating") and kiln.isdtype(i32, ("integral", "bool"))
    assert kiln.isdtype(u32, "numeric") and not kiln.isdtype(u32, "signed integer")
    assert not kiln.isdtype(f32, "complex floating") and kiln.isdtype(f16, f16) and not kiln.isdtype(f16, f32)
    with pytest.raises(ValueError):
        kiln.isdtype(f32, "floating")


def test_float_only_functions_refuse_integers():
    i = kiln.asarray(np.int32([1, 2]))
    for f in (kiln.log1p, kiln.asin, kiln.reciprocal):
        with pytest.raises(kiln.DTypeError):
            f(i)
    with pytest.raises(kiln.DTypeError):
        kiln.atan2(i, i)


# ---- creation and manipulation composed from kiln-core ops


@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (3, 5), (2, 1, 4)])
def test_manipulation_matches_numpy(rng, shape):
    x = rng.uniform(-3, 3, shape).astype(np.float32)
    k = kiln.asarray(x)
    for a in range(-len(shape) - 1, len(shape) + 1):
        assert np.array_equal(kiln.expand_dims(k, axis=a).numpy(), np.expand_dims(x, a))
    assert np.array_equal(kiln.flip(k).numpy(), np.flip(x))
    for a in range(len(shape)):
        assert np.array_equal(kiln.flip(k, axis=a).numpy(), np.flip(x, a))
        assert np.array_equal(kiln.moveaxis(k, a, -1).numpy(), np.moveaxis(x, a, -1))
    ones = tuple(i for i, d in enumerate(shape) if d == 1)
    if ones:
        assert np.array_equal(kiln.squeeze(k, axis=ones).numpy(), np.squeeze(x, axis=ones))
    target = (2,) + shape
    assert np.array_equal(kiln.broadcast_to(k, target).numpy(), np.broadcast_to(x, target))
    for a in range(-len(shape) - 1, len(shape) + 1):
        assert np.array_equal(kiln.stack([k, k * 2], axis=a).numpy(), np.stack([x, x * 2], axis=a))


def test_manipulation_errors_and_bit_exact_copies():
    k = kiln.asarray(np.float32([[-0.0, np.nan, 1.0]]))
    b = kiln.broadcast_to(k, (3, 1, 3)).numpy()
    assert np.signbit(b[:, 0, 0]).all() and np.isnan(b[:, 0, 1]).all()
    with pytest.raises(ValueError):
        kiln.squeeze(k, axis=1)
    with pytest.raises(ValueError):
        kiln.broadcast_to(k, (2, 2))
    with pytest.raises(IndexError):
        kiln.expand_dims(k, axis=4)
    with pytest.raises(ValueError):
        kiln.moveaxis(k, (0, 1), 0)
    assert np.array_equal(kiln.moveaxis(kiln.zeros((2, 3, 4)), (0, 2), (2, 0)).shape, (4, 3, 2))


@pytest.mark.parametrize("n,m,kk", [(0, 0, 0), (1, 1, 0), (4, 4, 0), (3, 5, 1), (5, 3, -2), (3, 3, 7)])
def test_eye_tril_triu_match_numpy(rng, n, m, kk):
    assert np.array_equal(kiln.eye(n, m, k=kk).numpy(), np.eye(n, m, k=kk, dtype=np.float32))
    assert np.array_equal(kiln.eye(n, m, k=kk, dtype=kiln.int32).numpy(), np.eye(n, m, k=kk, dtype=np.int32))
    x = rng.uniform(-3, 3, (2, n, m)).astype(np.float32)
    assert np.array_equal(kiln.tril(kiln.asarray(x), k=kk).numpy(), np.tril(x, kk))
    assert np.array_equal(kiln.triu(kiln.asarray(x), k=kk).numpy(), np.triu(x, kk))


@pytest.mark.parametrize(
    "args",
    [(0.0, 1.0, 5, True), (-3.0, 7.5, 1031, True), (2.0, -1.0, 7, False), (0.0, 1.0, 0, True), (1.0, 1.0, 1, True)],
)
def test_linspace_matches_numpy(args):
    a, b, n, endpoint = args
    got = kiln.linspace(a, b, n, endpoint=endpoint)
    assert got.dtype == kiln.float32
    assert np.array_equal(got.numpy(), np.linspace(a, b, n, endpoint=endpoint).astype(np.float32))


@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (3, 5), (2, 1, 4)])
def test_more_manipulation_matches_numpy(rng, shape):
    x = rng.uniform(-3, 3, shape).astype(np.float32)
    k = kiln.asarray(x)
    for a in range(len(shape)):
        got = kiln.unstack(k, axis=a)
        assert len(got) == shape[a] and all(np.array_equal(g.numpy(), np.take(x, i, axis=a)) for i, g in enumerate(got))
        for s in (-8, -1, 0, 1, 3, 13):
            assert np.array_equal(kiln.roll(k, s, axis=a).numpy(), np.roll(x, s, axis=a)), (a, s)
        for r in (0, 1, 3):
            assert np.array_equal(kiln.repeat(k, r, axis=a).numpy(), np.repeat(x, r, axis=a))
        counts = rng.integers(0, 3, shape[a])
        assert np.array_equal(kiln.repeat(k, counts.tolist(), axis=a).numpy(), np.repeat(x, counts, axis=a))
    assert np.array_equal(kiln.roll(k, 5).numpy(), np.roll(x, 5))
    assert np.array_equal(kiln.repeat(k, 2).numpy(), np.repeat(x, 2))
    for reps in [(2,), (1, 3), (2, 0, 1), (2, 1, 2, 1)]:
        assert np.array_equal(kiln.tile(k, reps).numpy(), np.tile(x, reps)), reps
    y = rng.uniform(-1, 1, (1,) + shape[1:]).astype(np.float32)
    for g, w in zip(kiln.broadcast_arrays(k, kiln.asarray(y)), np.broadcast_arrays(x, y)):
        assert np.array_equal(g.numpy(), w)


@pytest.mark.parametrize("indexing", ["xy", "ij"])
def test_meshgrid_matches_numpy(indexing):
    a, b, c = np.arange(3, dtype=np.float32), np.arange(4, dtype=np.float32) * 2, np.arange(2, dtype=np.float32) - 5
    for arrays in [(a,), (a, b), (a, b, c)]:
        got = kiln.meshgrid(*[kiln.asarray(v) for v in arrays], indexing=indexing)
        want = np.meshgrid(*arrays, indexing=indexing)
        assert len(got) == len(want) and all(np.array_equal(g.numpy(), w) for g, w in zip(got, want))


def standard_only_program(x, y):
    """Written against the standard alone: runs on numpy arrays and on kiln arrays unchanged."""
    xp = x.__array_namespace__()
    eps = xp.finfo(x.dtype).eps
    r = xp.hypot(x, y)
    theta = xp.atan2(y, x)
    m = xp.max(x, axis=-1, keepdims=True)
    lse = xp.log(xp.sum(xp.exp(x - m), axis=-1)) + xp.squeeze(m, axis=-1)
    c = xp.clip(xp.round(x * 4) / 4, min=-1.0, max=1.0)
    n = x.shape[-1]
    grid = xp.stack([xp.linspace(0.0, 1.0, n, dtype=x.dtype), xp.flip(xp.linspace(0.0, 1.0, n, dtype=x.dtype))])
    q = xp.floor_divide(x, 0.3) + x % 0.3 + xp.expm1(xp.log1p(xp.abs(x) * eps))
    return [r, theta, lse, c, grid, q, xp.tril(xp.squeeze(xp.expand_dims(x, axis=0), axis=0), k=1)]


def test_a_standard_only_program_matches_numpy(rng):
    x = rng.uniform(-2, 2, (5, 7)).astype(np.float32)
    y = rng.uniform(-2, 2, (5, 7)).astype(np.float32)
    want = standard_only_program(x, y)
    got = standard_only_program(kiln.asarray(x), kiln.asarray(y))
    for i, (g, w) in enumerate(zip(got, want)):
        g = g.numpy()
        assert g.shape == w.shape and g.dtype == w.dtype, i
        np.testing.assert_allclose(g, w, rtol=2e-6, atol=2e-6, err_msg=f"result {i}")


def test_dtype_functions_agree_with_array_api_strict():
    # array-api-strict (the standard's reference implementation over numpy) where installed;
    # the standard has no float16 (numpy is the reference for it above).
    xs = pytest.importorskip("array_api_strict")
    names = ["float32", "int32", "uint32"] + (["bool"] if hasattr(kiln, "bool") else [])
    for a in names:
        for b in names:
            ka, kb, sa, sb = getattr(kiln, a), getattr(kiln, b), getattr(xs, a), getattr(xs, b)
            try:
                want = xs.result_type(sa, sb)
            except TypeError:
                want = None
            want = None if want is None else str(want).split(".")[-1]
            if want in names:
                assert kiln.result_type(ka, kb) == getattr(kiln, want), (a, b)
            else:  # the standard has none (mixed kinds) or Kiln lacks it (int64)
                with pytest.raises(TypeError):
                    kiln.result_type(ka, kb)
            assert kiln.can_cast(ka, kb) == xs.can_cast(sa, sb), (a, b)
        for kind in (
            "bool",
            "signed integer",
            "unsigned integer",
            "integral",
            "real floating",
            "complex floating",
            "numeric",
        ):
            assert kiln.isdtype(getattr(kiln, a), kind) == xs.isdtype(getattr(xs, a), kind), (a, kind)
    for name in ("float32",):
        f, s = kiln.finfo(getattr(kiln, name)), xs.finfo(getattr(xs, name))
        assert (f.bits, f.eps, f.max, f.min, f.smallest_normal) == (s.bits, s.eps, s.max, s.min, s.smallest_normal)
    for name in ("int32", "uint32"):
        i, s = kiln.iinfo(getattr(kiln, name)), xs.iinfo(getattr(xs, name))
        assert (i.bits, i.max, i.min) == (s.bits, s.max, s.min)


def standard_only_statistics(x, k):
    """A second program on the standard alone: sorting, searching, sets, scans, statistics,
    linear algebra, bitwise ops and indexing — the same on numpy, array-api-strict and kiln."""
    xp = x.__array_namespace__()
    s = xp.sort(x, axis=-1)
    order = xp.argsort(x, axis=0, descending=True)
    edges = xp.linspace(-2.0, 2.0, 9, dtype=x.dtype)
    bins = xp.searchsorted(edges, xp.reshape(x, (-1,)), side="right")
    u = xp.unique_counts(xp.round(x * 2))
    csum = xp.cumulative_sum(x, axis=1, include_initial=True)
    cprod = xp.cumulative_prod(xp.abs(x) + 0.5, axis=0)
    spread = xp.std(x, axis=0, correction=1)
    total = xp.prod(xp.abs(x[:2, :3]) + 1, axis=None)
    d = xp.diff(x, axis=-1, n=2)
    v = xp.vecdot(x, s, axis=-1)
    t = xp.tensordot(x, xp.permute_dims(x, (1, 0)), axes=1)
    bits = xp.bitwise_xor(k, xp.bitwise_left_shift(k, xp.asarray(3, dtype=k.dtype))) & 0xFF
    nz = xp.count_nonzero(x > 0.5, axis=1)
    picked = x[1:, ::2][x[1:, ::2] > 0]
    inside = xp.isin(k, xp.asarray([1, 2, 3], dtype=k.dtype))
    return [s, order, bins, u.values, u.counts, csum, cprod, spread, total, d, v, t, bits, nz, picked, inside]


def test_a_standard_only_statistics_program_matches_array_api_strict(rng):
    # numpy's own namespace lacks parts of the standard (argsort's `descending`,
    # cumulative_prod): array-api-strict (the standard over numpy) is the reference here.
    xs = pytest.importorskip("array_api_strict")
    x = rng.uniform(-2, 2, (6, 5)).astype(np.float32)
    x[0, 0], x[2, 3] = -0.0, 0.0
    k = rng.integers(-100, 100, (6, 5)).astype(np.int32)
    want = [np.asarray(r) for r in standard_only_statistics(xs.asarray(x), xs.asarray(k))]
    got = standard_only_statistics(kiln.asarray(x), kiln.asarray(k))
    # Kiln's default index dtype is int32 (no int64 on the GPU; __array_namespace_info__ says so).
    assert kiln.__array_namespace_info__().default_dtypes()["indexing"] == kiln.int32
    for i, (g, w) in enumerate(zip(got, want)):
        g = g.numpy()
        wdt = np.dtype(np.int32) if w.dtype == np.int64 else w.dtype
        assert g.shape == w.shape and g.dtype == wdt, (i, g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g, w, rtol=3e-6, atol=3e-6, err_msg=f"result {i}")
