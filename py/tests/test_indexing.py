"""``Tensor.__getitem__`` against numpy: basic keys (ints, slices of any step, ``...``,
``None``, bools), integer arrays, boolean masks, every dtype, awkward shapes and the errors."""

import kiln
import numpy as np
import pytest
from conftest import HAS_F16

DTYPES = ["float32", "int32", "uint32", "bool"] + (["float16"] if HAS_F16 else [])
SHAPES = [(0,), (1,), (7,), (300,), (3, 0, 2), (1, 5), (2, 3, 5), (5, 1, 7), (2, 3, 2, 3)]


def values(rng, shape, dtype):
    dtype = np.dtype(dtype)
    if dtype == np.bool_:
        return rng.integers(0, 2, size=shape).astype(bool)
    if dtype.kind == "f":
        return rng.standard_normal(size=shape).astype(dtype)
    if dtype.kind == "u":
        return rng.integers(0, 2**32, size=shape, dtype=np.uint32)
    return rng.integers(-(2**31), 2**31, size=shape, dtype=np.int32)


def same(x, key):
    """x[key] on kiln and on numpy: the same shape, dtype and bits, or the same exception type."""
    a = x.numpy()
    try:
        want = a[key]
    except (IndexError, TypeError, ValueError) as e:
        with pytest.raises(type(e)):
            x[key]
        return None
    got = x[key]
    assert isinstance(got, kiln.Tensor), (key, type(got))
    arr = got.numpy()
    assert arr.shape == np.shape(want), (key, arr.shape, np.shape(want))
    assert arr.dtype == a.dtype, (key, arr.dtype)
    # Bit-exact: gathers move bits (NaN payloads, -0) without arithmetic.
    np.testing.assert_array_equal(
        arr.reshape(-1).view(np.uint8), np.ascontiguousarray(want).reshape(-1).view(np.uint8), err_msg=repr(key)
    )
    return got


def rand_slice(rng, n):
    def bound():
        r = rng.integers(0, 5)
        if r == 0:
            return None
        if r == 1:
            return int(rng.integers(-3 * n - 3, 3 * n + 4))  # out of range: clamped
        return int(rng.integers(-n - 1, n + 2))

    step = [None, 1, 2, 3, -1, -2, -5, 7][rng.integers(0, 8)]
    return slice(bound(), bound(), step)


def rand_basic_key(rng, shape):
    """A random tuple of ints, slices, None and at most one Ellipsis over ``shape``."""
    key, ax = [], 0
    used_ell = False
    while ax < len(shape):
        r = rng.integers(0, 10)
        n = shape[ax]
        if r < 5:
            key.append(rand_slice(rng, n))
            ax += 1
        elif r < 7 and n > 0:
            key.append(int(rng.integers(-n, n)))
            ax += 1
        elif r == 7:
            key.append(None)
        elif r == 8 and not used_ell:
            key.append(Ellipsis)
            used_ell = True
            ax = len(shape) - int(rng.integers(0, len(shape) - ax + 1))
        else:
            ax += 1
            key.append(slice(None))
        if rng.integers(0, 6) == 0:
            break
    return tuple(key)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", SHAPES)
def test_basic_keys_random(rng, dtype, shape):
    x = kiln.asarray(values(rng, shape, dtype))
    for _ in range(12):
        same(x, rand_basic_key(rng, shape))


@pytest.mark.parametrize("dtype", DTYPES)
def test_integers_and_zero_d(rng, dtype):
    a = values(rng, (3, 4, 5), dtype)
    x = kiln.asarray(a)
    for key in [(2, 3, 4), (-1, -4, -5), (0, 0, 0), (1,), (-2, 1), 2, -3]:
        got = same(x, key)
        assert got.ndim == 3 - (len(key) if isinstance(key, tuple) else 1)
    got = x[1, 2, 3]
    assert got.shape == () and isinstance(got, kiln.Tensor)
    # A 0-d tensor indexed by () or ... is itself (a 0-d result).
    s = kiln.asarray(values(rng, (), dtype))
    same(s, ())
    same(s, Ellipsis)
    same(s, None)
    same(s, (None, Ellipsis, None))


@pytest.mark.parametrize("n", [1, 2, 7, 13, 257, 300])
def test_slices_every_step(rng, n):
    x = kiln.asarray(values(rng, (n,), "float32"))
    for step in [1, 2, 3, 256, -1, -2, -3, -256, None]:
        for start in [None, 0, 1, -1, n - 1, n, -n, -n - 5, n + 5]:
            for stop in [None, 0, 1, -1, n // 2, n, -n - 5, n + 5]:
                same(x, slice(start, stop, step))


def test_step_zero_and_bad_slices():
    x = kiln.asarray(np.arange(5, dtype=np.float32))
    with pytest.raises(ValueError):
        x[::0]
    with pytest.raises(TypeError):
        x[1.0:3]


@pytest.mark.parametrize("dtype", DTYPES)
def test_ellipsis_and_newaxis(rng, dtype):
    x = kiln.asarray(values(rng, (2, 3, 5), dtype))
    for key in [
        Ellipsis,
        (Ellipsis, 1),
        (1, Ellipsis),
        (Ellipsis, None),
        (None, Ellipsis),
        (None, None, 0),
        (0, Ellipsis, 0, None),
        (slice(None), None, 1),
        (Ellipsis, slice(None, None, -1), None, 2),
        (None, 1, None, 2, None, 3, None),
        (),
    ]:
        same(x, key)


def test_bool_scalars():
    x = kiln.asarray(np.arange(6, dtype=np.int32).reshape(2, 3))
    for key in [True, False, (True,), (Ellipsis, True), (0, True), (None, False), (True, 1, 2), (False, 0)]:
        same(x, key)
    same(x, np.bool_(False))
    # A 0-d bool tensor is a bool scalar (numpy, handed the tensor itself, would take __index__).
    for b in (True, False):
        np.testing.assert_array_equal(x[kiln.asarray(b)].numpy(), x.numpy()[np.bool_(b)])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(7,), (300,), (4, 5), (3, 1, 6), (0, 3)])
def test_integer_arrays_one_axis(rng, dtype, shape):
    a = values(rng, shape, dtype)
    x = kiln.asarray(a)
    n = shape[0]
    for idx_shape in [(0,), (1,), (5,), (2, 3), ()]:
        if n == 0 and idx_shape != (0,):
            continue
        idx = rng.integers(-n, n, size=idx_shape) if n else np.zeros(idx_shape, dtype=np.int64)
        if idx_shape == ():
            idx = np.asarray(idx)
        same(x, idx)
        same(x, idx.tolist())
        t = kiln.asarray(idx.astype(np.int32))
        got = x[t]
        np.testing.assert_array_equal(got.numpy(), a[idx])
        if (idx >= 0).all():
            np.testing.assert_array_equal(x[kiln.asarray(idx.astype(np.uint32))].numpy(), a[idx])
        if len(shape) > 1:
            same(x, (Ellipsis, rng.integers(-shape[-1], shape[-1], size=idx_shape)))


@pytest.mark.parametrize("dtype", ["float32", "int32", "bool"])
def test_integer_arrays_many_axes(rng, dtype):
    a = values(rng, (4, 5, 6, 3), dtype)
    x = kiln.asarray(a)
    i = rng.integers(-4, 4, size=(2, 3))
    j = rng.integers(-5, 5, size=(3,))
    k = rng.integers(-6, 6, size=(2, 1))
    m = rng.integers(0, 3, size=(1, 3))
    keys = [
        (i, j),
        (i, j, k),
        (i, j, k, m),
        (slice(None), j, k),
        (slice(1, None, -1), j, k),  # adjacent
        (i, slice(None), k),
        (i, 2, k),
        (0, slice(None), j),
        (slice(None), 1, slice(None), m),  # split
        (Ellipsis, k, m),
        (None, i, None, j),
        (j, Ellipsis, m),
        (1, j),
        (i, -1, -2, 0),
        (True, i, j),
        (False, i),
        (i, slice(None, None, -2), k, Ellipsis),
    ]
    for key in keys:
        same(x, key)
    # Device-held indices give the same answers as host-held ones.
    ti, tk = kiln.asarray(i.astype(np.int32)), kiln.asarray(k.astype(np.int32))
    np.testing.assert_array_equal(x[ti, :, tk].numpy(), a[i, :, k])
    np.testing.assert_array_equal(x[:, 2, tk].numpy(), a[:, 2, k])


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (300,), (3, 4), (2, 3, 5), (2, 0, 3)])
def test_boolean_masks(rng, dtype, shape):
    a = values(rng, shape, dtype)
    x = kiln.asarray(a)
    for density in [0.0, 0.3, 1.0]:
        full = rng.uniform(size=shape) < density
        same(x, full)
        np.testing.assert_array_equal(x[kiln.asarray(full)].numpy(), a[full])
        if len(shape) > 1:
            lead = rng.uniform(size=shape[:1]) < density
            same(x, lead)
            same(x, (Ellipsis, rng.uniform(size=shape[-1:]) < density))
            same(x, (lead, 0) if shape[1] else (lead,))
            same(x, (None, lead))
    # The standard's own case: a mask computed from the array.
    if np.dtype(dtype).kind in "fiu" and a.size:
        np.testing.assert_array_equal(x[x > a.flat[0]].numpy(), a[a > a.flat[0]])


def test_errors_match_numpy():
    a = np.arange(60, dtype=np.float32).reshape(3, 4, 5)
    x = kiln.asarray(a)
    bad = [
        3,
        -4,
        (0, 4),
        (0, 0, 5),
        (0, 0, -6),
        (0, 0, 0, 0),
        (Ellipsis, Ellipsis),
        1.5,
        "a",
        (slice(None), 2.0),
        [1.0],
        np.array([0.5]),
        [[0, 1], [2]],
        np.zeros((2, 2), dtype=bool),
        np.zeros(4, dtype=bool),
        ([0, 1], [0, 1, 2]),
        np.array([3]),
        np.array([-4]),
        (slice(None), [4]),
        (slice(None), [0], [5]),
        {1: 2},
        object(),
    ]
    for key in bad:
        with pytest.raises((IndexError, TypeError, ValueError)):
            a[key]
        same(x, key)
    with pytest.raises(IndexError):
        x[kiln.asarray(np.array([0, 3], dtype=np.int32))]
    with pytest.raises(IndexError):
        x[kiln.asarray(np.array([-4], dtype=np.int32))]
    with pytest.raises(IndexError):
        x[kiln.asarray(np.array([1.0], dtype=np.float32))]
    with pytest.raises(IndexError):
        x[kiln.asarray(np.zeros(4, dtype=bool))]
    s = kiln.asarray(np.float32(1.0))
    with pytest.raises(IndexError):
        s[0]


def test_index_is_new_tensor_and_input_untouched(rng):
    a = values(rng, (5, 4), "float32")
    x = kiln.asarray(a)
    y = x[...]
    assert y is not x and y.shape == x.shape
    _ = x[::-1, [0, 2]], x[x > 0], x[1:3]
    np.testing.assert_array_equal(x.numpy(), a)


def test_boolean_indexing_capability():
    assert kiln.__array_namespace_info__().capabilities()["boolean indexing"] is True


def set_same(rng, a, key, value):
    """x[key] = value on kiln and numpy: the same contents afterwards, or the same exception."""
    x = kiln.asarray(a)
    view = kiln.reshape(x, (-1,))
    want = a.copy()
    try:
        want[key] = value.numpy() if isinstance(value, kiln.Tensor) else value
    except (IndexError, TypeError, ValueError, OverflowError) as e:
        with pytest.raises(type(e)):
            x[key] = value
        np.testing.assert_array_equal(x.numpy(), a)  # a failed assignment leaves x alone
        return
    x[key] = value
    got = x.numpy()
    assert got.dtype == a.dtype and got.shape == a.shape
    np.testing.assert_array_equal(got.reshape(-1).view(np.uint8), want.reshape(-1).view(np.uint8), err_msg=repr(key))
    # In place: a tensor sharing x's buffer sees the write.
    np.testing.assert_array_equal(view.numpy(), want.reshape(-1))


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape", [(0,), (1,), (7,), (300,), (3, 0, 2), (2, 3, 5), (5, 1, 7)])
def test_setitem_basic_keys_random(rng, dtype, shape):
    a = values(rng, shape, dtype)
    for _ in range(6):
        key = rand_basic_key(rng, shape)
        target = np.shape(a[key]) if _valid(a, key) else ()
        set_same(rng, a, key, values(rng, (), dtype).item())  # a Python scalar
        set_same(rng, a, key, values(rng, target, dtype))  # a numpy array of the target's shape
        set_same(rng, a, key, kiln.asarray(values(rng, target[1:], dtype)))  # a tensor that broadcasts


def _valid(a, key):
    try:
        a[key]
        return True
    except (IndexError, TypeError, ValueError):
        return False


@pytest.mark.parametrize("dtype", DTYPES)
def test_setitem_integers_arrays_and_masks(rng, dtype):
    a = values(rng, (4, 5, 3), dtype)
    i = rng.integers(-4, 4, size=(2, 3))
    j = rng.integers(-5, 5, size=(3,))
    mask = rng.uniform(size=(4, 5)) < 0.4
    for key in [
        (1, 2, 0),
        (-1,),
        (slice(None, None, -1), 2),
        (i, j),
        (i, slice(None), 1),
        (Ellipsis, [2, 0]),
        mask,
        (mask, 1),
        np.zeros((4, 5, 3), dtype=bool),
        a != a,
        True,
        (),
        Ellipsis,
        [0, 0, 0],
    ]:
        target = np.shape(a[key])
        set_same(rng, a, key, values(rng, (), dtype).item())
        set_same(rng, a, key, values(rng, target, dtype))
        set_same(rng, a, key, kiln.asarray(values(rng, target, dtype)))
    # A key held on the device, and the standard's `x[x > c] = v` (a mask computed from x).
    x = kiln.asarray(a)
    x[kiln.asarray(mask)] = values(rng, (), dtype).item()
    if np.dtype(dtype).kind != "b":
        x = kiln.asarray(a)
        c = a.flat[0]
        x[x > c] = a.flat[1]
        want = a.copy()
        want[a > c] = a.flat[1]
        np.testing.assert_array_equal(x.numpy(), want)


def test_setitem_special_values_and_casts():
    a = np.zeros(6, dtype=np.float32)
    set_same(None, a, slice(None, None, 2), np.array([np.nan, -0.0, np.inf], dtype=np.float32))
    set_same(None, a, 1, -0.0)
    set_same(None, np.zeros(4, dtype=np.int32), slice(1, 3), 2.7)  # numpy truncates
    set_same(None, np.zeros(4, dtype=np.int32), slice(None), kiln.asarray(np.array([1.5, -2.5, 3, 4], np.float32)))
    set_same(None, np.zeros(4, dtype=np.uint32), 0, -1)  # numpy: OverflowError
    set_same(None, np.zeros(4, dtype=np.float32), 0, "x")


def test_setitem_errors_match_numpy(rng):
    a = values(rng, (3, 4), "float32")
    for key, value in [
        (3, 1.0),
        ((0, 4), 1.0),
        ((0, 0, 0), 1.0),
        (1.5, 1.0),
        (slice(None), np.zeros(3, np.float32)),
        (slice(None), np.zeros((3, 3), np.float32)),
        ([0, 5], 1.0),
        (np.zeros(4, dtype=bool), 1.0),
        (0, kiln.asarray(np.zeros(3, np.float32))),
        ([], np.zeros(2, np.float32)),
    ]:
        set_same(rng, a, key, value)


def test_standard_keys_agree_with_array_api_strict(rng):
    xs = pytest.importorskip("array_api_strict")
    if hasattr(xs, "set_array_api_strict_flags"):
        xs.set_array_api_strict_flags(api_version="2024.12")
    a = values(rng, (3, 4, 5), "float32")
    i = rng.integers(-3, 3, size=(2, 2)).astype(np.int32)
    j = rng.integers(-4, 4, size=(2,)).astype(np.int32)
    m = rng.uniform(size=(3, 4)) < 0.5
    keys = [
        (1, 2, 3),
        (-1, Ellipsis),
        (slice(None, None, -2), None, Ellipsis, 1),
        (slice(7, -9, -1), 0, slice(1, 4, 2)),
        (i, j, Ellipsis),
        (i, 1, j),
        (Ellipsis, j),
        (slice(1, None), j, 0),
        (0, slice(None), j),
        (i, j, 2),
        (2, i, j),
        (j, i, -1),
        (i, j, j),
        m,
        a > 0,
        (m, Ellipsis),
        (m, 2),
        (Ellipsis, None, 2, None),
        (True, Ellipsis),
        (False, Ellipsis),
        Ellipsis,
    ]
    s, x = xs.asarray(a), kiln.asarray(a)
    strict_type = type(s)
    checked = 0
    for key in keys:
        tup = key if isinstance(key, tuple) else (key,)
        skey = tuple(xs.asarray(e) if isinstance(e, np.ndarray) else e for e in tup)
        kkey = tuple(kiln.asarray(e) if isinstance(e, np.ndarray) else e for e in tup)
        try:
            want = np.asarray(s[skey])
        except IndexError:
            continue  # outside what the standard specifies; numpy's answer is checked elsewhere
        assert not isinstance(want, strict_type)
        got = x[kkey].numpy()
        assert got.shape == want.shape, (key, got.shape, want.shape)
        np.testing.assert_array_equal(got, want, err_msg=repr(key))
        checked += 1
    assert checked >= 11  # the keys above that array-api-strict accepts


def test_huge_and_odd_keys(rng):
    a = values(rng, (6, 5), "int32")
    x = kiln.asarray(a)
    for key in [
        2**70,
        -(2**70),
        slice(2**70, None),
        slice(None, -(2**70)),
        slice(None, None, 2**70),
        slice(None, None, -(2**70)),
        (slice(-(2**70), 2**70, 3), slice(2**63, None, -(2**62))),
        ((0, 2),),
        ((0, 2), (1, 1)),
        ([],),
        (np.array([], np.int32),),
        np.uint64(3),
        (np.int8(-1), np.int64(2)),
    ]:
        same(x, key)


def test_iteration_follows_the_first_axis(rng):
    a = values(rng, (4, 3), "float32")
    rows = list(kiln.asarray(a))
    assert len(rows) == 4 and all(isinstance(r, kiln.Tensor) for r in rows)
    for r, want in zip(rows, a):
        np.testing.assert_array_equal(r.numpy(), want)
    assert list(kiln.asarray(np.zeros((0, 2), np.float32))) == []
    with pytest.raises(TypeError):
        iter(kiln.asarray(np.float32(1.0)))
