"""DLPack both ways (the Array API's interchange): numpy as the independent consumer and
producer, every Kiln dtype, empty and 0-d tensors, strided producers, and the refusals."""

import kiln
import numpy as np
import pytest

DTYPES = [np.float32, np.float16, np.int32, np.uint32, np.bool_]


def sample(dt, shape=(3, 5)):
    rng = np.random.default_rng(7)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    v = rng.standard_normal(shape) * 50
    if dt == np.uint32:
        v = np.abs(v)
    a = v.astype(dt)
    if dt in (np.float32, np.float16) and a.size >= 4:
        a.flat[:4] = [np.nan, np.inf, -np.inf, -0.0]
    return a


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(3, 5), (), (0, 4), (2, 1, 7)])
def test_numpy_reads_a_kiln_tensor(dt, shape):
    a = sample(dt, shape)
    t = kiln.asarray(a)
    assert t.__dlpack_device__() == (1, 0)
    got = np.from_dlpack(t)
    assert got.dtype == a.dtype and got.shape == a.shape
    assert got.tobytes() == a.tobytes()  # the same bytes (-0, NaN)
    # A copy: writing it leaves the tensor as it was.
    if got.size:
        got.flat[0] = got.flat[-1]
        assert t.numpy().tobytes() == a.tobytes()


@pytest.mark.parametrize("dt", DTYPES)
def test_kiln_reads_numpy_including_strided_views(dt):
    a = sample(dt, (6, 8))
    for view in (a, a[::2, 1::3], a.T):
        t = kiln.from_dlpack(view)
        assert isinstance(t, kiln.Tensor) and t.shape == view.shape
        assert t.numpy().tobytes() == np.ascontiguousarray(view).tobytes()


def test_round_trip_and_device():
    t = kiln.arange(0, 12, dtype=kiln.int32).reshape((3, 4))
    u = kiln.from_dlpack(t)
    np.testing.assert_array_equal(u.numpy(), t.numpy())
    d = kiln.devices()[0]
    assert kiln.from_dlpack(t, device=d).device == d


def test_int64_follows_asarray_narrowing_rule():
    np.testing.assert_array_equal(kiln.from_dlpack(np.arange(5, dtype=np.int64)).numpy(), np.arange(5))
    with pytest.raises(ValueError):
        kiln.from_dlpack(np.array([2**40], dtype=np.int64))


def test_refusals():
    t = kiln.asarray(np.ones(3, np.float32))
    with pytest.raises(BufferError):
        t.__dlpack__(copy=False)
    with pytest.raises(BufferError):
        t.__dlpack__(dl_device=(15, 0))
    with pytest.raises(ValueError):
        t.__dlpack__(stream=1)
    with pytest.raises(BufferError):
        kiln.from_dlpack(np.ones(3, np.float32), copy=False)
    # A versioned export (numpy's max_version) still reads.
    assert np.from_dlpack(t, copy=True).tolist() == [1.0, 1.0, 1.0]


def test_non_host_producer_is_a_clear_error():
    class OnAnotherDevice:
        def __dlpack_device__(self):
            return (2, 0)  # kDLCUDA

        def __dlpack__(self, **kw):
            raise BufferError("not on the host")

    with pytest.raises(BufferError, match="host"):
        kiln.from_dlpack(OnAnotherDevice())
