"""The bitwise functions and operators (& | ^ ~ << >>) against numpy: the whole i32 / u32
range, shift counts inside and outside [0, 32), broadcasting, Python scalars, and bool (where
they are logical)."""

import kiln
import numpy as np
import pytest

FUNCS = [
    ("bitwise_and", np.bitwise_and),
    ("bitwise_or", np.bitwise_or),
    ("bitwise_xor", np.bitwise_xor),
    ("bitwise_left_shift", np.left_shift),
    ("bitwise_right_shift", np.right_shift),
]


def ints(rng, shape, dtype):
    info = np.iinfo(dtype)
    x = rng.integers(info.min, info.max, size=shape, endpoint=True, dtype=np.int64)
    flat = x.reshape(-1)
    edges = [info.min, info.max, 0, 1, -1 if dtype == "int32" else 2]
    flat[: min(flat.size, 5)] = edges[: flat.size]
    return x.astype(dtype)


def counts(rng, shape, dtype):
    return rng.integers(-40 if dtype == "int32" else 0, 41, size=shape).astype(dtype)


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
@pytest.mark.parametrize("name,f", FUNCS)
@pytest.mark.parametrize("sa,sb", [((0,), (0,)), ((7,), (7,)), ((13, 17), (17,)), ((3, 1, 5), (1, 4, 1))])
def test_functions_match_numpy(rng, name, f, dtype, sa, sb):
    a = ints(rng, sa, dtype)
    b = counts(rng, sb, dtype) if "shift" in name else ints(rng, sb, dtype)
    got = getattr(kiln, name)(kiln.asarray(a), kiln.asarray(b)).numpy()
    want = f(a, b)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", ["int32", "uint32"])
def test_operators_match_numpy(rng, dtype):
    a, b = ints(rng, (5, 6), dtype), ints(rng, (6,), dtype)
    n = counts(rng, (5, 6), dtype)
    ta, tb, tn = kiln.asarray(a), kiln.asarray(b), kiln.asarray(n)
    for got, want in [
        (ta & tb, a & b),
        (ta | tb, a | b),
        (ta ^ tb, a ^ b),
        (~ta, ~a),
        (ta << tn, a << n),
        (ta >> tn, a >> n),
        (ta & 0xFF, a & dtype_scalar(dtype, 0xFF)),
        (3 | ta, dtype_scalar(dtype, 3) | a),
        (ta << 4, a << dtype_scalar(dtype, 4)),
        (ta >> 31, a >> dtype_scalar(dtype, 31)),
        (1 << tn, dtype_scalar(dtype, 1) << n),
    ]:
        np.testing.assert_array_equal(got.numpy(), want)


def dtype_scalar(dtype, v):
    return np.dtype(dtype).type(v)


def test_bool_is_logical():
    a = np.array([True, True, False, False])
    b = np.array([True, False, True, False])
    ta, tb = kiln.asarray(a), kiln.asarray(b)
    for got, want in [(ta & tb, a & b), (ta | tb, a | b), (ta ^ tb, a ^ b), (~ta, ~a)]:
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got.numpy(), want)
    np.testing.assert_array_equal(kiln.bitwise_invert(ta).numpy(), np.bitwise_invert(a))


def test_refusals():
    f = kiln.asarray(np.ones(3, np.float32))
    b = kiln.asarray(np.array([True, False, True]))
    with pytest.raises(kiln.DTypeError):
        f & f
    with pytest.raises(kiln.DTypeError):
        _ = ~f
    with pytest.raises(kiln.DTypeError):
        b << b
    with pytest.raises(kiln.DTypeError):
        kiln.bitwise_right_shift(f, f)
