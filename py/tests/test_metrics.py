"""kiln.metrics_text(), kiln.profile() and a session's GPU-time budget (docs/DESIGN.md,
"Metrics and profiling")."""

import re

import kiln
import numpy as np
import pytest


def _sample(text, name, **labels):
    want = ",".join(f'{k}="{v}"' for k, v in labels.items())
    head = f"{name}{{{want}}}" if labels else name
    for line in text.splitlines():
        if line.startswith(head + " "):
            return float(line.split(" ")[-1])
    return 0.0


def test_metrics_text_counts_dispatches_and_parses():
    rng = np.random.default_rng(1)
    a = rng.standard_normal(300).astype(np.float32)
    ka = kiln.asarray(a)
    kiln.add(ka, ka).numpy()
    before = _sample(kiln.metrics_text(), "kiln_op_dispatches_total", op="elementwise:add")
    for _ in range(5):
        np.testing.assert_array_equal((ka + ka).numpy(), a + a)
    text = kiln.metrics_text()
    assert _sample(text, "kiln_op_dispatches_total", op="elementwise:add") - before == 5
    families = {}
    for line in text.splitlines():
        m = re.match(r"# (HELP|TYPE) (\S+) (.+)", line)
        if m:
            families.setdefault(m.group(2), {})[m.group(1)] = m.group(3)
            continue
        assert re.match(r"^kiln_\w+(\{[^}]*\})? \S+$", line), line
    assert families["kiln_op_gpu_seconds"]["TYPE"] == "histogram"
    assert families["kiln_errors_total"]["TYPE"] == "counter"
    assert all("HELP" in f and "TYPE" in f for f in families.values())


def test_profile_rows_and_table():
    rng = np.random.default_rng(2)
    a = rng.standard_normal((33, 17)).astype(np.float32)
    b = rng.standard_normal((33, 17)).astype(np.float32)
    ka, kb = kiln.asarray(a), kiln.asarray(b)
    with kiln.profile() as p:
        y = ka + kb
        y = y * kb
        y = y + kb
        out = y.numpy()
    np.testing.assert_allclose(out, (a + b) * b + b, rtol=1e-6, atol=1e-6)
    calls = {r["op"]: r["calls"] for r in p.rows}
    assert calls == {"elementwise:add": 2, "elementwise:mul": 1}
    assert p.clock in ("gpu_timestamps", "wall_clock")
    assert p.total_s > 0
    assert sum(r["share"] for r in p.rows) == pytest.approx(1.0)
    for r in p.rows:
        assert r["mean_s"] * r["timed"] == pytest.approx(r["total_s"])
    table = str(p)
    assert "elementwise:add" in table and "calls" in table
    if p.clock == "wall_clock":
        assert "WALL-CLOCK" in table
    with kiln.profile():
        with pytest.raises(kiln.InvalidArgumentError):
            with kiln.profile():
                pass


def test_gpu_time_budget_refuses_once_spent():
    a = kiln.asarray(np.linspace(-1, 1, 1 << 18, dtype=np.float32))
    with kiln.Session(max_gpu_time_ms=2) as s:
        with pytest.raises(kiln.ComputeLimitError, match="GPU time"):
            for _ in range(5000):
                (a * a).numpy()
        st = s.stats()
    assert st["gpu_time_ns"] >= 2_000_000
    assert st["bound_bytes"] > 0
    assert st["compute_limit_hits"] == 1
