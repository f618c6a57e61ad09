"""What a numpy user meets first (issue 34), each against numpy as the reference: numpy's 64-bit
defaults narrowed by a stated rule, numpy functions and ufuncs on a Tensor (NEP 13 / NEP 18),
float corrections in std/var, real/imag/conj, concat(axis=None), repeat on empty input,
pickling and deepcopy."""

import copy
import pickle

import kiln
import numpy as np
import pytest
from conftest import check


# 1. int64 / uint64 / float64 input: narrowed when every value fits, an error naming the value
# when one does not (never a silent wrap or a silent inf).
@pytest.mark.parametrize("src,want", [(np.int64, "int32"), (np.int16, "int32"), (np.int8, "int32"),
                                      (np.uint64, "uint32"), (np.uint16, "uint32"), (np.uint8, "uint32")])
def test_integer_input_is_narrowed_when_it_fits(src, want):
    info = np.iinfo(want)
    lo, hi = max(int(np.iinfo(src).min), int(info.min)), min(int(np.iinfo(src).max), int(info.max))
    a = np.array([lo, 0, 1, hi], dtype=src)
    t = kiln.asarray(a)
    assert t.dtype == np.dtype(want)
    np.testing.assert_array_equal(t.numpy(), a.astype(want))
    assert kiln.asarray(np.zeros((2, 0), src)).shape == (2, 0)


def test_arange_of_numpy_defaults():
    t = kiln.asarray(np.arange(3))
    assert t.dtype == kiln.int32
    np.testing.assert_array_equal(t.numpy(), np.arange(3))
    np.testing.assert_array_equal((t * 2).numpy(), np.arange(3) * 2)


@pytest.mark.parametrize("a,value", [
    (np.array([1, 2**31], np.int64), "2147483648"),
    (np.array([-(2**31) - 1, 0], np.int64), "-2147483649"),
    (np.array([2**32], np.uint64), "4294967296"),
    (np.array([2**63], np.uint64), str(2**63)),
])
def test_integer_input_that_does_not_fit_names_the_value(a, value):
    with pytest.raises(ValueError, match=value) as e:
        kiln.asarray(a)
    assert isinstance(e.value, kiln.InvalidArgumentError)


def test_explicit_integer_dtype_never_wraps():
    # numpy's astype would wrap 2**40 to 0 and -1 to 4294967295.
    with pytest.raises(kiln.InvalidArgumentError, match="1099511627776"):
        kiln.asarray(np.array([2**40]), dtype="int32")
    with pytest.raises(kiln.InvalidArgumentError, match="-1"):
        kiln.asarray(np.array([-1, 3]), dtype="uint32")
    with pytest.raises(kiln.InvalidArgumentError, match="-1"):
        kiln.asarray([-1], dtype="uint32")
    np.testing.assert_array_equal(kiln.asarray(np.array([7, 2**32 - 1]), dtype="uint32").numpy(), [7, 2**32 - 1])
    # float input for an integer dtype: truncated as numpy's astype, but NaN, ±inf and values out
    # of range are refused (numpy would give INT_MIN).
    a = np.array([2.7, -2.7, 2147483647.9, -2147483648.5], np.float64)
    np.testing.assert_array_equal(kiln.asarray(a, dtype="int32").numpy(), a.astype(np.int32))
    np.testing.assert_array_equal(kiln.asarray(np.array([-0.5, 4294967295.5]), dtype="uint32").numpy(),
                                  [0, 4294967295])
    for bad, dt in ((np.nan, "int32"), (np.inf, "int32"), (-np.inf, "uint32"), (2147483648.0, "int32"),
                    (-1.0, "uint32"), (1e10, "uint32")):
        with pytest.raises(kiln.InvalidArgumentError, match="does not fit"):
            kiln.asarray(np.array([1.0, bad], np.float32 if np.isfinite(bad) and abs(bad) < 1e9 else np.float64),
                         dtype=dt)


@pytest.mark.filterwarnings("ignore:kiln. float64 input")
def test_float64_input_is_float32_and_overflow_is_refused():
    a = np.array([0.1, -2.5, np.inf, -np.inf, np.nan, 3e38])
    t = kiln.asarray(a)
    assert t.dtype == kiln.float32
    np.testing.assert_array_equal(t.numpy(), a.astype(np.float32))
    with pytest.raises(kiln.InvalidArgumentError, match="1e\\+39"):
        kiln.asarray(np.array([1.0, 1e39]))
    with pytest.raises(kiln.InvalidArgumentError, match="1e\\+300"):
        kiln.asarray([1e300])


# 2. numpy functions and ufuncs on a Tensor.
def test_numpy_reductions_dispatch_to_kiln(rng):
    a = rng.standard_normal((4, 5)).astype(np.float32)
    t = kiln.asarray(a)
    for f in (np.sum, np.mean, np.max, np.min, np.prod):
        check(f(t), f(a.astype(np.float64)), "float32", rtol=1e-4, atol=1e-5)
        check(f(t, axis=1, keepdims=True), f(a.astype(np.float64), axis=1, keepdims=True), "float32",
              rtol=1e-4, atol=1e-5)
    check(np.sum(t, 0), a.astype(np.float64).sum(0), "float32", rtol=1e-5, atol=1e-5)
    check(np.sum(t, dtype=np.float32, out=None), a.astype(np.float64).sum(), "float32", rtol=1e-5, atol=1e-5)
    check(np.std(t, axis=0, ddof=1), a.astype(np.float64).std(axis=0, ddof=1), "float32", rtol=1e-4, atol=1e-5)
    assert np.argmax(t).item() == np.argmax(a)
    check(np.concatenate([t, t], axis=1), np.concatenate([a, a], axis=1), "float32")
    check(np.reshape(t, (5, 4)), a.reshape(5, 4), "float32")
    # numpy's parameters reach Kiln's by name, else by position (a_min -> min, x -> x1).
    for f in (lambda x: np.where(x > 0, x, 0), lambda x: np.clip(x, -0.5, 0.5), lambda x: np.clip(x, min=0),
              np.transpose, lambda x: np.transpose(x, (1, 0)), lambda x: np.stack([x, x], axis=1),
              lambda x: np.take(x, np.array([0, 2]), axis=1), lambda x: np.astype(x, np.int32),
              lambda x: np.concatenate([x, x], axis=None), lambda x: np.sum(x, 1, np.float32, None, True)):
        got, want = f(t), f(a)
        assert isinstance(got, kiln.Tensor) and got.dtype == want.dtype
        np.testing.assert_allclose(got.numpy(), want, rtol=1e-6, atol=1e-6)


def test_numpy_ufuncs_dispatch_to_kiln(rng):
    a = rng.uniform(0.5, 2.0, (3, 4)).astype(np.float32)
    t = kiln.asarray(a)
    check(np.exp(t), np.exp(a.astype(np.float64)), "float32", rtol=1e-5)
    check(np.add(t, 1), a.astype(np.float64) + 1, "float32")
    check(np.maximum(t, a[0]), np.maximum(a, a[0]), "float32")
    check(a + t, a.astype(np.float64) * 2, "float32")
    check(np.matmul(t, t.T), a.astype(np.float64) @ a.T.astype(np.float64), "float32", rtol=1e-5, atol=1e-5)
    assert isinstance(np.isnan(t), kiln.Tensor) and not np.isnan(t).numpy().any()


def test_numpy_only_arguments_raise_a_clear_type_error(rng):
    t = kiln.asarray(rng.standard_normal(4).astype(np.float32))
    with pytest.raises(TypeError, match="out"):
        np.exp(t, out=np.empty(4, np.float32))
    with pytest.raises(TypeError, match="out"):
        np.sum(t, out=np.empty((), np.float32))
    with pytest.raises(TypeError, match="where"):
        np.sum(t, where=np.array([True, False, True, True]))


def test_numpy_functions_kiln_lacks_run_on_a_host_copy(rng):
    a = rng.standard_normal((3, 4)).astype(np.float32)
    t = kiln.asarray(a)
    got = np.median(t, axis=0)  # no kiln.median: numpy's, on np.asarray(t)
    assert isinstance(got, np.ndarray)
    np.testing.assert_array_equal(got, np.median(a, axis=0))
    np.testing.assert_array_equal(np.add.reduce(t, axis=1), np.add.reduce(a, axis=1))
    np.testing.assert_array_equal(np.percentile(t, 50), np.percentile(a, 50))
    got = np.linalg.norm(t)  # numpy.linalg's, not a Kiln namesake
    assert isinstance(got, np.floating) and got == np.linalg.norm(a)


def test_numpy_varargs_and_permutations(rng):
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    t = kiln.asarray(a)
    for axes in (None, (2, 0, 1), (1, 0, 2), (0, 2, 1)):
        np.testing.assert_array_equal(np.transpose(t, axes).numpy(), np.transpose(a, axes))
    x, y = a[0, 0], a[0, :, 0]
    for kw in ({}, {"indexing": "ij"}):
        got, want = np.meshgrid(kiln.asarray(x), kiln.asarray(y), **kw), np.meshgrid(x, y, **kw)
        assert len(got) == len(want)
        for g, w in zip(got, want):
            assert isinstance(g, kiln.Tensor)
            np.testing.assert_array_equal(g.numpy(), w)


# 3. A real-valued correction (the Array API allows a float).
@pytest.mark.parametrize("shape,axis", [((7,), None), ((4, 6), 1), ((4, 6), (0, 1)), ((3, 5, 2), 0)])
@pytest.mark.parametrize("correction", [0, 0.5, 1, 1.5])
def test_std_var_float_correction(rng, shape, axis, correction):
    a = rng.standard_normal(shape).astype(np.float32)
    t = kiln.asarray(a)
    ref = a.astype(np.float64)
    check(kiln.var(t, axis=axis, correction=correction), np.var(ref, axis=axis, ddof=correction), "float32",
          rtol=1e-4, atol=1e-6)
    check(kiln.std(t, axis=axis, correction=correction), np.std(ref, axis=axis, ddof=correction), "float32",
          rtol=1e-4, atol=1e-6)


def test_float_correction_at_or_past_n_matches_the_whole_number_rule():
    a = np.array([1.0, 3.0], np.float32)
    t = kiln.asarray(a)
    # n - c <= 0: the whole-number rule's result (numpy: a zero divisor, so inf)
    with np.errstate(all="ignore"), pytest.warns(RuntimeWarning):
        want = np.var(a.astype(np.float64), ddof=2.5)
    for c in (2, 2.5, 3):
        np.testing.assert_array_equal(kiln.var(t, correction=c).numpy(), want)
    for bad in (-0.5, float("nan"), float("inf")):
        with pytest.raises(ValueError):
            kiln.var(t, correction=bad)


# 4. tan (a core op: sin / cos reduced exactly), real / imag / conj on real dtypes, concat(axis=None), repeat on empty input.
def test_tan_matches_numpy(rng):
    poles = (np.arange(-20, 20) + 0.5) * np.pi  # the float32 values next to the poles
    x = np.concatenate([rng.uniform(-10, 10, 4000), rng.uniform(-1e4, 1e4, 1000), poles,
                        np.nextafter(poles.astype(np.float32), 0)]).astype(np.float32)
    got = kiln.tan(kiln.asarray(x)).numpy().astype(np.float64)
    want = np.tan(x.astype(np.float64))
    np.testing.assert_allclose(got, want, rtol=5e-7, atol=0)
    s = np.array([0.0, -0.0, np.inf, -np.inf, np.nan], np.float32)
    got = kiln.tan(kiln.asarray(s)).numpy()
    with np.errstate(invalid="ignore"):
        want = np.tan(s)
    np.testing.assert_array_equal(got, want)
    assert np.array_equal(np.signbit(got[:2]), [False, True])  # tan(±0) = ±0
    check(np.tan(kiln.asarray(x[:10])), np.tan(x[:10].astype(np.float64)), "float32", rtol=5e-7, atol=0)
    with pytest.raises(kiln.DTypeError):
        kiln.tan(kiln.asarray(np.arange(3, dtype=np.int32)))


@pytest.mark.parametrize("dtype", ["float32", "int32", "uint32"])  # numeric dtypes (numpy: bool -> int8)
def test_real_imag_conj(rng, dtype):
    a = (rng.standard_normal((2, 3)) * 5).astype(dtype)
    t = kiln.asarray(a)
    for f in ("real", "imag", "conj"):
        got = getattr(kiln, f)(t)
        want = getattr(np, f)(a)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got.numpy(), want)
    r = kiln.real(t)
    r[0, 0] = 0  # a copy: the input is untouched
    np.testing.assert_array_equal(t.numpy(), a)


def test_concat_axis_none(rng):
    a, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((4,)).astype(np.float32)
    c = np.zeros((0, 5), np.float32)
    got = kiln.concat([kiln.asarray(a), kiln.asarray(b), kiln.asarray(c)], axis=None)
    np.testing.assert_array_equal(got.numpy(), np.concatenate([a, b, c], axis=None))
    np.testing.assert_array_equal(kiln.concatenate([kiln.asarray(a)], axis=None).numpy(), a.ravel())


@pytest.mark.parametrize("shape,repeats,axis", [((0,), 3, None), ((0,), 0, 0), ((2, 0), 2, 0), ((2, 0), 2, 1),
                                                ((0, 3), [], 0), ((2, 0), [1, 2], 0), ((3,), 0, None),
                                                ((0,), [2], None), ((0, 2), [3], 0), ((3,), [2], None),
                                                ((2, 3), np.array(2), 1), ((0,), "tensor", None)])
def test_repeat_on_empty_and_one_count(rng, shape, repeats, axis):
    a = rng.standard_normal(shape).astype(np.float32)
    want = np.repeat(a, 2 if isinstance(repeats, str) else repeats, axis=axis)
    if isinstance(repeats, str):  # a one-element count on the device
        repeats = kiln.asarray(np.array([2], np.int32))
    got = kiln.repeat(kiln.asarray(a), repeats, axis=axis)
    assert got.shape == want.shape and got.dtype == want.dtype
    np.testing.assert_array_equal(got.numpy(), want)


# 6. Pickling and deepcopy: host bytes + dtype + shape.
@pytest.mark.parametrize("dtype", ["float32", "int32", "uint32", "bool"])
def test_pickle_and_deepcopy(rng, dtype):
    a = (rng.standard_normal((3, 2)) * 5).astype(dtype)
    t = kiln.asarray(a)
    for u in (pickle.loads(pickle.dumps(t)), copy.deepcopy(t), copy.copy(t)):
        assert isinstance(u, kiln.Tensor) and u.dtype == t.dtype and u.shape == t.shape
        np.testing.assert_array_equal(u.numpy(), a)
    d = copy.deepcopy(t)
    d[0, 0] = 1  # a separate buffer
    np.testing.assert_array_equal(t.numpy(), a)
    e = pickle.loads(pickle.dumps(kiln.zeros((0, 4))))
    assert e.shape == (0, 4)
