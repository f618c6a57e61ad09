"""Conversion in and out, creation functions, Tensor attributes and protocols."""

import array
import pickle

import kiln
import numpy as np
import pytest
from conftest import HAS_F16, check, rand

ALL = ["float32", "int32", "uint32"] + (["float16"] if HAS_F16 else [])
SHAPES = [(), (0,), (1,), (7,), (3, 5), (2, 0, 3), (2, 3, 4, 5), (257,), (1, 1, 1, 1, 1, 1, 1, 2)]


@pytest.mark.parametrize("dtype", ALL)
@pytest.mark.parametrize("shape", SHAPES)
def test_roundtrip_every_dtype_and_shape(rng, dtype, shape):
    a = rand(rng, shape, dtype)
    t = kiln.asarray(a)
    assert t.shape == shape and t.ndim == len(shape) and t.size == a.size
    assert t.dtype == np.dtype(dtype) and t.dtype == getattr(kiln, dtype)
    assert t.nbytes == a.nbytes
    back = t.numpy()
    assert back.dtype == a.dtype and back.shape == a.shape
    assert back.tobytes() == a.tobytes()
    assert np.asarray(t).tobytes() == a.tobytes()
    assert t.tobytes() == a.tobytes()


def test_non_contiguous_and_fortran_and_byteswapped(rng):
    base = rand(rng, (6, 8), "float32")
    for view in (base[:, ::2], base.T, base[::-1], np.asfortranarray(base), base[1:5, 2:7]):
        assert not view.flags.c_contiguous or view is not base
        t = kiln.asarray(view)
        np.testing.assert_array_equal(t.numpy(), view)
    swapped = base.astype(">f4")
    np.testing.assert_array_equal(kiln.asarray(swapped).numpy(), base)


def test_lists_scalars_and_buffers():
    t = kiln.asarray([[1, 2, 3], [4, 5, 6]])
    assert t.dtype == kiln.int32 and t.shape == (2, 3)
    np.testing.assert_array_equal(t.numpy(), [[1, 2, 3], [4, 5, 6]])
    t = kiln.asarray([1.5, -2.25])
    assert t.dtype == kiln.float32
    np.testing.assert_array_equal(t.numpy(), [1.5, -2.25])
    s = kiln.asarray(3.5)
    assert s.shape == () and s.item() == 3.5 and float(s) == 3.5
    assert kiln.asarray(7).item() == 7 and int(kiln.asarray(7)) == 7
    buf = array.array("f", [1.0, 2.0, 4.0])
    np.testing.assert_array_equal(kiln.asarray(buf).numpy(), [1.0, 2.0, 4.0])
    mv = memoryview(array.array("i", [3, -1]))
    t = kiln.asarray(mv)
    assert t.dtype == kiln.int32
    np.testing.assert_array_equal(t.numpy(), [3, -1])
    with pytest.raises(kiln.InvalidArgumentError, match="1099511627776"):  # a ValueError: never wrapped
        kiln.asarray([2**40])
    with pytest.raises(ValueError):
        kiln.asarray([[1, 2], [3]])


def test_dtype_argument_and_conversions(rng):
    a = rand(rng, (4, 3), "float32")
    for spec in ("float16", "f16", np.float16, np.dtype("float16"), kiln.float16):
        if not HAS_F16:
            break
        assert kiln.asarray(a, dtype=spec).dtype == kiln.float16
    t = kiln.asarray(a, dtype="int32")
    np.testing.assert_array_equal(t.numpy(), a.astype(np.int32))
    i64 = np.arange(10, dtype=np.int64)
    assert kiln.asarray(i64).dtype == kiln.int32  # narrowed: every value fits (test_numpy_interop.py)
    np.testing.assert_array_equal(kiln.asarray(i64, dtype=kiln.int32).numpy(), i64)
    np.testing.assert_array_equal(kiln.asarray(np.array([True, False]), dtype="uint32").numpy(), [1, 0])
    assert kiln.asarray(np.array([True])).dtype == kiln.bool
    for bad in (np.array([1 + 2j]), np.array(["x"]), np.zeros(2, np.float128 if hasattr(np, "float128") else "c8")):
        with pytest.raises(TypeError) as e:
            kiln.asarray(bad)
        assert isinstance(e.value, kiln.KilnError) and isinstance(e.value, kiln.DTypeError)
        assert "float32, float16, int32, uint32, bool" in str(e.value)
    for bad in ("float64", np.float64, "int8", "complex64", "nonsense"):
        with pytest.raises(TypeError, match="float32, float16, int32, uint32"):
            kiln.zeros(3, dtype=bad)
    # A tensor passes through asarray without a copy unless asked.
    t = kiln.asarray(a)
    assert kiln.asarray(t) is not None and kiln.asarray(t).numpy().tobytes() == a.tobytes()
    c = kiln.asarray(t, copy=True)
    np.testing.assert_array_equal(c.numpy(), a)
    assert t.astype("int32").dtype == kiln.int32


def test_float64_warns_once_per_process():
    import subprocess
    import sys

    code = (
        "import warnings, numpy as np, kiln\n"
        "warnings.simplefilter('always')\n"
        "with warnings.catch_warnings(record=True) as w:\n"
        "    warnings.simplefilter('always')\n"
        "    a = kiln.asarray(np.ones(3))\n"
        "    b = kiln.asarray(np.ones((2, 2)))\n"
        "    c = kiln.asarray([1.0, 2.0])\n"
        "assert a.dtype == kiln.float32 and b.dtype == kiln.float32 and c.dtype == kiln.float32\n"
        "print(len([x for x in w if 'float64' in str(x.message)]))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "1", out


@pytest.mark.parametrize("dtype", ALL)
def test_creation(dtype):
    z = kiln.zeros((3, 4), dtype=dtype)
    assert z.shape == (3, 4) and z.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(z.numpy(), np.zeros((3, 4), dtype))
    np.testing.assert_array_equal(kiln.ones(5, dtype=dtype).numpy(), np.ones(5, dtype))
    np.testing.assert_array_equal(kiln.full((2, 2), 7, dtype=dtype).numpy(), np.full((2, 2), 7, dtype))
    assert kiln.empty((2, 3), dtype=dtype).shape == (2, 3)
    np.testing.assert_array_equal(kiln.zeros_like(z).numpy(), np.zeros((3, 4), dtype))
    np.testing.assert_array_equal(kiln.ones_like(z).numpy(), np.ones((3, 4), dtype))
    np.testing.assert_array_equal(kiln.full_like(z, 3).numpy(), np.full((3, 4), 3, dtype))
    assert kiln.empty_like(z).shape == (3, 4)
    assert kiln.zeros(0, dtype=dtype).shape == (0,)
    assert kiln.zeros((), dtype=dtype).shape == ()


def test_creation_defaults_and_arange():
    assert kiln.zeros(3).dtype == kiln.float32
    assert kiln.full(3, 2).dtype == kiln.int32
    assert kiln.full(3, 2.5).dtype == kiln.float32
    np.testing.assert_array_equal(kiln.arange(5).numpy(), np.arange(5, dtype=np.int32))
    assert kiln.arange(5).dtype == kiln.int32
    np.testing.assert_array_equal(kiln.arange(2, 11, 3).numpy(), np.arange(2, 11, 3))
    np.testing.assert_array_equal(kiln.arange(10, 0, -2).numpy(), np.arange(10, 0, -2))
    check(kiln.arange(0.0, 1.0, 0.1), np.arange(0.0, 1.0, 0.1), "float32", atol=1e-6)
    assert kiln.arange(3, 3).shape == (0,)
    check(kiln.arange(4, dtype="float32"), np.arange(4.0), "float32")
    with pytest.raises(ValueError):
        kiln.arange(0, 1, 0)
    with pytest.raises(ValueError):
        kiln.zeros((2, -1))
    with pytest.raises(kiln.InvalidArgumentError):  # kiln-core's scalar check, as in every binding
        kiln.full(3, 1.5, dtype="int32")


def test_from_bytes_fill_copy():
    a = np.arange(6, dtype=np.float32)
    t = kiln.from_bytes(a.tobytes(), (2, 3), "float32")
    np.testing.assert_array_equal(t.numpy(), a.reshape(2, 3))
    c = kiln.copy(t)
    kiln.fill(t, 9.0)
    np.testing.assert_array_equal(t.numpy(), np.full((2, 3), 9.0, np.float32))
    np.testing.assert_array_equal(c.numpy(), a.reshape(2, 3))
    with pytest.raises(ValueError):
        kiln.from_bytes(b"\0" * 5, (2,), "float32")


def test_tensor_protocols(rng):
    a = rand(rng, (3, 4), "float32")
    t = kiln.asarray(a)
    assert len(t) == 3
    with pytest.raises(TypeError):
        len(kiln.asarray(1.0))
    r = repr(t)
    assert r.startswith("kiln.Tensor(") and "float32" in r and "shape=(3, 4)" in r
    assert str(kiln.asarray([1, 2])) == "[1 2]"
    assert "float32" in repr(kiln.zeros((0, 2)))
    np.testing.assert_array_equal(t.T.numpy(), a.T)
    np.testing.assert_array_equal(t.mT.numpy(), a.T)
    np.testing.assert_array_equal(t.reshape(2, 6).numpy(), a.reshape(2, 6))
    np.testing.assert_array_equal(t.reshape((-1,)).numpy(), a.reshape(-1))
    np.testing.assert_array_equal(t.flatten().numpy(), a.ravel())
    np.testing.assert_array_equal(np.asarray(t, dtype=np.float64), a.astype(np.float64))
    assert t.tolist() == a.tolist()
    assert t.device == kiln.default_device()
    assert t.device.name and t.device.backend
    assert isinstance(t.device.as_dict(), dict)
    with pytest.raises(TypeError):
        hash(t)
    with pytest.raises(ValueError):
        bool(t)
    assert bool(kiln.asarray([1.0])) is True and bool(kiln.asarray(0)) is False
    assert t.__array_namespace__() is kiln
    assert t.itemsize == 4
    with pytest.raises(ValueError):
        t.reshape(5, 5)


def test_runtime_controls():
    ds = kiln.devices()
    assert ds and any(d.chosen for d in ds)
    assert all(isinstance(d, kiln.Device) for d in ds)
    t = kiln.ones((256, 256))
    stats = kiln.memory_stats()
    for k in ("allocated_bytes", "in_use_bytes", "peak_bytes", "live_buffers", "pooled_bytes"):
        assert isinstance(stats[k], int)
    assert stats["in_use_bytes"] >= 256 * 256 * 4
    del t
    kiln.synchronize()
    kiln.empty_cache()
    ps = kiln.pipeline_stats()
    assert ps["pipelines"] >= 1 and ps["misses"] >= 1
    assert kiln.select_adapter(kiln.default_device().index) == kiln.default_device()


def test_public_api_documented():
    import inspect

    missing = []
    for name in kiln.__all__:
        obj = getattr(kiln, name)
        if callable(obj) and not isinstance(obj, type(np.float32)) and not isinstance(obj, np.dtype):
            if not (getattr(obj, "__doc__", None) or "").strip():
                missing.append(name)
    assert not missing, missing
    assert inspect.ismodule(kiln.random)
    assert kiln.random.uniform.__doc__ and kiln.random.normal.__doc__


def test_pickling_errors():
    e = kiln.ShapeError("bad", 3)
    e2 = pickle.loads(pickle.dumps(e))
    assert type(e2) is kiln.ShapeError and e2.code == 3


def test_device_keyword_is_honoured_or_refused():
    dev = kiln.default_device()
    for f in (lambda d: kiln.zeros(3, device=d), lambda d: kiln.ones(3, device=d), lambda d: kiln.empty(3, device=d),
              lambda d: kiln.full(3, 2.0, device=d), lambda d: kiln.arange(3, device=d),
              lambda d: kiln.asarray([1.0, 2.0], device=d), lambda d: kiln.zeros_like(kiln.ones(2), device=d),
              lambda d: kiln.ones_like(kiln.ones(2), device=d), lambda d: kiln.full_like(kiln.ones(2), 3.0, device=d),
              lambda d: kiln.empty_like(kiln.ones(2), device=d)):
        assert f(None).device == dev
        assert f(dev).device == dev
        with pytest.raises(kiln.InvalidArgumentError, match="device="):
            f("cuda:0")
    # Another adapter: made there (tests/test_two_devices.py, with two real adapters).
    others = [d for d in kiln.devices() if d != dev]
    if others:
        assert kiln.zeros(3, device=others[0]).device == others[0]


def test_array_namespace_checks_the_version():
    t = kiln.ones(2)
    assert t.__array_namespace__() is kiln and t.__array_namespace__(api_version="2023.12") is kiln
    with pytest.raises(kiln.InvalidArgumentError):
        t.__array_namespace__(api_version="1999.01")


def test_floor_matches_numpy_on_special_values():
    x = np.array([-0.5, 0.5, 2.5, -2.5, -0.0, 0.0, np.inf, -np.inf, np.nan, -1e-40, 1e-40, 8388607.5, -8388607.5], np.float32)
    got = kiln.floor(kiln.asarray(x)).numpy()
    np.testing.assert_array_equal(got, np.floor(x))
    np.testing.assert_array_equal(np.signbit(got), np.signbit(np.floor(x)))
    # The standard's rule for integers: unchanged.
    i = np.array([1, -2], np.int32)
    np.testing.assert_array_equal(kiln.floor(kiln.asarray(i)).numpy(), np.floor(i).astype(np.int32))
