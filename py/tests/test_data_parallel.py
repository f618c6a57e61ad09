"""Data parallel models (``devices=``): ``SentenceEmbedder(path, devices=[0, 1])`` against
sentence-transformers' reference and against each device alone; ``CausalLM(path, devices=...)``'s
``generate_batch`` against the one-device model; errors of one device raised once, naming it.

Two adapters on a machine without a GPU: Mesa's llvmpipe through Vulkan (device 0) and through
OpenGL (device 1) (``KILN_BACKENDS=vulkan,gl``, read once per process: the checks run in a child
interpreter). Needs KILN_MINILM_DIR (and KILN_SMOLLM2_GGUF for the CausalLM part), as
test_models.py.
"""

import os
import pathlib
import subprocess
import sys
import textwrap

import pytest

REF = pathlib.Path(__file__).resolve().parents[2] / "models" / "tests" / "reference"
MODEL_DIR = os.environ.get("KILN_MINILM_DIR")
SMOLLM2 = os.environ.get("KILN_SMOLLM2_GGUF")

CHILD = textwrap.dedent(
    """
    import json, os, sys
    import numpy as np
    import kiln
    from kiln.models import CausalLM, SentenceEmbedder

    ref, model_dir, smollm2 = sys.argv[1], sys.argv[2], sys.argv[3]
    devs = kiln.devices()
    assert len(devs) >= 2, f"two adapters expected, found {devs}"
    sentences = json.load(open(os.path.join(ref, "sentences.json"), encoding="utf-8"))
    rows = [0, 1, 2, 5, 6, 11]  # short ones: MiniLM on llvmpipe's GL is slow
    texts = [sentences[i] for i in rows]
    want = np.load(os.path.join(ref, "embeddings.npy"))[rows]

    dp = SentenceEmbedder(model_dir, devices=[0, devs[1]])
    assert dp.devices == [0, 1], dp.devices
    assert "devices=[0, 1]" in repr(dp)
    got = dp.encode(texts, batch_size=2)
    assert got.shape == (len(rows), 384) and got.dtype == np.float32
    cos = (got * want).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
    assert cos.min() >= 0.9999 and np.abs(got - want).max() <= 1e-4, (cos, np.abs(got - want).max())
    # Each row is bit for bit one device's own (the one that ran its batch).
    alone = [SentenceEmbedder(model_dir, devices=[k]).encode(texts, batch_size=2) for k in (0, 1)]
    for i in range(len(rows)):
        assert any(np.array_equal(got[i].view(np.uint32), a[i].view(np.uint32)) for a in alone), i
    default = SentenceEmbedder(model_dir)
    assert default.devices == [0]
    assert np.array_equal(default.encode(texts, batch_size=2).view(np.uint32), alone[0].view(np.uint32))
    # Shares: (nearly) everything on device 1 is device 1's one-device result.
    skewed = SentenceEmbedder(model_dir, devices=[0, 1], shares=[1e-6, 1.0])
    assert np.array_equal(skewed.encode(texts, batch_size=2).view(np.uint32), alone[1].view(np.uint32))
    one = dp.encode(texts[0])
    assert one.shape == (384,) and np.array_equal(one, alone[0][0])
    assert dp.encode([]).shape == (0, 384)

    # Bad device lists and shares: ValueError, nothing loaded.
    for bad in ("gpu", [0, 0], [0, 99], [True], [-1], 3):
        try:
            SentenceEmbedder(model_dir, devices=bad)
        except (ValueError, kiln.KilnError) as e:
            assert "device" in str(e), (bad, e)
        else:
            raise AssertionError(f"devices={bad!r} was accepted")
    for bad in ([1.0], [1.0, 0.0], [1.0, float("nan")]):
        try:
            SentenceEmbedder(model_dir, devices=[0, 1], shares=bad)
        except ValueError as e:
            assert "shares" in str(e), e
        else:
            raise AssertionError(f"shares={bad!r} was accepted")
    # One device's error: its own kind, once, naming the device (llvmpipe's GL has no SHADER_F16).
    if not devs[1].shader_f16:
        try:
            SentenceEmbedder(model_dir, dtype="float16", devices=[0, 1])
        except kiln.UnsupportedError as e:
            assert "] device 1 (" in str(e) and "SHADER_F16" in str(e), e
        else:
            raise AssertionError("f16 loaded on an adapter without SHADER_F16")
    try:
        SentenceEmbedder("/nonexistent/model", devices=[0, 1])
    except FileNotFoundError as e:
        assert str(e).startswith("device 0 (") and "(and 1 other device failed)" in str(e), e
    else:
        raise AssertionError("a missing folder loaded")
    print("embedder: ok")

    if smollm2:
        # Two prompts, one per device, two tokens: SmolLM2 on llvmpipe's GL is slow (~30 s).
        prompts = ["The capital of France is", "One, two,"]
        lm = CausalLM(smollm2, devices=[0, 1])
        assert lm.devices == [0, 1]
        got = lm.generate_batch(prompts, max_new_tokens=2)
        want = CausalLM(smollm2, devices=[0]).generate_batch(prompts, max_new_tokens=2)
        assert got == want, (got, want)
        try:
            CausalLM(smollm2, devices=[5])
        except ValueError as e:
            assert "device 5" in str(e), e
        else:
            raise AssertionError("devices=[5] was accepted")
        print("causal lm: ok")
    """
)


@pytest.mark.skipif(not MODEL_DIR, reason="KILN_MINILM_DIR not set (make models-test sets it)")
def test_models_over_two_devices():
    env = dict(os.environ, KILN_BACKENDS="vulkan,gl")
    args = [sys.executable, "-c", CHILD, str(REF), MODEL_DIR, SMOLLM2 or ""]
    r = subprocess.run(args, env=env, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0 and "embedder: ok" in r.stdout, r.stdout + r.stderr
    if SMOLLM2:
        assert "causal lm: ok" in r.stdout, r.stdout + r.stderr
