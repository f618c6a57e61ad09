"""Custom WGSL kernels, every exception type, and 8 Python threads running ops at once."""

import threading

import kiln
import numpy as np
import pytest
from conftest import check, f64, rand

AXPY = """
struct Params { alpha: f32, n: u32 }
@group(0) @binding(0) var<storage, read> x: array<f32>;
@group(0) @binding(1) var<storage, read> y: array<f32>;
@group(0) @binding(2) var<storage, read_write> out: array<f32>;
@group(0) @binding(3) var<uniform> p: Params;

@compute @workgroup_size(64)
fn axpy(@builtin(global_invocation_id) gid: vec3<u32>) {
    let i = gid.x;
    if (i < p.n) {
        out[i] = p.alpha * x[i] + y[i];
    }
}
"""

DOUBLE = """
@group(0) @binding(0) var<storage, read_write> buf: array<i32>;
@compute @workgroup_size(1)
fn main(@builtin(global_invocation_id) gid: vec3<u32>) {
    buf[gid.x] = buf[gid.x] * 2;
}
"""


def test_kernel_with_uniform_bytes_and_numpy(rng):
    n = 1000
    x, y = rand(rng, (n,)), rand(rng, (n,))
    k = kiln.Kernel(AXPY, entry="axpy")
    assert k.entry == "axpy" and k.workgroup_size == (64, 1, 1)
    assert [b["name"] for b in k.bindings] == ["x", "y", "out"]
    assert k.bindings[2]["writable"] and not k.bindings[0]["writable"] and k.bindings[0]["dtype"] == "float32"
    assert k.uniform_bytes == 8
    out = kiln.empty(n)
    params = np.zeros(2, np.uint32)
    params[0] = np.float32(2.5).view(np.uint32)
    params[1] = n
    k(kiln.asarray(x), kiln.asarray(y), out, workgroups=((n + 63) // 64, 1, 1), uniforms=params)
    check(out, 2.5 * f64(x) + f64(y), "float32")
    out2 = kiln.zeros(n)
    k(kiln.asarray(x), kiln.asarray(y), out2, workgroups=(n + 63) // 64,
      uniforms=np.float32(-1.0).tobytes() + np.uint32(n).tobytes())
    check(out2, -f64(x) + f64(y), "float32")


def test_kernel_in_place_and_default_entry():
    k = kiln.Kernel(DOUBLE)
    t = kiln.asarray(np.arange(5, dtype=np.int32))
    k(t, workgroups=(5,))
    k(t, workgroups=5)
    np.testing.assert_array_equal(t.numpy(), np.arange(5) * 4)


def test_kernel_errors():
    with pytest.raises(kiln.ShaderError) as e:
        kiln.Kernel("@compute @workgroup_size(1) fn main() { let x: f32 = ; }")
    assert e.value.code == 7 and ":" in e.value.message and isinstance(e.value, kiln.KilnError)
    assert "1:" in str(e.value)  # line:column of the fault
    with pytest.raises(kiln.ShaderError, match="no entry point"):
        kiln.Kernel(DOUBLE, entry="nope")
    with pytest.raises(kiln.ShaderError):
        kiln.Kernel(DOUBLE.replace("buf[gid.x] * 2", "buf[gid.x] * 2.0"))
    k = kiln.Kernel(AXPY, entry="axpy")
    a = kiln.zeros(4)
    with pytest.raises(ValueError):  # wrong number of tensors
        k(a, a, workgroups=1, uniforms=b"\0" * 8)
    with pytest.raises(TypeError):  # binding holds f32, tensor is i32
        k(a, kiln.zeros(4, dtype="int32"), kiln.zeros(4), workgroups=1, uniforms=b"\0" * 8)
    with pytest.raises(ValueError):  # uniforms missing
        k(a, a, kiln.zeros(4), workgroups=1)
    with pytest.raises(ValueError):  # uniforms too short
        k(a, a, kiln.zeros(4), workgroups=1, uniforms=b"\0" * 4)
    with pytest.raises(ValueError):  # the output aliases an input
        k(a, a, a, workgroups=1, uniforms=b"\0" * 8)
    with pytest.raises(ValueError):
        k(a, a, kiln.zeros(4), workgroups=(1, 1, 1, 1), uniforms=b"\0" * 8)
    with pytest.raises(ValueError):
        k(np.zeros(4, np.float32), a, kiln.zeros(4), workgroups=1, uniforms=b"\0" * 8)


# ------------------------------------------------------------------------------------- errors

EXCEPTIONS = {
    1: (kiln.InvalidArgumentError, ValueError),
    2: (kiln.InvalidArgumentError, ValueError),
    3: (kiln.ShapeError, ValueError),
    4: (kiln.DTypeError, TypeError),
    5: (kiln.OutOfMemoryError, MemoryError),
    6: (kiln.QuotaExceededError, kiln.KilnError),
    7: (kiln.ShaderError, kiln.KilnError),
    8: (kiln.DeviceLostError, kiln.KilnError),
    9: (kiln.NoAdapterError, RuntimeError),
    10: (kiln.TimeoutError, TimeoutError),
    11: (kiln.UnsupportedError, kiln.KilnError),
    12: (kiln.InternalError, RuntimeError),
    13: (kiln.InternalError, RuntimeError),
    14: (kiln.ComputeLimitError, kiln.KilnError),
}


def test_the_error_table_comes_from_core():
    table = kiln._kiln.error_codes()
    assert [c for c, _, _ in table] == list(range(len(table)))
    assert kiln.CODE_NAMES == {c: n for c, n, _ in table}
    assert table[0][1] == "OK" and all(meaning for _, _, meaning in table)
    with pytest.raises(kiln.InvalidArgumentError):
        kiln._kiln._raise_error(0, "OK is not an error")
    with pytest.raises(kiln.InvalidArgumentError):
        kiln._kiln._raise_error(len(table), "past the table")


@pytest.mark.parametrize("code", range(1, len(kiln._kiln.error_codes())))
def test_every_code_maps_to_its_class(code):
    # The same mapping function (src/errors.rs) that every op goes through; the codes that no
    # input can provoke on a healthy device (DEVICE_LOST, QUOTA_EXCEEDED, TIMEOUT) are checked here.
    # A code added to core's table without a class of its own raises KilnError.
    cls, base = EXCEPTIONS.get(code, (kiln.KilnError, kiln.KilnError))
    with pytest.raises(cls) as e:
        kiln._kiln._raise_error(code, "message text")
    assert isinstance(e.value, kiln.KilnError) and isinstance(e.value, base)
    assert e.value.code == code and e.value.message == "message text"
    assert e.value.code_name == kiln.CODE_NAMES[code]


def test_real_errors_from_core():
    with pytest.raises(kiln.ShapeError):
        kiln.ones((2, 3)) + kiln.ones((4,))
    with pytest.raises(kiln.DTypeError):
        kiln.ones(2) * kiln.ones(2, dtype="uint32")
    with pytest.raises(kiln.InvalidArgumentError):
        kiln.sum(kiln.ones((2, 3)), axis=5)
    with pytest.raises(kiln.ShaderError):
        kiln.Kernel("fn")
    with pytest.raises(kiln.OutOfMemoryError) as e:
        kiln.empty((1 << 20, 1 << 20, 4))  # 16 TiB: over any adapter's buffer limit
    assert e.value.code == 5
    with pytest.raises(kiln.InternalError) as e:
        kiln._kiln._panic()
    assert e.value.code == 12 and "deliberate panic" in e.value.message
    # The process, the device and other tensors are intact after every error above.
    t = kiln.asarray([1.0, 2.0])
    np.testing.assert_array_equal((t + 1).numpy(), [2.0, 3.0])


# ------------------------------------------------------------------------------------- threads

def test_eight_threads_running_ops():
    n_threads, iters = 8, 20
    shared = kiln.asarray(np.arange(64, dtype=np.float32).reshape(8, 8))
    kernel = kiln.Kernel(DOUBLE)
    errors, results = [], {}

    def worker(tid):
        try:
            rng = np.random.default_rng(tid)
            for it in range(iters):
                a = rng.uniform(-1, 1, size=(8, 8)).astype(np.float32)
                b = rng.uniform(-1, 1, size=(8,)).astype(np.float32)
                ta = kiln.asarray(a)
                got = ((ta * 2 + b) @ shared).sum(axis=0)
                want = ((f64(a) * 2 + f64(b)) @ f64(shared.numpy())).sum(axis=0)
                np.testing.assert_allclose(got.numpy(), want, rtol=1e-4, atol=1e-3)
                s = kiln.softmax(ta, axis=-1).numpy()
                np.testing.assert_allclose(s.sum(-1), np.ones(8), rtol=1e-5)
                t = kiln.asarray(np.full(3, tid, np.int32))
                kernel(t, workgroups=3)
                np.testing.assert_array_equal(t.numpy(), np.full(3, 2 * tid))
                if it % 5 == 0:
                    kiln.synchronize()
            results[tid] = True
        except BaseException as e:  # collected and re-raised on the main thread
            errors.append((tid, e))

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(n_threads)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=600)
    assert not errors, errors
    assert sorted(results) == list(range(n_threads))
    np.testing.assert_array_equal(shared.numpy(), np.arange(64, dtype=np.float32).reshape(8, 8))
