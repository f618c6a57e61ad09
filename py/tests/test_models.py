"""kiln.models.SentenceEmbedder against sentence-transformers' own output (the reference files
of models/tests/reference, made by make_reference.py with PyTorch). Needs the model directory in
KILN_MINILM_DIR: `make models-test` fetches it and runs this file; without it the tests skip.
"""

import json
import os
import pathlib
import shutil
import threading
import time

import kiln
import numpy as np
import pytest
from conftest import needs_f16
from kiln.models import SentenceEmbedder

REF = pathlib.Path(__file__).resolve().parents[2] / "models" / "tests" / "reference"
MODEL_DIR = os.environ.get("KILN_MINILM_DIR")
pytestmark = pytest.mark.skipif(not MODEL_DIR, reason="KILN_MINILM_DIR not set (make models-test sets it)")

SENTENCES = json.loads((REF / "sentences.json").read_text(encoding="utf-8"))
# The 256-token sentence costs ~15 s on lavapipe; the Rust test covers it.
SHORT = [i for i, s in enumerate(SENTENCES) if len(s) < 200]


@pytest.fixture(scope="module")
def model():
    return SentenceEmbedder(MODEL_DIR)


def check(got, want, min_cos, max_diff):
    assert got.dtype == np.float32 and got.shape == want.shape
    cos = (got * want).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
    diff = np.abs(got - want).max(1)
    bad = [(i, c, d) for i, (c, d) in enumerate(zip(cos, diff)) if not (c >= min_cos and d <= max_diff)]
    assert not bad, f"(row, cosine, max|diff|) outside tolerance: {bad}"


def test_token_ids_equal_sentence_transformers(model):
    want = json.loads((REF / "token_ids.json").read_text(encoding="utf-8"))["ids"]
    assert model.tokenize(SENTENCES) == want
    assert model.tokenize(SENTENCES[0]) == [want[0]]


def test_encode_matches_sentence_transformers(model):
    want = np.load(REF / "embeddings.npy")[SHORT]
    got = model.encode([SENTENCES[i] for i in SHORT], batch_size=4)
    check(got, want, 0.9999, 1e-4)
    assert np.allclose(np.linalg.norm(got, axis=1), 1, atol=1e-5)


def test_encode_without_normalize_is_the_mean_pool(model):
    rows = SHORT[:5]
    want = np.load(REF / "pooled.npy")[rows]
    check(model.encode([SENTENCES[i] for i in rows], batch_size=64, normalize=False), want, 0.9999, 1e-4)
    alias = model.encode([SENTENCES[i] for i in SHORT[:2]], normalize_embeddings=False)
    check(alias, want[:2], 0.9999, 1e-4)


def test_shapes_like_sentence_transformers(model):
    dim = model.get_sentence_embedding_dimension()
    assert (dim, model.max_seq_length) == (384, 256)
    one = model.encode(SENTENCES[0])
    assert one.shape == (dim,)
    assert np.array_equal(one, model.encode([SENTENCES[0]])[0])
    assert model.encode([]).shape == (0, dim)
    assert model.encode(iter([SENTENCES[0], ""])).shape == (2, dim)


def test_bad_arguments_raise_and_the_model_keeps_working(model, tmp_path):
    with pytest.raises(ValueError):
        model.encode(["a"], batch_size=0)
    with pytest.raises(TypeError):
        model.encode(["a", 3])
    with pytest.raises(ValueError):
        model.encode(["a"], normalize=True, normalize_embeddings=False)
    with pytest.raises(FileNotFoundError):
        SentenceEmbedder(tmp_path / "no-such-model")
    with pytest.raises(ValueError):
        SentenceEmbedder(MODEL_DIR, dtype="int32")
    bad = tmp_path / "bad"
    shutil.copytree(MODEL_DIR, bad, ignore=shutil.ignore_patterns("model.safetensors"))
    (bad / "model.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(ValueError, match="safetensors"):
        SentenceEmbedder(bad)
    assert model.encode("still fine").shape == (384,)


def test_encode_releases_the_gil(model):
    # This thread must keep running while another one is inside encode(). The texts double
    # until one call lasts 20 ms (at once on lavapipe, a few doublings on a fast GPU).
    def timed_encode(texts, span):
        span += [time.perf_counter(), model.encode(texts), time.perf_counter()]

    texts = [SENTENCES[i] for i in SHORT[:4]]
    while True:
        span = []
        ticks = []
        t = threading.Thread(target=timed_encode, args=(texts, span))
        t.start()
        while t.is_alive():
            ticks.append(time.perf_counter())
            time.sleep(0.0005)
        t.join()
        start, end = span[0], span[2]
        if end - start >= 0.02 or len(texts) >= 4096:
            break
        texts = texts * 2
    during = [x for x in ticks if start < x < end]
    assert len(during) >= 5, (end - start, len(during))


@needs_f16
def test_f16_stays_close_to_the_f32_reference():
    m = SentenceEmbedder(MODEL_DIR, dtype=np.float16)
    assert m.dtype == np.float16 and "float16" in repr(m)
    rows = [2, 4, 5, 6, 9]  # empty, accents, emoji, CJK, numbers: f16 is slow on lavapipe
    got = m.encode([SENTENCES[i] for i in rows], batch_size=64)
    check(got, np.load(REF / "embeddings.npy")[rows], 0.99999, 1e-3)


def test_models_is_part_of_the_package():
    assert kiln.models.SentenceEmbedder is SentenceEmbedder


# --- CausalLM: SmolLM2-135M-Instruct (Q4_1 GGUF) against llama.cpp's own output -------------------

SMOLLM2 = os.environ.get("KILN_SMOLLM2_GGUF")
SMOLLM2_REF = REF / "smollm2" / "reference.json"
needs_smollm2 = pytest.mark.skipif(not SMOLLM2, reason="KILN_SMOLLM2_GGUF not set (make models-test sets it)")


@pytest.fixture(scope="module")
def lm():
    from kiln.models import CausalLM

    return CausalLM(SMOLLM2)


@needs_smollm2
def test_causal_lm_tokens_and_greedy_text_follow_llama_cpp(lm):
    ref = json.loads(SMOLLM2_REF.read_text(encoding="utf-8"))["prompts"][0]
    assert lm.tokenize(ref["text"]) == ref["ids"]
    # Three greedy tokens (lavapipe is slow): a prefix of llama.cpp's greedy continuation, whose
    # first steps have clear top-1/top-2 margins (models/tests/smollm2.rs checks every step).
    text = lm.generate(ref["text"], max_new_tokens=3)
    assert text and ref["greedy_text"].startswith(text), (text, ref["greedy_text"])
    pieces = list(lm.stream(ref["text"], max_new_tokens=3))
    assert all(pieces) and "".join(pieces) == text


@needs_smollm2
def test_causal_lm_seeded_sampling_repeats_and_bad_options_raise(lm):
    a = lm.generate("Once upon a time", max_new_tokens=2, temperature=0.9, seed=7)
    assert a == lm.generate("Once upon a time", max_new_tokens=2, temperature=0.9, seed=7)
    for bad in [dict(top_p=0.0), dict(temperature=-1.0), dict(repetition_penalty=0.0)]:
        with pytest.raises(ValueError):
            lm.generate("x", max_new_tokens=1, **bad)
    assert "<|im_start|>user" in lm.chat_prompt("hi")
    with pytest.raises(FileNotFoundError):
        type(lm)("/nonexistent/model.gguf")


@needs_smollm2
def test_causal_lm_generate_batch_gives_each_prompt_its_own_text(lm):
    prompts = ["The capital of France is", "1, 2, 3,", "Hi"]
    alone = [lm.generate(p, max_new_tokens=3) for p in prompts]
    assert lm.generate_batch(prompts, max_new_tokens=3) == alone
    sampled = dict(max_new_tokens=2, temperature=0.9, seed=7)
    assert lm.generate_batch(prompts[:2], **sampled) == [lm.generate(p, **sampled) for p in prompts[:2]]
    assert lm.generate_batch([]) == []
    with pytest.raises(ValueError):
        lm.generate_batch(prompts, top_p=0.0)


ARCH = pathlib.Path(__file__).resolve().parents[2] / "models" / "tests" / "reference" / "arch"


@pytest.mark.parametrize("name", ["qwen2", "llama3"])
def test_causal_lm_chat_template_from_the_gguf(name):
    """The GGUF's own Jinja template (minijinja) and tokenizer against llama.cpp's and jinja2's
    (models/tests/reference/make_arch_reference.py), for a conversation given as dicts."""
    ref = json.loads((ARCH / "reference.json").read_text())["models"][name]
    lm = kiln.models.CausalLM(str(ARCH / ref["file"]))
    for p in ref["prompts"]:
        if p["chat"] is None:
            assert lm.tokenize(p["text"]) == p["ids"]
            continue
        text = lm.chat_prompt(p["chat"])
        # Kiln cuts the template's leading BOS when the tokenizer adds one (as llama.cpp does).
        assert p["text"].endswith(text) and lm.tokenize(text) == p["ids"]
    assert lm.chat_prompt("hi") == lm.chat_prompt([{"role": "user", "content": "hi"}])
    with pytest.raises(ValueError):
        lm.chat_prompt([{"role": "user"}])


@pytest.mark.parametrize("name", ["phi3", "gemma", "llama2"])
def test_causal_lm_sentencepiece_vocabularies(name):
    """Phi-3, Gemma and Llama 2 layouts with SentencePiece vocabularies
    (models/tests/reference/make_spm_arch_reference.py): chat prompts through the GGUF's template
    and token ids equal to llama.cpp's, plain text round-tripping, and the last logits within
    1e-3 of the float64 pass."""
    ref = json.loads((ARCH / "spm_reference.json").read_text())["models"][name]
    lm = kiln.models.CausalLM(str(ARCH / ref["file"]))
    for p in ref["prompts"]:
        if p["chat"] is None:
            assert lm.tokenize(p["text"]) == p["ids"]
        else:
            text = lm.chat_prompt(p["chat"])
            assert p["text"].endswith(text) and lm.tokenize(text) == p["ids"]
        np.testing.assert_allclose(lm.logits(p["ids"]), np.array(p["logits_f64"]), rtol=0, atol=1e-3)
    for case in ref["tokenizer"]:
        assert lm.tokenize(case["text"]) == case["ids"], case["text"]
    assert lm.detokenize(lm.tokenize("  the fisherman café 😀")) == "  the fisherman café 😀"


@pytest.mark.parametrize("name", ["qwen2", "llama3_untied"])
def test_causal_lm_logits_score_and_perplexity_follow_the_float64_pass(name):
    """logits / score / perplexity against the exact float64 pass of the same file
    (models/tests/reference/make_score_reference.py), from ids and from text."""
    ref = json.loads((ARCH / "reference.json").read_text())["models"][name]
    scores = {s["name"]: s for s in json.loads((ARCH / "scores.json").read_text())[name]}
    lm = kiln.models.CausalLM(str(ARCH / ref["file"]))
    p = ref["prompts"][1]  # "numbers": a plain-text prompt of ~30 tokens
    ids = p["ids"]
    want = np.array(scores[p["name"]]["logprobs_f64"])
    got = lm.score(ids)
    assert got.dtype == np.float64 and got.shape == (len(ids) - 1,)
    np.testing.assert_allclose(got, want, rtol=0, atol=1e-3)
    np.testing.assert_allclose(lm.score(np.array(ids, dtype=np.int64)), got, rtol=0, atol=0)
    assert lm.perplexity(ids) == pytest.approx(np.exp(-want.mean()), rel=1e-3)
    last = lm.logits(ids)
    assert last.dtype == np.float32 and last.shape == (len(lm.logits(ids[:1])),)
    np.testing.assert_allclose(last, np.array(p["logits_f64"]), rtol=0, atol=1e-3)
    every = lm.logits(ids, all_positions=True)
    assert every.shape == (len(ids), last.shape[0])
    np.testing.assert_allclose(every[-1], last, rtol=0, atol=1e-4)
    # From text: the tokenizer's ids (BOS as the file says) give the same scores.
    if lm.tokenize(p["text"]) == ids:
        np.testing.assert_allclose(lm.score(p["text"]), got, rtol=0, atol=0)
    assert lm.detokenize(lm.tokenize("hello world")).endswith("hello world")
    assert lm.score(ids[:1]).shape == (0,)
    vocab = last.shape[0]
    for bad in ([1, vocab], [vocab]):
        with pytest.raises(ValueError, match="vocabulary"):
            lm.score(bad)
    with pytest.raises(ValueError):
        lm.perplexity(ids[:1])
    with pytest.raises((ValueError, OverflowError, TypeError)):
        lm.score([1, -2])
    assert lm.score(ids).shape == got.shape  # the model still works
