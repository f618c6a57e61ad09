"""Small Gemma 2 and Gemma 3 (text) GGUFs and llama.cpp's view of them, for Kiln's tests
(models/tests/arch_models.rs): written to arch/ beside this script, by the method of
make_arch_reference.py and with make_spm_arch_reference.py's SentencePiece vocabulary, Gemma
specials, chat template and prompts (read those first).

Each file is written from scratch with the `gguf` package in the structure llama.cpp's
converter writes for the real model (norms stored with Gemma's +1 already added), dimensions
reduced, and quantized by llama.cpp to Q4_K_M:
  - gemma2: Gemma-2-2B's layout: heads narrower than hidden / heads (4 heads of 48 over 256, as
    8 heads of 256 over 2304), 2 KV heads, post-attention and post-feed-forward RMSNorms, GeGLU,
    embeddings scaled by sqrt(hidden), tied output, NEOX RoPE, attention logit soft-capping 50
    and final logit soft-capping 30 (the real values; weights scaled so that both bite), and
    sliding-window attention on every other layer (layer 0 local, 1 global: llama.cpp's default
    pattern of 2) with a window of 6 keys (4096 in the real model: this file's window makes it
    matter within these prompts); 2 layers, feed-forward 512.
  - gemma3: Gemma-3's layout: QK-norm (`attn_q_norm` / `attn_k_norm`, RMSNorm per head before
    RoPE), post-norms, no soft-capping, local layers with RoPE base 10000 (llama.cpp's default
    for `rope.freq_base_swa`) and global ones with `rope.freq_base` 1e6 and the 4B+ models'
    linear RoPE scaling (factor 8, global layers only, as llama.cpp applies it), a sliding
    window of 5 keys, written with `attention.sliding_window_pattern` 3 (layers 0, 1 local, 2
    global; the real models' 6 is llama.cpp's default without the key); 2 heads of 128 over
    256 (as 1B's 4 of 256 over 1152), 1 KV head; 3 layers, feed-forward 512.
Query scaling is llama.cpp's rule: head_dim^-1/2 (hidden / heads for the 27B models, told by
their layer count; these files are not). llama.cpp ignores `query_pre_attn_scalar` (the
converter does not write it).

For each file and prompt: llama.cpp's ids, logits and greedy continuation with margins
(make_arch_reference.llama_cpp_run), the exact float64 pass (llama.cpp's semantics:
llama_model_gemma2 / llama_model_gemma3's graphs) and llama.cpp's distance from it, and how far
the float64 logits move without each of soft-capping (attention, final) and the sliding window
(the test's tolerance must be below these for them to be checked at all), into
arch/gemma23_reference.json, with tokenizer cases as make_spm_arch_reference.py writes them.

Usage: python make_gemma23_reference.py   (needs gguf, numpy, jinja2 and llama-cpp-python)
"""

import json
from importlib.metadata import version

import gguf
import llama_cpp
import numpy as np
from gguf.quants import dequantize
from make_arch_reference import HERE, llama_cpp_run, render
from make_spm_arch_reference import (
    GEMMA_TEMPLATE,
    PROMPTS,
    SPEC,
    SPECIAL_TEXTS,
    TOKENIZER_TEXTS,
    quantize,
    train_spm,
    vocabulary,
)

GEMMA = {k: SPEC["gemma"][k] for k in ("head", "tail", "bos", "eos", "add_bos", "space_prefix")}
MODELS = {
    "gemma2": dict(GEMMA, arch="gemma2", name="gemma-2-2b-it", hidden=256, heads=4, kv=2, head_dim=48, ffn=512,
                   layers=2, base=10000.0, eps=1e-6, window=6, attn_cap=50.0, final_cap=30.0, qk_gain=5.0,
                   embd=0.2, gain=3.0, seed=21),
    "gemma3": dict(GEMMA, arch="gemma3", name="gemma-3-4b-it", hidden=256, heads=2, kv=1, head_dim=128, ffn=512,
                   layers=3, base=1e6, eps=1e-6, window=5, pattern=3, rope_linear=8.0, qk_gain=1.5, embd=0.1,
                   gain=3.0, seed=22),
}


def write_f32(name: str, s: dict, tokens: list[str], scores: list[float], types: list[int]):
    rng = np.random.default_rng(s["seed"])
    d, hd, nh, nkv, ff = s["hidden"], s["head_dim"], s["heads"], s["kv"], s["ffn"]
    path = HERE / f"{name}.f32.gguf"
    w = gguf.GGUFWriter(str(path), s["arch"])
    w.add_name(s["name"])
    w.add_context_length(512)
    w.add_embedding_length(d)
    w.add_block_count(s["layers"])
    w.add_feed_forward_length(ff)
    w.add_head_count(nh)
    w.add_head_count_kv(nkv)
    w.add_key_length(hd)
    w.add_value_length(hd)
    w.add_rope_freq_base(s["base"])
    w.add_layer_norm_rms_eps(s["eps"])
    w.add_sliding_window(s["window"])
    if "pattern" in s:
        w.add_sliding_window_pattern(s["pattern"])
    if "attn_cap" in s:
        w.add_attn_logit_softcapping(s["attn_cap"])
        w.add_final_logit_softcapping(s["final_cap"])
    if "rope_linear" in s:
        w.add_rope_scaling_type(gguf.RopeScalingType.LINEAR)
        w.add_rope_scaling_factor(s["rope_linear"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(tokens.index(s["bos"]))
    w.add_eos_token_id(tokens.index(s["eos"]))
    w.add_unk_token_id(tokens.index("<unk>"))
    w.add_add_bos_token(s["add_bos"])
    w.add_add_eos_token(False)
    w.add_add_space_prefix(s["space_prefix"])
    w.add_chat_template(GEMMA_TEMPLATE)

    def t(shape, scale):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    def g(n):  # a norm's weight as the converter stores it: Gemma's 1 + w
        return 1 + t((n,), 0.1)

    nv, qw, kvw = len(tokens), nh * hd, nkv * hd
    w.add_tensor("token_embd.weight", t((nv, d), s["embd"]))
    w.add_tensor("output_norm.weight", g(d))
    for i in range(s["layers"]):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", g(d))
        # Q and K large enough that scores pass the soft-cap.
        w.add_tensor(p + "attn_q.weight", t((qw, d), s["qk_gain"] / np.sqrt(d)))
        w.add_tensor(p + "attn_k.weight", t((kvw, d), s["qk_gain"] / np.sqrt(d)))
        w.add_tensor(p + "attn_v.weight", t((kvw, d), 1 / np.sqrt(d)))
        if s["arch"] == "gemma3":
            w.add_tensor(p + "attn_q_norm.weight", g(hd))
            w.add_tensor(p + "attn_k_norm.weight", g(hd))
        w.add_tensor(p + "attn_output.weight", t((d, qw), s["gain"] / np.sqrt(qw)))
        w.add_tensor(p + "post_attention_norm.weight", g(d))
        w.add_tensor(p + "ffn_norm.weight", g(d))
        w.add_tensor(p + "ffn_gate.weight", t((ff, d), 1 / np.sqrt(d)))
        w.add_tensor(p + "ffn_up.weight", t((ff, d), 1 / np.sqrt(d)))
        w.add_tensor(p + "ffn_down.weight", t((d, ff), s["gain"] / np.sqrt(ff)))
        w.add_tensor(p + "post_ffw_norm.weight", g(d))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def f64_forward(path, ids: list[int], every_position=False, attn_cap=True, final_cap=True, window=True,
                stats=None) -> np.ndarray:
    """The logits after `ids` in float64 from the quantized file's weights (dequantized by
    gguf-py), as llama.cpp's gemma2 / gemma3 graphs compute them; the flags turn soft-capping and
    the window off (to measure what they change). `stats` collects the largest |score| per layer."""
    r = gguf.GGUFReader(str(path))
    arch = bytes(r.fields["general.architecture"].parts[-1]).decode()

    def kv(k, default=None):
        f = r.fields.get(f"{arch}.{k}")
        return default if f is None else f.parts[-1][0]

    W = {}
    for t in r.tensors:
        a = dequantize(t.data, t.tensor_type).astype(np.float64)
        W[t.name] = a.reshape([int(x) for x in reversed(t.shape)])
    d, nh, nkv, nl = (int(kv(k)) for k in ("embedding_length", "attention.head_count", "attention.head_count_kv",
                                            "block_count"))
    eps, hd = float(kv("attention.layer_norm_rms_epsilon")), int(kv("attention.key_length"))
    base = float(kv("rope.freq_base", 10000.0))
    n_swa = int(kv("attention.sliding_window", 4096 if arch == "gemma2" else 0))
    pattern = int(kv("attention.sliding_window_pattern", 2 if arch == "gemma2" else 6))
    is_swa = [n_swa > 0 and (i % pattern < pattern - 1) for i in range(nl)]
    linear = float(kv("rope.scaling.factor", 1.0) or 1.0)
    # llama.cpp: local layers take rope.freq_base_swa (Gemma 2: the global base; Gemma 3:
    # 10000) and Gemma 3's no scaling; global layers the file's base and scaling.
    base_swa = float(kv("rope.freq_base_swa", base if arch == "gemma2" else 10000.0))
    scale_swa = 1.0 / linear if arch == "gemma2" else 1.0
    attn_cap_v = float(kv("attn_logit_softcapping", 50.0)) if arch == "gemma2" else None
    final_cap_v = kv("final_logit_softcapping", 30.0 if arch == "gemma2" else None)
    final_cap_v = float(final_cap_v) if final_cap_v else None
    q_scale = 1 / np.sqrt(d // nh if nl == {"gemma2": 46, "gemma3": 62}[arch] else hd)
    L = len(ids)
    pos = np.arange(L)[:, None]

    def rope(x, b, sc):  # neox: halves; llama.cpp's freq_scale multiplies the position
        theta = pos * sc * b ** (-np.arange(0, hd, 2) / hd)
        cos, sin = np.cos(theta)[:, None], np.sin(theta)[:, None]
        h = hd // 2
        x0, x1 = x[..., :h], x[..., h:]
        return np.concatenate([x0 * cos - x1 * sin, x1 * cos + x0 * sin], -1)

    def norm(x, g):
        return x / np.sqrt((x * x).mean(-1, keepdims=True) + eps) * g

    def gelu_tanh(x):
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))

    h = W["token_embd.weight"][ids] * np.sqrt(d)
    qi, kj = np.arange(L)[:, None], np.arange(L)[None, :]
    for i in range(nl):
        p = f"blk.{i}."
        x = norm(h, W[p + "attn_norm.weight"])
        q, k, v = (x @ W[p + f"attn_{n}.weight"].T for n in "qkv")
        q, k, v = q.reshape(L, nh, hd), k.reshape(L, nkv, hd), v.reshape(L, nkv, hd)
        if arch == "gemma3":
            q, k = norm(q, W[p + "attn_q_norm.weight"]), norm(k, W[p + "attn_k_norm.weight"])
        b, sc = (base_swa, scale_swa) if is_swa[i] else (base, 1.0 / linear)
        q, k = rope(q, b, sc) * q_scale, rope(k, b, sc)
        g = nh // nkv
        s = np.einsum("lhd,mhd->hlm", q, np.repeat(k, g, axis=1))
        if stats is not None:
            stats.append(float(np.abs(np.where(kj <= qi, s, 0)).max()))
        if attn_cap_v and attn_cap:
            s = attn_cap_v * np.tanh(s / attn_cap_v)
        masked = kj > qi
        if is_swa[i] and window:
            masked |= qi - kj >= n_swa  # llama.cpp's LLAMA_SWA_TYPE_STANDARD
        s = np.where(masked, -np.inf, s)
        att = np.exp(s - s.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        o = np.einsum("hlm,mhd->lhd", att, np.repeat(v, g, axis=1)).reshape(L, nh * hd)
        h = h + norm(o @ W[p + "attn_output.weight"].T, W[p + "post_attention_norm.weight"])
        x = norm(h, W[p + "ffn_norm.weight"])
        act = gelu_tanh(x @ W[p + "ffn_gate.weight"].T) * (x @ W[p + "ffn_up.weight"].T)
        h = h + norm(act @ W[p + "ffn_down.weight"].T, W[p + "post_ffw_norm.weight"])
    out = W.get("output.weight", W["token_embd.weight"])
    logits = norm(h if every_position else h[-1], W["output_norm.weight"]) @ out.T
    if final_cap_v and final_cap:
        logits = final_cap_v * np.tanh(logits / final_cap_v)
    return logits


def main() -> None:
    HERE.mkdir(exist_ok=True)
    pieces, scores = train_spm(300)
    out = {"llama_cpp_python": version("llama-cpp-python"), "gguf": version("gguf"), "models": {}}
    for name, s in MODELS.items():
        tokens, sc, types = vocabulary(s, pieces, scores)
        f32 = write_f32(name, s, tokens, sc, types)
        path = HERE / f"{name}.Q4_K_M.gguf"
        quantize(f32, path, "Q4_K_M")
        f32.unlink()
        llm = llama_cpp.Llama(model_path=str(path), n_ctx=256, n_threads=2, n_batch=256, logits_all=True,
                              verbose=False)
        prompts = []
        for p in PROMPTS:
            text = render(GEMMA_TEMPLATE, p["chat"], s["bos"], s["eos"]) if "chat" in p else p["text"]
            ids, logits, greedy, margins = llama_cpp_run(llm, text, s["add_bos"])
            stats = []
            ref = f64_forward(path, ids, stats=stats)
            moved = {f"f64_without_{k}": float(np.abs(f64_forward(path, ids, **{k: False}) - ref).max())
                     for k in ("attn_cap", "final_cap", "window")}
            prompts.append({
                "name": p["name"], "chat": p.get("chat"), "text": text, "ids": ids,
                "logits_f64": [float(f"{x:.9g}") for x in ref],
                "llama_cpp_vs_f64": float(np.abs(logits - ref).max()),
                **moved,
                "max_abs_score": max(stats), "max_abs_logit": float(np.abs(ref).max()),
                "greedy": greedy, "greedy_margins": margins,
            })
            print(name, p["name"], len(ids), "tokens; llama.cpp vs f64", prompts[-1]["llama_cpp_vs_f64"],
                  "min margin", min(margins), moved, "max |score|", max(stats), "max |logit|",
                  prompts[-1]["max_abs_logit"])
        cases = []
        for t in TOKENIZER_TEXTS + SPECIAL_TEXTS["gemma"]:
            ids = llm.tokenize(t.encode(), add_bos=s["add_bos"], special=True)
            cases.append({"text": t, "ids": ids, "pieces": [list(llm.detokenize([i])) for i in ids]})
        out["models"][name] = {"file": path.name, "ftype": "Q4_K_M", "prompts": prompts, "tokenizer": cases}
        del llm
    (HERE / "gemma23_reference.json").write_text(json.dumps(out, ensure_ascii=False) + "\n")
    print("wrote", HERE / "gemma23_reference.json")


if __name__ == "__main__":
    main()
