"""Small GGUF decoders of the Llama family with random weights, and llama.cpp's view of them,
for Kiln's tests (models/tests/arch_models.rs): written to arch/ beside this script.

Nothing can be downloaded from model hubs here, so each file is made from scratch with the
`gguf` package in the structure llama.cpp's converter writes for the real model, dimensions
reduced:
  - llama3: Llama-3.2-1B's layout (head_dim 64, grouped-query attention 4:1, tied output,
    RoPE base 500000 with Llama 3.1's `rope_freqs.weight` factors, "llama-bpe" pre-tokenizer,
    BOS added, Q and K rows permuted as convert_hf_to_gguf.py permutes them), 2 layers of 256,
    quantized by llama.cpp to Q4_K_M (its own mix: Q4_K, Q6_K);
  - X;
  - qwen2: Qwen2.5-0.5B's layout (head_dim 64, 7 query heads per KV head, Q/K/V biases, tied
    output, base 1e6, "qwen2" pre-tokenizer, no BOS, no permutation), 2 layers of 448 (feed-forward 512),
    quantized by llama.cpp to Q4_K_M (rows of 448 are not whole K-blocks: llama.cpp falls back
    to Q5_0 / Q8_0 per tensor, a mixed file).
The vocabulary is a byte-level BPE trained here on a few sentences (256 byte tokens, ~300
merges) plus whole-word tokens no merge reaches (Llama 3's ignore_merges takes them, Qwen2's
BPE does not) and each model's special tokens; the chat templates are the real models'
(Meta-Llama-3-8B-Instruct's, Qwen2.5's without the tools branch).

For each file and prompt: llama.cpp's token ids (tokenize, special tokens parsed, BOS as the
file says), its logits after the prompt, a greedy continuation with its top-1 minus top-2
margins, and an exact float64 pass written here from llama.cpp's semantics (weights
dequantized by gguf-py; RoPE "normal" (adjacent pairs) on llama's permuted rows, "neox"
(halves) on qwen2's; frequency factors dividing the turn) with llama.cpp's own distance from it.

Usage: python make_arch_reference.py   (needs gguf, numpy, jinja2 and llama-cpp-python)
"""

import json
import re
from collections import Counter
from importlib.metadata import version
from pathlib import Path

import gguf
import jinja2
import jinja2.sandbox
import llama_cpp
import numpy as np
from gguf.quants import dequantize

HERE = Path(__file__).parent / "arch"
STEPS = 12

CORPUS = """The capital of France is Paris. The tallest mountain in the world is Mount Everest.
Once upon a time, in a small village by the sea, there lived an old fisherman and his cat.
def fibonacci(n): return n if n < 2 else fibonacci(n - 1) + fibonacci(n - 2)
GPUs run many threads at once; a kernel is a small program that each thread runs.
Numbers like 1234567 and 3.14159 are split into digits by some tokenizers and not by others.
What is the weather like today? It is sunny and warm, with a light breeze from the west.
"""
# Whole words in the vocabulary that no merge builds (ignore_merges emits them as they are).
ORPHANS = ["Ġgalaxy", "Ġpurple", "Ġzebra"]

LLAMA3_TEMPLATE = (
    "{% set loop_messages = messages %}{% for message in loop_messages %}"
    "{% set content = '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'"
    "+ message['content'] | trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}"
    "{% set content = bos_token + content %}{% endif %}{{ content }}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|start_header_id|>assistant<|end_header_id|>\n\n' }}{% endif %}"
)
QWEN2_TEMPLATE = """{%- if messages[0]['role'] == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
{%- else %}
    {{- '<|im_start|>system\\nYou are Qwen, created by Alibaba Cloud. You are a helpful assistant.<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if (message.role == "user") or (message.role == "system" and not loop.first) or (message.role == "assistant") %}
        {{- '<|im_start|>' + message.role + '\\n' + message.content + '<|im_end|>' + '\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""

PROMPTS = [
    {"name": "capital", "text": "The capital of France is"},
    {"name": "numbers", "text": "Numbers like 1234567 and 3.14159 are split,\n\n  the purple zebra"},
    {"name": "chat", "chat": [{"role": "user", "content": "What is the tallest mountain in the world?"}]},
    {
        "name": "chat_system",
        "chat": [
            {"role": "system", "content": "You are terse."},
            {"role": "user", "content": "  Hi there!  "},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": "What is the weather like?"},
        ],
    },
]
TOKENIZER_TEXTS = [
    "Hello world",
    "  leading spaces and\ttabs\n\nnewlines   ",
    "Numbers: 1234567 and 3.14159, ٣٤ Arabic digits",
    "Unicode: café naïve 日本語 emoji 😀",
    "don't won't I'm we'll they've DON'T",
    "the purple zebra galaxy",
    "",
]


def bytes_to_unicode() -> dict[int, str]:
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return dict(zip(bs, map(chr, cs)))


def train_bpe(n_merges: int) -> tuple[list[str], list[str]]:
    b2u = bytes_to_unicode()
    words = Counter("".join(b2u[b] for b in w.encode()) for w in re.findall(r" ?\w+| ?[^\w\s]+|\s+", CORPUS))
    splits = {w: list(w) for w in words}
    vocab = [b2u[b] for b in range(256)]
    merges = []
    for _ in range(n_merges):
        pairs = Counter()
        for w, c in words.items():
            s = splits[w]
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        merges.append(f"{a} {b}")
        if a + b not in vocab:
            vocab.append(a + b)
        for w in words:
            s, out, i = splits[w], [], 0
            while i < len(s):
                if i + 1 < len(s) and s[i] == a and s[i + 1] == b:
                    out.append(a + b)
                    i += 2
                else:
                    out.append(s[i])
                    i += 1
            splits[w] = out
    return vocab, merges


def llama3_rope_factors(head_dim: int, base: float) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.generate_extra_tensors for rope_type "llama3"
    (factor 32, low 1, high 4), with an original context of 64 so that the factors reach the
    pairs a short prompt turns."""
    factor, low, high, old_ctx = 32.0, 1.0, 4.0, 64
    freqs = 1.0 / (base ** (np.arange(0, head_dim, 2, dtype=np.float32) / head_dim))
    low_wl, high_wl = old_ctx / low, old_ctx / high
    out = []
    for f in freqs:
        wl = 2 * np.pi / f
        if wl < high_wl:
            out.append(1.0)
        elif wl > low_wl:
            out.append(factor)
        else:
            smooth = (old_ctx / wl - low) / (high - low)
            out.append(1 / ((1 - smooth) / factor + smooth))
    return np.array(out, dtype=np.float32)


def permute(w: np.ndarray, n_head: int) -> np.ndarray:
    """convert_hf_to_gguf.py's LlamaModel.permute (rows of Q or K, or a bias)."""
    shape = w.shape
    return w.reshape(n_head, 2, shape[0] // n_head // 2, *shape[1:]).swapaxes(1, 2).reshape(shape)


SPEC = {
    "llama3": dict(arch="llama", hidden=256, heads=4, kv=1, ffn=512, layers=2, base=500000.0, eps=1e-5,
                   pre="llama-bpe", bias=False, tied=True, factors=True, ftype="Q4_K_M",
                   specials=["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>", "<|end_header_id|>",
                             "<|eot_id|>"], bos="<|begin_of_text|>", eos="<|eot_id|>", add_bos=True,
                   template=LLAMA3_TEMPLATE, seed=1),
    "llama3_untied": dict(arch="llama", hidden=256, heads=4, kv=1, ffn=512, layers=2, base=500000.0, eps=1e-5,
                          pre="llama-bpe", bias=False, tied=False, factors=True, ftype="Q4_0",
                          specials=["<|begin_of_text|>", "<|end_of_text|>", "<|start_header_id|>",
                                    "<|end_header_id|>", "<|eot_id|>"], bos="<|begin_of_text|>", eos="<|eot_id|>",
                          add_bos=True, template=LLAMA3_TEMPLATE, seed=2),
    "qwen2": dict(arch="qwen2", hidden=448, heads=7, kv=1, ffn=512, layers=2, base=1000000.0, eps=1e-6,
                  pre="qwen2", bias=True, tied=True, factors=False, ftype="Q4_K_M",
                  specials=["<|endoftext|>", "<|im_start|>", "<|im_end|>"], bos="<|endoftext|>",
                  eos="<|im_end|>", add_bos=False, template=QWEN2_TEMPLATE, seed=3),
}
FTYPES = {"Q4_K_M": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M, "Q4_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0}


def write_f32(name: str, s: dict, vocab: list[str], merges: list[str]) -> Path:
    rng = np.random.default_rng(s["seed"])
    d, hd = s["hidden"], s["hidden"] // s["heads"]
    tokens = vocab + ORPHANS + s["specials"]
    assert len(set(tokens)) == len(tokens)
    types = [1] * (len(vocab) + len(ORPHANS)) + [3] * len(s["specials"])
    path = HERE / f"{name}.f32.gguf"
    w = gguf.GGUFWriter(str(path), s["arch"])
    w.add_name(name)
    w.add_context_length(512)
    w.add_embedding_length(d)
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(s["ffn"])
    w.add_head_count(s["heads"])
    w.add_head_count_kv(s["kv"])
    w.add_rope_dimension_count(hd)
    w.add_rope_freq_base(s["base"])
    w.add_layer_norm_rms_eps(s["eps"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre(s["pre"])
    w.add_token_list(tokens)
    w.add_token_types(types)
    w.add_token_merges(merges)
    w.add_bos_token_id(tokens.index(s["bos"]))
    w.add_eos_token_id(tokens.index(s["eos"]))
    w.add_add_bos_token(s["add_bos"])
    w.add_chat_template(s["template"])

    def t(n, shape, scale):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    nv = len(tokens)
    # Logits spread like a trained model's (a few units between the top tokens), so that
    # greedy steps are not near-ties everywhere.
    w.add_tensor("token_embd.weight", t(0, (nv, d), 0.3 if s["tied"] else 1.0))
    w.add_tensor("output_norm.weight", 1 + t(0, (d,), 0.1))
    if not s["tied"]:
        w.add_tensor("output.weight", t(0, (nv, d), 5.0 / np.sqrt(d)))
    if s["factors"]:
        w.add_tensor("rope_freqs.weight", llama3_rope_factors(hd, s["base"]))
    kvw = s["kv"] * hd
    for i in range(s["layers"]):
        q, k = t(0, (d, d), 1.5 / np.sqrt(d)), t(0, (kvw, d), 1.5 / np.sqrt(d))
        if s["arch"] == "llama":
            q, k = permute(q, s["heads"]), permute(k, s["kv"])
        w.add_tensor(f"blk.{i}.attn_norm.weight", 1 + t(0, (d,), 0.1))
        w.add_tensor(f"blk.{i}.attn_q.weight", q)
        w.add_tensor(f"blk.{i}.attn_k.weight", k)
        w.add_tensor(f"blk.{i}.attn_v.weight", t(0, (kvw, d), 1 / np.sqrt(d)))
        if s["bias"]:
            w.add_tensor(f"blk.{i}.attn_q.bias", t(0, (d,), 0.5))
            w.add_tensor(f"blk.{i}.attn_k.bias", t(0, (kvw,), 0.5))
            w.add_tensor(f"blk.{i}.attn_v.bias", t(0, (kvw,), 0.5))
        w.add_tensor(f"blk.{i}.attn_output.weight", t(0, (d, d), 1 / np.sqrt(d)))
        w.add_tensor(f"blk.{i}.ffn_norm.weight", 1 + t(0, (d,), 0.1))
        w.add_tensor(f"blk.{i}.ffn_gate.weight", t(0, (s["ffn"], d), 1 / np.sqrt(d)))
        w.add_tensor(f"blk.{i}.ffn_up.weight", t(0, (s["ffn"], d), 1 / np.sqrt(d)))
        w.add_tensor(f"blk.{i}.ffn_down.weight", t(0, (d, s["ffn"]), 1 / np.sqrt(s["ffn"])))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def quantize(src: Path, dst: Path, ftype: str) -> None:
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FTYPES[ftype]
    params.nthread = 2
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), params)
    assert rc == 0, f"llama_model_quantize: {rc}"


def f64_forward(path: Path, ids: list[int], rope_factors: bool = True, every_position: bool = False) -> np.ndarray:
    """The logits after `ids` (with `every_position`, after each prefix: [L, vocab]), in float64,
    from the (quantized) file's weights dequantized, as llama.cpp's llm_build_llama /
    llm_build_qwen2 compute them."""
    r = gguf.GGUFReader(str(path))
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()

    def kv(k):
        return r.fields[f"{arch}.{k}"].parts[-1][0]

    W = {}
    for t in r.tensors:
        a = dequantize(t.data, t.tensor_type).astype(np.float64)
        W[t.name] = a.reshape([int(x) for x in reversed(t.shape)])
    d, nh, nkv, nl = int(kv("embedding_length")), int(kv("attention.head_count")), int(
        kv("attention.head_count_kv")), int(kv("block_count"))
    eps, base = float(kv("attention.layer_norm_rms_epsilon")), float(kv("rope.freq_base"))
    hd = d // nh
    ff = W.get("rope_freqs.weight", np.ones(hd // 2)) if rope_factors else np.ones(hd // 2)
    pos = np.arange(len(ids))[:, None]
    theta = pos * base ** (-np.arange(0, hd, 2) / hd) / ff  # [L, hd/2]
    cos, sin = np.cos(theta), np.sin(theta)

    def rope(x):  # [L, H, hd]
        if arch == "llama":  # normal: adjacent pairs (2i, 2i+1)
            x0, x1 = x[..., 0::2], x[..., 1::2]
            y = np.empty_like(x)
            y[..., 0::2] = x0 * cos[:, None] - x1 * sin[:, None]
            y[..., 1::2] = x1 * cos[:, None] + x0 * sin[:, None]
            return y
        h = hd // 2  # neox: halves
        x0, x1 = x[..., :h], x[..., h:]
        return np.concatenate([x0 * cos[:, None] - x1 * sin[:, None], x1 * cos[:, None] + x0 * sin[:, None]], -1)

    def norm(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g

    L = len(ids)
    h = W["token_embd.weight"][ids]
    mask = np.triu(np.full((L, L), -np.inf), 1)
    for i in range(nl):
        p = f"blk.{i}."
        x = norm(h, W[p + "attn_norm.weight"])
        q, k, v = (x @ W[p + f"attn_{n}.weight"].T + W.get(p + f"attn_{n}.bias", 0) for n in "qkv")
        q, k, v = q.reshape(L, nh, hd), k.reshape(L, nkv, hd), v.reshape(L, nkv, hd)
        q, k = rope(q), rope(k)
        g = nh // nkv
        att = np.einsum("lhd,mhd->hlm", q, np.repeat(k, g, axis=1)) / np.sqrt(hd) + mask
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        o = np.einsum("hlm,mhd->lhd", att, np.repeat(v, g, axis=1)).reshape(L, d)
        h = h + o @ W[p + "attn_output.weight"].T
        x = norm(h, W[p + "ffn_norm.weight"])
        gt, up = x @ W[p + "ffn_gate.weight"].T, x @ W[p + "ffn_up.weight"].T
        h = h + (gt / (1 + np.exp(-gt)) * up) @ W[p + "ffn_down.weight"].T
    out = W.get("output.weight", W["token_embd.weight"])
    return norm(h if every_position else h[-1], W["output_norm.weight"]) @ out.T


def llama_cpp_run(llm, text: str, add_bos: bool) -> tuple[list[int], np.ndarray, list[int], list[float]]:
    """llama.cpp on `text`: its ids (special tokens parsed, BOS as the file says, a doubled BOS
    dropped: a chat template that writes BOS itself, tokenized as llama.cpp's server does), its
    logits after them, and a greedy continuation of STEPS tokens with its top-1 minus top-2
    margins. Shared by this script and its siblings."""
    ids = llm.tokenize(text.encode(), add_bos=add_bos, special=True)
    if len(ids) >= 2 and ids[0] == ids[1] == llm.token_bos():
        ids = ids[1:]
    llm.reset()
    llm.eval(ids)
    logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
    greedy, margins, step = [], [], logits
    for _ in range(STEPS):
        order = np.argsort(-step, kind="stable")
        greedy.append(int(order[0]))
        margins.append(float(step[order[0]] - step[order[1]]))
        llm.eval([greedy[-1]])
        step = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float64)
    return ids, logits, greedy, margins


def render(template: str, messages: list[dict], bos: str, eos: str) -> str:
    # transformers' (and llama-cpp-python's) environment for chat templates.
    env = jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
    return env.from_string(template).render(messages=messages, add_generation_prompt=True, bos_token=bos,
                                            eos_token=eos)


def main() -> None:
    HERE.mkdir(exist_ok=True)
    vocab, merges = train_bpe(300)
    out = {"llama_cpp_python": version("llama-cpp-python"), "gguf": version("gguf"), "models": {}}
    for name, s in SPEC.items():
        f32 = write_f32(name, s, vocab, merges)
        path = HERE / f"{name}.{s['ftype']}.gguf"
        quantize(f32, path, s["ftype"])
        f32.unlink()
        llm = llama_cpp.Llama(model_path=str(path), n_ctx=256, n_threads=2, n_batch=256, logits_all=True,
                              verbose=False)
        prompts = []
        for p in PROMPTS:
            text = render(s["template"], p["chat"], s["bos"], s["eos"]) if "chat" in p else p["text"]
            ids, logits, greedy, margins = llama_cpp_run(llm, text, s["add_bos"])
            ref = f64_forward(path, ids)
            prompts.append({
                "name": p["name"], "chat": p.get("chat"), "text": text, "ids": ids,
                "logits_llama_cpp": [float(x) for x in logits.astype(np.float32)],
                "logits_f64": [float(x) for x in ref],
                "llama_cpp_vs_f64": float(np.abs(logits - ref).max()),
                # How far the logits move without the RoPE frequency factors (the test's
                # tolerance must be below it for the factors to be checked at all).
                "f64_without_rope_factors": float(np.abs(f64_forward(path, ids, False) - ref).max()),
                "greedy": greedy, "greedy_margins": margins,
            })
            print(name, p["name"], len(ids), "tokens; llama.cpp vs f64", prompts[-1]["llama_cpp_vs_f64"],
                  "min margin", min(margins))
        out["models"][name] = {
            "file": path.name,
            "ftype": s["ftype"],
            "prompts": prompts,
            "tokenizer": [{"text": t, "ids": llm.tokenize(t.encode(), add_bos=s["add_bos"], special=True)}
                          for t in TOKENIZER_TEXTS],
        }
        del llm
    (HERE / "reference.json").write_text(json.dumps(out, ensure_ascii=False) + "\n")
    print("wrote", HERE / "reference.json")


if __name__ == "__main__":
    main()
