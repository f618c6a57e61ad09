"""The bool dtype against numpy: host bytes, comparisons, logical ops and operators, predicates
on special values, all/any, where, astype, full(shape, True), and the refusals."""

import kiln
import numpy as np
import pytest
from conftest import FLOATS, check

SHAPES = [(0,), (1,), (13,), (3, 7), (2, 3, 65), (1031,)]
DTYPES = FLOATS + ["int32", "uint32", "bool"]


def truthy(rng, shape, dtype):
    """Values where zero is common; floats also get -0, NaN of both signs, ±inf, subnormals."""
    dtype = np.dtype(dtype)
    pool = {
        "f": [0.0, -0.0, np.nan, -np.nan, np.inf, -np.inf, 1e-40, 1.0, -2.5],
        "i": [0, 0, 1, -1, 2**31 - 1, -(2**31), 7],
        "u": [0, 0, 1, 2**32 - 1, 2],
        "b": [False, True],
    }[dtype.kind]
    with np.errstate(over="ignore"):
        picked = np.array(pool, dtype=np.float64 if dtype.kind == "f" else object)[rng.integers(0, len(pool), size=shape)]
        return np.asarray(picked).astype(dtype)


def test_bool_in_and_out(rng):
    for shape in SHAPES:
        a = rng.integers(0, 2, size=shape).astype(bool)
        t = kiln.asarray(a)
        assert t.dtype == kiln.bool == np.bool_ and t.itemsize == 1 and t.nbytes == a.size
        np.testing.assert_array_equal(t.numpy(), a)
        assert t.numpy().dtype == np.bool_
    # Bytes other than 0 / 1 (a view of uint8 as bool) read back as True.
    raw = np.array([0, 1, 2, 255], np.uint8).view(np.bool_)
    np.testing.assert_array_equal(kiln.asarray(raw).tobytes(), bytes([0, 1, 1, 1]))
    assert kiln.asarray([True, False]).dtype == kiln.bool
    assert kiln.full((2, 3), True).dtype == kiln.bool
    assert kiln.full((2,), np.False_).dtype == kiln.bool
    np.testing.assert_array_equal(kiln.full((2, 3), True).numpy(), np.full((2, 3), True))
    assert kiln.zeros(3, dtype="bool").numpy().tolist() == [False] * 3
    assert kiln.bool in kiln.dtypes
    with pytest.raises(kiln.InvalidArgumentError, match="is not a bool value"):
        kiln.full(3, 2, dtype=kiln.bool)


def test_truth_value_of_a_tensor():
    assert bool(kiln.asarray(np.array(True))) is True
    assert bool(kiln.asarray(np.array([False]))) is False
    assert bool(kiln.asarray(np.array([[3.0]], np.float32)) > 2)
    with pytest.raises(kiln.InvalidArgumentError):
        bool(kiln.asarray(np.array([True, False])))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["logical_and", "logical_or", "logical_xor"])
def test_logical_binary(rng, name, dtype):
    for sa, sb in [((0,), (0,)), ((1,), (1,)), ((13,), (13,)), ((3, 1, 5), (4, 1)), ((1031,), ())]:
        a, b = truthy(rng, sa, dtype), truthy(rng, sb, dtype)
        check(getattr(kiln, name)(kiln.asarray(a), kiln.asarray(b)), getattr(np, name)(a, b), "bool")


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("name", ["logical_not", "isnan", "isinf", "isfinite", "signbit"])
def test_predicates(rng, name, dtype):
    if name == "signbit" and dtype == "bool":
        want = lambda a: np.zeros(a.shape, bool)  # noqa: E731  numpy has no signbit of bool
    else:
        want = getattr(np, name)
    for shape in SHAPES:
        a = truthy(rng, shape, dtype)
        check(getattr(kiln, name)(kiln.asarray(a)), want(a), "bool")


def test_special_values():
    x = np.array([-0.0, 0.0, np.nan, -np.nan, np.inf, -np.inf, -1e-45, 3e38, -1.0], np.float32)
    t = kiln.asarray(x)
    for name in ("signbit", "isnan", "isinf", "isfinite", "logical_not"):
        np.testing.assert_array_equal(getattr(kiln, name)(t).numpy(), getattr(np, name)(x), err_msg=name)
    np.testing.assert_array_equal(t.astype(kiln.bool).numpy(), x.astype(bool))


@pytest.mark.parametrize("dtype", DTYPES)
def test_astype_to_and_from_bool(rng, dtype):
    for shape in SHAPES:
        a = truthy(rng, shape, dtype)
        b = kiln.asarray(a).astype("bool")
        check(b, a.astype(bool), "bool")
        check(b.astype(dtype), a.astype(bool).astype(dtype), dtype)


def test_operators_on_bool_tensors(rng):
    a = rng.integers(0, 2, size=(4, 5)).astype(bool)
    b = rng.integers(0, 2, size=(5,)).astype(bool)
    ta, tb = kiln.asarray(a), kiln.asarray(b)
    check(ta & tb, a & b, "bool")
    check(ta | tb, a | b, "bool")
    check(ta ^ tb, a ^ b, "bool")
    check(~ta, ~a, "bool")
    check(ta & True, a & True, "bool")
    check(False | ta, False | a, "bool")
    check(ta == True, a == True, "bool")  # noqa: E712
    check(ta != tb, a != b, "bool")
    check(kiln.maximum(ta, tb), np.maximum(a, b), "bool")
    check(kiln.minimum(ta, tb), np.minimum(a, b), "bool")
    f = kiln.asarray(np.ones(3, np.float32))
    with pytest.raises(kiln.DTypeError, match="bitwise"):
        f & f
    with pytest.raises(kiln.DTypeError, match="not defined on bool"):
        ta + tb
    with pytest.raises(kiln.DTypeError, match="not defined on bool"):
        kiln.negative(ta)
    with pytest.raises(kiln.DTypeError, match="not defined on bool"):
        kiln.sum(ta)


@pytest.mark.parametrize("dtype", DTYPES)
def test_all_any(rng, dtype):
    cases = [((0,), None), ((0,), 0), ((1,), None), ((13, 17), 1), ((13, 17), (0, 1)), ((3, 1, 257), -1),
             ((2, 0, 3), 1), ((2, 0, 3), 0), ((1031,), None), ((2, 20011), 1), ((), None)]
    for shape, axis in cases:
        a = truthy(rng, shape, dtype)
        if rng.integers(0, 2):
            a = np.where(rng.integers(0, 40, size=shape) != 0, np.ones(shape, a.dtype), a)
        for keepdims in (False, True):
            for name in ("all", "any"):
                want = getattr(np, name)(a, axis=axis, keepdims=keepdims)
                check(getattr(kiln, name)(kiln.asarray(a), axis=axis, keepdims=keepdims), want, "bool")
                check(getattr(kiln.asarray(a), name)(axis=axis, keepdims=keepdims), want, "bool")


def test_where_with_bool_condition(rng):
    c = rng.integers(0, 2, size=(3, 1, 5)).astype(bool)
    a = rng.standard_normal((4, 1)).astype(np.float32)
    b = rng.standard_normal((5,)).astype(np.float32)
    check(kiln.where(kiln.asarray(c), kiln.asarray(a), kiln.asarray(b)), np.where(c, a, b), "float32")
    x = kiln.asarray(np.array([1.0, np.nan, 3.0], np.float32))
    np.testing.assert_array_equal(kiln.where(kiln.isnan(x), 0.0, x).numpy(), [1.0, 0.0, 3.0])


def test_argmax_gives_int32(rng):
    a = rng.standard_normal((5, 7)).astype(np.float32)
    got = kiln.argmax(kiln.asarray(a), axis=1)
    check(got, np.argmax(a, axis=1), "int32")
    check(kiln.argmin(kiln.asarray(a > 0)), np.argmin(a > 0), "int32")
