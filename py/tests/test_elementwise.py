"""Unary, binary, comparison, where and cast against numpy; broadcasting and scalar rules."""

import kiln
import numpy as np
import pytest
from conftest import FLOATS, HAS_F16, check, erf, f64, rand

SHAPES = [(0,), (1,), (13,), (3, 7), (2, 3, 65), (300,)]


def _gelu(x):
    return 0.5 * x * (1 + erf(x / np.sqrt(2)))


def _gelu_tanh(x):
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))


UNARY = {
    "negative": (lambda x: -x, (-3, 3)),
    "abs": (np.abs, (-3, 3)),
    "exp": (np.exp, (-5, 5)),
    "log": (np.log, (0.05, 5)),
    "sqrt": (np.sqrt, (0.0, 9)),
    "rsqrt": (lambda x: 1 / np.sqrt(x), (0.05, 9)),
    "sin": (np.sin, (-4, 4)),
    "cos": (np.cos, (-4, 4)),
    "tan": (np.tan, (-1.4, 1.4)),
    "tanh": (np.tanh, (-6, 6)),
    "sigmoid": (lambda x: 1 / (1 + np.exp(-x)), (-8, 8)),
    "relu": (lambda x: np.maximum(x, 0), (-3, 3)),
    "gelu": (_gelu, (-4, 4)),
    "gelu_tanh": (_gelu_tanh, (-4, 4)),
    "silu": (lambda x: x / (1 + np.exp(-x)), (-6, 6)),
}


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("name", sorted(UNARY))
def test_unary_float(rng, name, shape, dtype):
    ref, (lo, hi) = UNARY[name]
    a = rand(rng, shape, dtype, lo, hi)
    got = getattr(kiln, name)(kiln.asarray(a))
    check(got, ref(f64(a)), dtype, scale=5 if dtype == "float32" else 1)
    if name == "negative":
        check(-kiln.asarray(a), ref(f64(a)), dtype)
    if name == "abs":
        check(abs(kiln.asarray(a)), ref(f64(a)), dtype)


def test_unary_aliases_and_numpy_input(rng):
    a = rand(rng, (5,), "float32")
    check(kiln.neg(a), -f64(a), "float32")
    check(kiln.exp(a), np.exp(f64(a)), "float32", scale=5)
    check(kiln.gelu(a, approximate="tanh"), _gelu_tanh(f64(a)), "float32", scale=5)
    with pytest.raises(ValueError):
        kiln.gelu(a, approximate="fast")


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
def test_unary_int(rng, dtype):
    a = rand(rng, (17,), dtype)
    t = kiln.asarray(a)
    check(kiln.abs(t), np.abs(a), dtype)
    check(kiln.relu(t), np.maximum(a, 0), dtype)
    if dtype == "int32":
        check(-t, -a, dtype)
    with pytest.raises(TypeError) as e:
        kiln.exp(t)
    assert e.value.code == 4


BINARY = {
    "add": np.add,
    "subtract": np.subtract,
    "multiply": np.multiply,
    "divide": np.divide,
    "maximum": np.maximum,
    "minimum": np.minimum,
}
COMPARE = {
    "equal": np.equal,
    "not_equal": np.not_equal,
    "less": np.less,
    "less_equal": np.less_equal,
    "greater": np.greater,
    "greater_equal": np.greater_equal,
}
BROADCAST = [
    ((), ()),
    ((5,), ()),
    ((), (5,)),
    ((4, 1), (1, 3)),
    ((2, 3, 4), (4,)),
    ((2, 1, 4), (3, 1)),
    ((1,), (7, 1)),
    ((0, 3), (1, 3)),
    ((0,), ()),
    ((2, 0, 1), (5,)),
    ((3, 1, 1, 2), (1, 4, 5, 1)),
    ((129,), (129,)),
]


@pytest.mark.parametrize("dtype", FLOATS)
@pytest.mark.parametrize("shapes", BROADCAST)
@pytest.mark.parametrize("name", sorted(BINARY) + ["pow"])
def test_binary_float_broadcast(rng, name, shapes, dtype):
    sa, sb = shapes
    if name == "pow":
        a, b = rand(rng, sa, dtype, 0.1, 3), rand(rng, sb, dtype, -2, 2)
        ref = np.power
    else:
        a, b = rand(rng, sa, dtype), rand(rng, sb, dtype, 0.5, 3)
        ref = BINARY[name]
    ta, tb = kiln.asarray(a), kiln.asarray(b)
    want = ref(f64(a), f64(b))
    check(getattr(kiln, name)(ta, tb), want, dtype, scale=5)
    op = {"add": "__add__", "subtract": "__sub__", "multiply": "__mul__", "divide": "__truediv__", "pow": "__pow__"}
    if name in op:
        check(getattr(ta, op[name])(tb), want, dtype, scale=5)


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
@pytest.mark.parametrize("shapes", BROADCAST[:8])
def test_binary_int(rng, dtype, shapes):
    sa, sb = shapes
    a, b = rand(rng, sa, dtype), rand(rng, sb, dtype, 1, 3) + np.asarray(1, dtype)
    ta, tb = kiln.asarray(a), kiln.asarray(b)
    check(ta + tb, (f64(a) + f64(b)).astype(dtype), dtype)
    check(ta * tb, (a * b).astype(dtype), dtype)
    check(kiln.maximum(ta, tb), np.maximum(a, b), dtype)
    check(kiln.minimum(ta, tb), np.minimum(a, b), dtype)
    # `/` is numpy's true division (float32 here: Kiln has no float64); `//` floor division.
    check(ta / tb, f64(a) / f64(b), "float32")
    check(ta // tb, a // b, dtype)
    if dtype == "int32":
        check(ta - tb, (a - b).astype(dtype), dtype)


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint32"] + (["float16"] if HAS_F16 else []))
@pytest.mark.parametrize("name", sorted(COMPARE))
def test_comparisons(rng, name, dtype):
    a = rand(rng, (4, 6), dtype, -3, 3)
    b = a.copy()
    b[::2] = rand(rng, (2, 6), dtype, -3, 3)
    row = b[1]
    ta, tb = kiln.asarray(a), kiln.asarray(b)
    ref = COMPARE[name]
    check(getattr(kiln, name)(ta, tb), ref(a, b), "bool")
    check(getattr(kiln, name)(ta, kiln.asarray(row)), ref(a, row), "bool")
    op = {"equal": "__eq__", "not_equal": "__ne__", "less": "__lt__", "less_equal": "__le__",
          "greater": "__gt__", "greater_equal": "__ge__"}[name]
    check(getattr(ta, op)(tb), ref(a, b), "bool")
    s = a.flat[3].item()
    check(getattr(ta, op)(s), ref(a, np.asarray(s, dtype)), "bool")


def test_scalars_and_reflected(rng):
    a = rand(rng, (3, 4), "float32", 0.5, 2)
    t = kiln.asarray(a)
    x = f64(a)
    check(t + 2, x + 2, "float32")
    check(2 + t, 2 + x, "float32")
    check(t - 1.5, x - 1.5, "float32")
    check(1.5 - t, 1.5 - x, "float32")
    check(t * 3, x * 3, "float32")
    check(3 * t, 3 * x, "float32")
    check(t / 4, x / 4, "float32")
    check(4 / t, 4 / x, "float32")
    check(t**2, x**2, "float32", scale=5)
    check(2**t, 2**x, "float32", scale=5)
    check(t + np.float32(1.5), x + 1.5, "float32")
    check(t * np.float64(2.0), x * 2, "float32")
    check(kiln.add(1, t), 1 + x, "float32")
    check(kiln.add(t, True), x + 1, "float32")
    check(kiln.multiply(2.0, 3.0), np.asarray(6.0), "float32")
    check(kiln.add(2, 3), np.asarray(5), "int32")
    # numpy arrays on either side (numpy defers to Kiln through __array_priority__).
    b = rand(rng, (4,), "float32")
    r = b + t
    assert isinstance(r, kiln.Tensor)
    check(r, f64(b) + x, "float32")
    check(t - b, x - f64(b), "float32")
    check(t + [1.0, 2.0, 3.0, 4.0], x + [1, 2, 3, 4], "float32")
    # Python scalars take the tensor's dtype; no silent truncation or wrap-around.
    i = kiln.asarray(np.array([1, 2, 3], np.int32))
    check(i + 2, np.array([3, 4, 5]), "int32")
    check(i * 2.0, np.array([2, 4, 6]), "int32")
    # kiln-core's one scalar check: INVALID_ARGUMENT (a ValueError), as in every binding.
    with pytest.raises(kiln.InvalidArgumentError):
        i + 1.5
    with pytest.raises(kiln.InvalidArgumentError):
        kiln.asarray(np.array([1], np.uint32)) + (-1)
    with pytest.raises(kiln.InvalidArgumentError):
        i + 2**40
    assert (t == None) is False  # noqa: E711  (foreign operands compare by identity)
    with pytest.raises(TypeError):
        t + "x"
    with pytest.raises(TypeError):
        t @ 2


@pytest.mark.parametrize("dtype", FLOATS + ["int32"])
def test_where(rng, dtype):
    c = rng.integers(0, 2, size=(3, 1, 5)).astype(np.uint32)
    a = rand(rng, (4, 5), dtype)
    b = rand(rng, (1, 5), dtype)
    want = np.where(c != 0, a, b)
    check(kiln.where(kiln.asarray(c), kiln.asarray(a), kiln.asarray(b)), want, dtype)
    check(kiln.where(c, kiln.asarray(a), 0), np.where(c != 0, a, 0), dtype)
    check(kiln.where(kiln.asarray(c), 1, kiln.asarray(b)), np.where(c != 0, 1, b), dtype)
    fc = (rand(rng, (4, 5), "float32") > 0).astype(np.float32)
    check(kiln.where(kiln.asarray(fc), kiln.asarray(a), kiln.asarray(b)), np.where(fc != 0, a, b), dtype)
    assert kiln.where_ is kiln.where


def test_where_mismatch_and_empty():
    with pytest.raises(TypeError):
        kiln.where(kiln.ones(3, dtype="uint32"), kiln.ones(3), kiln.ones(3, dtype="int32"))
    with pytest.raises(ValueError):
        kiln.where(kiln.ones(3, dtype="uint32"), kiln.ones(4), kiln.ones(3))
    r = kiln.where(kiln.ones((0, 2), dtype="uint32"), kiln.ones(2), kiln.zeros(2))
    assert r.shape == (0, 2)


CASTS = [
    ("float32", "int32", (-100, 100)),
    ("float32", "uint32", (0, 100)),
    ("int32", "float32", (-100, 100)),
    ("uint32", "float32", (0, 100)),
    ("int32", "uint32", (0, 100)),
] + ([("float32", "float16", (-10, 10)), ("float16", "float32", (-10, 10))] if HAS_F16 else [])


@pytest.mark.parametrize("src,dst,rng_", CASTS)
def test_cast(rng, src, dst, rng_):
    a = rand(rng, (5, 7), src, *rng_)
    t = kiln.asarray(a)
    want = np.trunc(f64(a)) if np.dtype(dst).kind in "iu" else f64(a)
    check(kiln.astype(t, dst), want, dst)
    check(t.astype(dst), want, dst)
    check(kiln.cast(t, dst), want, dst)


def test_dtype_mismatch_is_typeerror():
    a, b = kiln.ones(3), kiln.ones(3, dtype="int32")
    with pytest.raises(TypeError) as e:
        a + b
    assert isinstance(e.value, kiln.DTypeError) and e.value.code == 4 and e.value.code_name == "DTYPE_MISMATCH"
    with pytest.raises(ValueError) as e:
        kiln.ones(3) + kiln.ones(4)
    assert isinstance(e.value, kiln.ShapeError) and e.value.code == 3
    with pytest.raises(TypeError):
        kiln.pow(a, b)
    # Integer pow is defined (numpy's semantics), no longer a dtype error.
    np.testing.assert_array_equal(kiln.pow(b, b).numpy(), np.ones(3, dtype=np.int32))
