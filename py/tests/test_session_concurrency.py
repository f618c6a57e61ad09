"""1000 kiln.Session objects open at once across threads (issue 18): each over-quota request fails
with QuotaExceededError, every other result matches numpy, and no memory is left after all close.
Tiny tensors, so that it stays fast on lavapipe."""

import contextlib
import threading

import kiln
import numpy as np
import pytest

THREADS = 25
PER_THREAD = 40  # 1000 sessions open at the same time
CLASS = 64  # 9 to 16 f32 take one 64-byte size class


def test_a_thousand_sessions_at_once():
    before = kiln.memory_stats()["in_use_bytes"]
    barrier = threading.Barrier(THREADS + 1, timeout=300)
    errors = []
    closed = []

    def work(t):
        rng = np.random.default_rng(1000 + t)
        sessions = []
        # Nested `with` blocks keep every session of the thread open (the innermost is current)
        # until the barrier; leaving them closes them in turn.
        with contextlib.ExitStack() as stack:
            try:
                for i in range(PER_THREAD):
                    s = stack.enter_context(kiln.Session(max_bytes=3 * CLASS))
                    n = int(rng.integers(9, 17))
                    a = rng.uniform(-1, 1, n).astype(np.float32)
                    b = rng.uniform(-1, 1, n).astype(np.float32)
                    ta, tb = kiln.asarray(a), kiln.asarray(b)
                    y = ta + tb  # three tensors of one class: the quota is full
                    if not np.array_equal(np.asarray(y), a + b):
                        errors.append(f"thread {t} session {i}: wrong sum")
                    try:
                        kiln.asarray(np.zeros(1, np.float32))
                        errors.append(f"thread {t} session {i}: no QuotaExceededError")
                    except kiln.QuotaExceededError:
                        pass
                    sessions.append((s, (ta, tb, y)))
            except Exception as e:  # noqa: BLE001 - reported below
                errors.append(f"thread {t}: {e!r}")
            finally:
                barrier.wait()  # every session is open and holds its tensors here
                barrier.wait()
            for s, _ in sessions:
                st = s.stats()
                if (st["bytes_in_use"], st["quota_exceeded"], st["closed"]) != (3 * CLASS, 1, False):
                    errors.append(f"thread {t}: {st}")
        for s, (_, _, y) in sessions:
            st = s.stats()
            if (st["bytes_in_use"], st["live_buffers"], st["closed"]) != (0, 0, True):
                errors.append(f"thread {t}: after close {st}")
            with pytest.raises(kiln.InvalidArgumentError):
                np.asarray(y)
        closed.append(len(sessions))

    threads = [threading.Thread(target=work, args=(t,)) for t in range(THREADS)]
    for th in threads:
        th.start()
    barrier.wait()
    held = kiln.memory_stats()["in_use_bytes"] - before
    barrier.wait()
    for th in threads:
        th.join()
    assert errors == []
    assert sum(closed) == THREADS * PER_THREAD
    assert held >= THREADS * PER_THREAD * 3 * CLASS
    assert kiln.memory_stats()["in_use_bytes"] == before, "no memory left after every session closed"
