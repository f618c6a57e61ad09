"""kiln.Session: quotas, operation and loop budgets, the shader policy, closing, threads, and
the audit log (docs/DESIGN.md, "Sessions and untrusted kernels")."""

import json
import threading

import kiln
import numpy as np
import pytest

SPIN = """
@group(0) @binding(0) var<storage, read_write> x: array<f32>;
@compute @workgroup_size(1) fn main() { loop { x[0] = x[0] + 1.0; } }
"""

TRIANGLE = """
@group(0) @binding(0) var<storage, read> n: array<u32>;
@group(0) @binding(1) var<storage, read_write> x: array<u32>;
@compute @workgroup_size(64)
fn main(@builtin(global_invocation_id) g: vec3<u32>) {
    let i = g.x;
    if (i >= arrayLength(&x)) { return; }
    var s = 0u;
    for (var j = 0u; j < n[i]; j++) { s += j; }
    x[i] = s;
}
"""


def test_quota_exceeded_leaves_the_session_usable():
    rng = np.random.default_rng(1)
    a_np = rng.standard_normal(1024).astype(np.float32)
    with kiln.Session(max_bytes=3 * 4096) as s:
        a = kiln.asarray(a_np)
        b = kiln.asarray(a_np)
        y = a + b
        np.testing.assert_array_equal(np.asarray(y), a_np + a_np)
        with pytest.raises(kiln.QuotaExceededError) as e:
            a * b
        assert e.value.code_name == "QUOTA_EXCEEDED"
        assert s.stats()["bytes_in_use"] == 3 * 4096
        del y
        z = a * b  # fits again
        np.testing.assert_array_equal(np.asarray(z), a_np * a_np)
        kept = np.asarray(z)
    assert s.closed and s.stats()["bytes_in_use"] == 0
    # The session's tensors are invalid now, the default session is not.
    with pytest.raises(kiln.InvalidArgumentError, match="closed"):
        np.asarray(z)
    np.testing.assert_array_equal(kept, a_np * a_np)
    np.testing.assert_array_equal(np.asarray(kiln.asarray(a_np) + 1), a_np + 1)


def test_loop_budget_stops_a_kernel_that_never_ends():
    with kiln.Session(max_loop_iterations=1000) as s:
        k = kiln.Kernel(SPIN)
        x = kiln.zeros(4, dtype="float32")
        k(x, workgroups=1)
        with pytest.raises(kiln.ComputeLimitError, match="loop budget"):
            np.asarray(x)
        counts = np.arange(0, 131, dtype=np.uint32) % 90
        n = kiln.asarray(counts)
        out = kiln.zeros(131, dtype="uint32")
        kiln.Kernel(TRIANGLE)(n, out, workgroups=3)
        np.testing.assert_array_equal(np.asarray(out), counts * (counts.astype(np.int64) - 1) // 2)
        assert s.stats()["compute_limit_hits"] == 1


def test_operation_budget_and_policy():
    a = kiln.ones(1 << 16, dtype="float32")
    with kiln.Session(max_ops_per_dispatch=16) as s:
        with pytest.raises(kiln.ComputeLimitError):
            a + a
        assert s.stats()["compute_limit_hits"] == 1
    atomic = (
        "\n@group(0) @binding(0) var<storage, read_write> c: atomic<u32>;\n"
        "@compute @workgroup_size(1) fn main() { atomicAdd(&c, 1u); }"
    )
    with kiln.Session(allow_atomics=False) as s:
        with pytest.raises(kiln.ShaderError, match=r"^\[SHADER\] 2:\d+: policy: .*atomics"):
            kiln.Kernel(atomic)
        assert s.stats()["policy_rejections"] == 1
    kiln.Kernel(atomic)  # the default session takes it


def test_sessions_on_threads():
    errors = []

    def work(i):
        try:
            v = np.arange(200, dtype=np.float32) * (i + 1)
            with kiln.Session(max_bytes=2 * 1024):
                a = kiln.asarray(v)
                y = a + a
                np.testing.assert_array_equal(np.asarray(y), v + v)
                try:
                    a * y
                    errors.append(f"thread {i}: no QuotaExceededError")
                except kiln.QuotaExceededError:
                    pass
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"thread {i}: {e!r}")

    threads = [threading.Thread(target=work, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []


def test_one_session_entered_on_two_threads_restores_each_threads_own():
    """Issue 28: two threads entering the same Session shared one saved-session stack, so the
    thread that left first got the other thread's outer session (its QuotaExceeded), and the
    other thread then allocated 8 MiB under its 1 MiB quota."""
    shared = kiln.Session()
    step = threading.Barrier(2, timeout=60)
    results = {}
    mib8 = np.ones(2 << 20, np.float32)

    def a():
        try:
            with kiln.Session(max_bytes=64 << 20):
                with shared:
                    step.wait()  # 1: a entered shared
                    step.wait()  # 2: b entered shared
                # a's outer session (64 MiB) must be current again, not b's (1 MiB).
                x = kiln.asarray(mib8)
                results["a"] = float(np.asarray(x)[-1])
                step.wait()  # 3
        except Exception as e:  # noqa: BLE001 - reported below
            results["a"] = repr(e)
            step.abort()

    def b():
        try:
            with kiln.Session(max_bytes=1 << 20):
                step.wait()  # 1
                with shared:
                    step.wait()  # 2
                    step.wait()  # 3: a left shared (closing it) and allocated
                # b's own 1 MiB session must be current again.
                try:
                    kiln.asarray(mib8)
                    results["b"] = "allocated 8 MiB under a 1 MiB quota"
                except kiln.QuotaExceededError:
                    results["b"] = "QuotaExceeded"
        except Exception as e:  # noqa: BLE001 - reported below
            results["b"] = repr(e)
            step.abort()

    threads = [threading.Thread(target=a), threading.Thread(target=b)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == {"a": 1.0, "b": "QuotaExceeded"}


def test_audit_log_to_a_callback():
    lines = []
    kiln.audit_to_callback(lines.append)
    try:
        with kiln.Session(max_bytes=64) as s:
            with pytest.raises(kiln.QuotaExceededError):
                kiln.zeros(1000, dtype="float32")
    finally:
        kiln.audit_off()
    events = [json.loads(line) for line in lines]
    mine = [e["event"] for e in events if e.get("session") == s.id]
    assert mine[0] == "session_opened" and mine[-1] == "session_closed" and "limit_hit" in mine
    with kiln.Session():
        pass
    assert len(lines) == len(events)  # off again


def test_max_kernels_and_the_kernel_charge():
    """Issue 28: kernels were charged nothing. At max_kernels (the same source again counts too)
    a compile raises QuotaExceededError; dropping one makes room."""
    src = (
        "@group(0) @binding(0) var<storage, read_write> x: array<f32>;\n"
        "@compute @workgroup_size(1) fn main() { x[0] = %d.0; }"
    )
    with kiln.Session(max_kernels=2) as s:
        a, b = kiln.Kernel(src % 1), kiln.Kernel(src % 2)
        with pytest.raises(kiln.QuotaExceededError, match="max_kernels"):
            kiln.Kernel(src % 1)
        assert s.stats()["kernels_alive"] == 2
        charge = s.stats()["bytes_in_use"] // 2
        del a
        c = kiln.Kernel(src % 3)
        assert s.stats()["kernels_alive"] == 2
    # The memory quota holds kernels too: a quota of one kernel's charge takes one kernel.
    with kiln.Session(max_bytes=charge) as s:
        d = kiln.Kernel(src % 4)
        with pytest.raises(kiln.QuotaExceededError, match="a kernel is charged"):
            kiln.Kernel(src % 5)
    del b, c, d
