"""Tensors on two devices: ``to_device``, ``asarray(device=)`` and the creation functions'
``device=``, and ops across devices refused.

Two adapters on a machine without a GPU: Mesa's llvmpipe through Vulkan and through OpenGL
(``KILN_BACKENDS=vulkan,gl``, read once per process: the checks run in a child interpreter).
"""

import os
import subprocess
import sys
import textwrap

CHILD = textwrap.dedent(
    """
    import pickle
    import kiln, numpy as np
    devs = kiln.devices()
    assert len(devs) >= 2, f"two adapters expected, found {devs}"
    d0, d1 = devs[0], devs[1]
    x = np.array([[1.5, -2.0, np.inf], [np.nan, -0.0, 3.0]], dtype=np.float32)
    a = kiln.asarray(x)
    assert a.device == d0
    b = kiln.asarray(x, device=d1)
    assert b.device == d1 and b.device != a.device
    np.testing.assert_array_equal(b.numpy(), x)
    # Ops across devices: InvalidArgumentError (a ValueError) naming the devices.
    for f in (lambda: a + b, lambda: kiln.matmul(a, b.T), lambda: kiln.where(a > 0, a, b)):
        try:
            f()
        except kiln.InvalidArgumentError as e:
            assert "device" in str(e), e
        else:
            raise AssertionError("an op ran on tensors of two devices")
    # The way across, both directions; the same device is no copy.
    np.testing.assert_array_equal((a + b.to_device(d0)).numpy(), x + x)
    np.testing.assert_array_equal((a.to_device(d1) * b).numpy(), x * x)
    assert a.to_device(d0) is not None and (a.to_device(d0).numpy() == a.numpy())[0, 0]
    i = kiln.asarray(np.array([-(2**31), -1, 7], dtype=np.int32), device=d1)
    np.testing.assert_array_equal(i.to_device(d0).numpy(), [-(2**31), -1, 7])
    assert kiln.asarray(np.zeros((0, 3), np.float32), device=d1).to_device(d0).shape == (0, 3)
    for bad in ("gpu", 1, None):
        try:
            a.to_device(bad)
        except (kiln.InvalidArgumentError, TypeError):
            pass
        else:
            raise AssertionError(f"to_device({bad!r}) ran")
    try:
        a.to_device(d1, stream=1)
    except kiln.InvalidArgumentError:
        pass
    else:
        raise AssertionError("stream= was accepted")
    # The creation functions' device=: made on the current device, then moved (the same values).
    made = [
        (kiln.zeros((2, 3), device=d1), np.zeros((2, 3), np.float32)),
        (kiln.ones((4,), dtype=kiln.int32, device=d1), np.ones(4, np.int32)),
        (kiln.full((2, 2), -0.0, device=d1), np.full((2, 2), -0.0, np.float32)),
        (kiln.arange(1, 10, 3, device=d1), np.arange(1, 10, 3, dtype=np.int32)),
        (kiln.zeros_like(a, device=d1), np.zeros_like(x)),
        (kiln.full_like(a, 7, device=d1), np.full_like(x, 7)),
        (kiln.empty((0, 2), device=d1), np.zeros((0, 2), np.float32)),
    ]
    for t, want in made:
        assert t.device == d1, (t, t.device)
        assert t.numpy().tobytes() == want.tobytes() and t.shape == want.shape, (t.numpy(), want)
    assert kiln.zeros((2,), device=d0).device == d0
    try:
        kiln.ones((2,), device="gpu")
    except kiln.InvalidArgumentError:
        pass
    else:
        raise AssertionError("device='gpu' was accepted")
    # A pickled tensor loads onto the default device.
    assert pickle.loads(pickle.dumps(b)).device == d0
    print("two devices: ok")
    """
)


def test_tensors_move_between_two_devices_and_ops_across_them_are_refused():
    env = dict(os.environ, KILN_BACKENDS="vulkan,gl")
    r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "two devices: ok" in r.stdout, r.stdout + r.stderr
