"""Small Phi-3 and Gemma GGUFs with SentencePiece ("llama") vocabularies, and llama.cpp's view of
them, for Kiln's tests (models/tests/arch_models.rs): written to arch/ beside this script, as
make_arch_reference.py does for the byte-level BPE architectures (read it first: the same
method, the same prompts' shape, its quantizer and chat rendering are reused).

Nothing can be downloaded, so each file is made from scratch with the `gguf` package in the
structure llama.cpp's converter writes for the real model, dimensions reduced:
  - phi3: Phi-3-mini's layout (fused `attn_qkv` = Q, K, V rows; fused `ffn_up` = gate then up
    halves; no grouped-query attention; head_dim 96; NEOX RoPE, no permutation; untied output;
    `sliding_window` written as the converter writes it and ignored, as llama.cpp ignores it;
    general.name "Phi-3-mini-4k-instruct", which makes llama.cpp strip whitespace after its
    special tokens), 2 layers of 192 (2 heads), feed-forward 128, llama.cpp's Q4_0 (a Q8_0
    output: rows of 192 are not K-blocks);
  - gemma: Gemma's layout (head_dim from `attention.key_length`, 96 here against
    hidden / heads = 128, as Gemma-7B's 256 against 192; 1 KV head as Gemma-2B; embeddings
    scaled by sqrt(hidden); GeGLU with tanh-GELU; norms stored with the +1 added by the
    converter; tied output; NEOX RoPE; add_space_prefix false, BOS added), 2 layers of 256,
    feed-forward 128, llama.cpp's Q4_K_M (a mixed file: rows of 192 and 128 are not K-blocks).
The vocabulary is a SentencePiece one built here: <unk>/<s>/</s> (Gemma: <pad>/<eos>/<bos>/<unk>),
the 256 byte tokens <0x00>..<0xFF>, the corpus' characters and pieces made by pairwise merges of
`▁`-escaped words, scored by merge order with pairs of equal scores (llama.cpp's left-first tie
rule is exercised), a piece no merge reaches, each model's control tokens, and for Gemma a
user-defined token and an unused one. Characters outside the corpus (é, 日, 😀) fall back to bytes.
  - llama2: Llama 2's layout (Q/K rows permuted as the converter permutes them, adjacent-pair
    RoPE), 2 layers of 128, Q4_0, and no BOS/EOS/add_bos keys: llama.cpp's SentencePiece
    defaults apply (BOS 1 added, EOS 2, a space in front).
The chat templates are the real models' (Phi-3-mini-4k-instruct's, gemma-7b-it's,
Llama-2-7b-chat-hf's).

For each file: llama.cpp's token ids, logits after each prompt, a greedy continuation with its
margins, the exact float64 pass (llama.cpp's semantics: build_phi3 / build_gemma) and
llama.cpp's distance from it, tokenizer-only cases with llama.cpp's pieces, into
arch/spm_reference.json.

Usage: python make_spm_arch_reference.py   (needs gguf, numpy, jinja2 and llama-cpp-python)
"""

import json
import re
from collections import Counter
from importlib.metadata import version

import gguf
import llama_cpp
import numpy as np
from gguf.quants import dequantize
from make_arch_reference import CORPUS, HERE, llama_cpp_run, permute, render

PHI3_TEMPLATE = (
    "{% for message in messages %}{% if message['role'] == 'system' %}"
    "{{'<|system|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'user' %}"
    "{{'<|user|>\n' + message['content'] + '<|end|>\n'}}{% elif message['role'] == 'assistant' %}"
    "{{'<|assistant|>\n' + message['content'] + '<|end|>\n'}}{% endif %}{% endfor %}"
    "{% if add_generation_prompt %}{{ '<|assistant|>\n' }}{% else %}{{ eos_token }}{% endif %}"
)
LLAMA2_TEMPLATE = (
    "{% if messages[0]['role'] == 'system' %}{% set loop_messages = messages[1:] %}"
    "{% set system_message = messages[0]['content'] %}{% else %}{% set loop_messages = messages %}"
    "{% set system_message = false %}{% endif %}{% for message in loop_messages %}"
    "{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if loop.index0 == 0 and system_message != false %}"
    "{% set content = '<<SYS>>\\n' + system_message + '\\n<</SYS>>\\n\\n' + message['content'] %}"
    "{% else %}{% set content = message['content'] %}{% endif %}{% if message['role'] == 'user' %}"
    "{{ bos_token + '[INST] ' + content.strip() + ' [/INST]' }}{% elif message['role'] == 'assistant' %}"
    "{{ ' '  + content.strip() + ' ' + eos_token }}{% endif %}{% endfor %}"
)
GEMMA_TEMPLATE = (
    "{{ bos_token }}{% if messages[0]['role'] == 'system' %}{{ raise_exception('System role not supported') }}"
    "{% endif %}{% for message in messages %}{% if (message['role'] == 'user') != (loop.index0 % 2 == 0) %}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}{% endif %}"
    "{% if (message['role'] == 'assistant') %}{% set role = 'model' %}{% else %}{% set role = message['role'] %}"
    "{% endif %}{{ '<start_of_turn>' + role + '\n' + message['content'] | trim + '<end_of_turn>\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{'<start_of_turn>model\n'}}{% endif %}"
)

PROMPTS = [
    {"name": "capital", "text": "The capital of France is"},
    {"name": "spaces", "text": "  Once upon a time,\n\n  the cat café 😀"},
    {"name": "chat", "chat": [{"role": "user", "content": "What is the tallest mountain in the world?"}]},
    {
        "name": "chat_turns",
        "chat": [
            {"role": "user", "content": "  Hi there!  "},
            {"role": "assistant", "content": "Hello."},
            {"role": "user", "content": "What is the weather like?"},
        ],
    },
]
TOKENIZER_TEXTS = [
    "Hello world",
    " Hello world",
    "  leading spaces and\ttabs\n\nnewlines   ",
    "Unicode: café naïve 日本語 emoji 😀",
    "the fisherman galaxy",
    "\n",
    "",
    "<s>x</s> <unk>",
]
SPECIAL_TEXTS = {
    "phi3": ["<|user|>\n  Hi<|end|>\n<|assistant|>", "a<|endoftext|> b </s>  c"],
    "gemma": ["<start_of_turn>user\n Hi<end_of_turn>", "<h1>Title</h1> <unused0>", "<bos><eos>"],
    "llama2": ["[INST] Hi [/INST] Hello </s><s>[INST] x"],
}

PHI3_SPECIALS = ["<|endoftext|>", "<|assistant|>", "<|system|>", "<|end|>", "<|user|>"]
SPEC = {
    "phi3": dict(arch="phi3", name="Phi-3-mini-4k-instruct", hidden=192, heads=2, kv=2, head_dim=96, ffn=128,
                 layers=2, base=10000.0, eps=1e-5, tied=False, out_mix=20.0, gain=1.0, ftype="Q4_0", seed=11,
                 head=[("<unk>", 2), ("<s>", 3), ("</s>", 3)], tail=[(t, 3) for t in PHI3_SPECIALS],
                 bos="<s>", eos="<|endoftext|>", add_bos=False, space_prefix=None, template=PHI3_TEMPLATE),
    "gemma": dict(arch="gemma", name="gemma-7b-it", hidden=256, heads=2, kv=1, head_dim=96, ffn=128, layers=2,
                  base=10000.0, eps=1e-6, tied=True, gain=40.0, ftype="Q4_K_M", seed=12,
                  head=[("<pad>", 3), ("<eos>", 3), ("<bos>", 3), ("<unk>", 2)],
                  tail=[("<start_of_turn>", 3), ("<end_of_turn>", 3), ("<h1>", 4), ("</h1>", 4), ("<unused0>", 5)],
                  bos="<bos>", eos="<eos>", add_bos=True, space_prefix=False, template=GEMMA_TEMPLATE),
    # Llama 2's layout (Q/K rows permuted by the converter for llama.cpp's adjacent-pair RoPE),
    # no BOS/EOS/add_bos keys: llama.cpp's SentencePiece defaults (BOS 1 added, EOS 2).
    "llama2": dict(arch="llama", name="Llama-2-7b-chat", hidden=128, heads=2, kv=2, head_dim=64, ffn=128, layers=2,
                   base=10000.0, eps=1e-5, tied=False, out_mix=20.0, gain=1.0, ftype="Q4_0", seed=13,
                   head=[("<unk>", 2), ("<s>", 3), ("</s>", 3)], tail=[], bos="<s>", eos="</s>", add_bos=True,
                   space_prefix=None, defaults=True, template=LLAMA2_TEMPLATE),
}
FTYPES = {"Q4_K_M": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_K_M, "Q4_0": llama_cpp.LLAMA_FTYPE_MOSTLY_Q4_0}


def train_spm(n_merges: int) -> tuple[list[str], list[float]]:
    """Pieces and scores: the corpus' characters, then pairwise merges of `▁`-escaped words, the
    score of merge i being -(i // 2) (two merges per score: ties)."""
    text = CORPUS + " The weather in Paris"
    words = Counter("▁" + w for w in re.findall(r"\S+", text))
    chars = sorted({c for w in words for c in w if ord(c) < 128 or c == "▁"})
    splits = {w: list(w) for w in words}
    pieces, scores = list(chars), [-1000.0] * len(chars)
    for i in range(n_merges):
        pairs = Counter()
        for w, c in words.items():
            s = splits[w]
            for a, b in zip(s, s[1:]):
                pairs[(a, b)] += c
        if not pairs:
            break
        (a, b), _ = max(pairs.items(), key=lambda kv: (kv[1], kv[0]))
        if a + b not in pieces:
            pieces.append(a + b)
            scores.append(-float(i // 2))
        for w in words:
            s, out, j = splits[w], [], 0
            while j < len(s):
                if j + 1 < len(s) and s[j] == a and s[j + 1] == b:
                    out.append(a + b)
                    j += 2
                else:
                    out.append(s[j])
                    j += 1
            splits[w] = out
    # A piece no merge reaches (its halves are not pieces): llama.cpp never emits it.
    pieces.append("▁galaxy")
    scores.append(10.0)
    return pieces, scores


def vocabulary(s: dict, pieces: list[str], scores: list[float]) -> tuple[list[str], list[float], list[int]]:
    tokens = [t for t, _ in s["head"]] + [f"<0x{b:02X}>" for b in range(256)] + pieces + [t for t, _ in s["tail"]]
    sc = [0.0] * len(s["head"]) + [0.0] * 256 + scores + [0.0] * len(s["tail"])
    types = [ty for _, ty in s["head"]] + [6] * 256 + [1] * len(pieces) + [ty for _, ty in s["tail"]]
    assert len(set(tokens)) == len(tokens)
    return tokens, sc, types


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
    if s["arch"] == "gemma":
        w.add_key_length(hd)
        w.add_value_length(hd)
    else:
        w.add_rope_dimension_count(hd)
        w.add_rope_freq_base(s["base"])
    if s["arch"] == "phi3":
        w.add_sliding_window(2047)
    w.add_layer_norm_rms_eps(s["eps"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    if not s.get("defaults"):
        w.add_bos_token_id(tokens.index(s["bos"]))
        w.add_eos_token_id(tokens.index(s["eos"]))
        w.add_unk_token_id(tokens.index("<unk>"))
        w.add_add_bos_token(s["add_bos"])
        w.add_add_eos_token(False)
    if s["space_prefix"] is not None:
        w.add_add_space_prefix(s["space_prefix"])
    w.add_chat_template(s["template"])

    def t(shape, scale):
        return (rng.standard_normal(shape) * scale).astype(np.float32)

    nv = len(tokens)
    qw, kvw = nh * hd, nkv * hd
    # Gemma's embeddings are scaled by sqrt(d) on the way in: smaller rows keep the tied
    # output's logits spread like a trained model's.
    embd = t((nv, d), 0.3)
    w.add_tensor("token_embd.weight", embd)
    w.add_tensor("output_norm.weight", 1 + t((d,), 0.1))
    if not s["tied"]:
        # Partly each token's embedding of a fixed other token: clearer greedy margins than
        # pure noise gives (a chain the attention still bends).
        perm = rng.permutation(nv)
        w.add_tensor("output.weight", t((nv, d), 3.0 / np.sqrt(d)) + embd[perm] * np.float32(s["out_mix"] / np.sqrt(d)))
    for i in range(s["layers"]):
        p = f"blk.{i}."
        q, k, v = t((qw, d), 1.5 / np.sqrt(d)), t((kvw, d), 1.5 / np.sqrt(d)), t((kvw, d), 1 / np.sqrt(d))
        gate, up = t((ff, d), 1 / np.sqrt(d)), t((ff, d), 1 / np.sqrt(d))
        w.add_tensor(p + "attn_norm.weight", 1 + t((d,), 0.1))
        if s["arch"] == "llama":  # convert_hf_to_gguf.py's permutation
            q, k = permute(q, nh), permute(k, nkv)
        if s["arch"] == "phi3":
            w.add_tensor(p + "attn_qkv.weight", np.concatenate([q, k, v]))
        else:
            w.add_tensor(p + "attn_q.weight", q)
            w.add_tensor(p + "attn_k.weight", k)
            w.add_tensor(p + "attn_v.weight", v)
        # Gemma's scaled embeddings dominate the residual stream unless the layers add as much.
        w.add_tensor(p + "attn_output.weight", t((d, qw), s["gain"] / np.sqrt(qw)))
        w.add_tensor(p + "ffn_norm.weight", 1 + t((d,), 0.1))
        if s["arch"] == "phi3":
            w.add_tensor(p + "ffn_up.weight", np.concatenate([gate, up]))
        else:
            w.add_tensor(p + "ffn_gate.weight", gate)
            w.add_tensor(p + "ffn_up.weight", up)
        w.add_tensor(p + "ffn_down.weight", t((d, ff), s["gain"] / np.sqrt(ff)))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return path


def quantize(src, dst, ftype: str) -> None:
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FTYPES[ftype]
    params.nthread = 2
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), params)
    assert rc == 0, f"llama_model_quantize: {rc}"


def f64_forward(path, ids: list[int], every_position: bool = False) -> np.ndarray:
    """The logits after `ids` (with `every_position`, after each prefix), in float64, from the
    quantized file's weights dequantized by gguf-py, as llama.cpp's build_phi3 / build_gemma /
    build_llama compute them."""
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
    eps, base = float(kv("attention.layer_norm_rms_epsilon")), float(kv("rope.freq_base", 10000.0))
    hd = int(kv("attention.key_length", d // nh))
    pos = np.arange(len(ids))[:, None]
    theta = pos * base ** (-np.arange(0, hd, 2) / hd)
    cos, sin = np.cos(theta), np.sin(theta)

    def rope(x):
        if arch == "llama":  # normal: adjacent pairs (2i, 2i+1), on the converter's permuted rows
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

    def gelu_tanh(x):
        return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x**3)))

    L = len(ids)
    h = W["token_embd.weight"][ids]
    if arch == "gemma":
        h = h * np.sqrt(d)
    mask = np.triu(np.full((L, L), -np.inf), 1)
    for i in range(nl):
        p = f"blk.{i}."
        x = norm(h, W[p + "attn_norm.weight"])
        if p + "attn_qkv.weight" in W:
            qkv = x @ W[p + "attn_qkv.weight"].T
            q, k, v = np.split(qkv, [nh * hd, (nh + nkv) * hd], axis=-1)
        else:
            q, k, v = (x @ W[p + f"attn_{n}.weight"].T for n in "qkv")
        q, k, v = q.reshape(L, nh, hd), k.reshape(L, nkv, hd), v.reshape(L, nkv, hd)
        q, k = rope(q), rope(k)
        g = nh // nkv
        att = np.einsum("lhd,mhd->hlm", q, np.repeat(k, g, axis=1)) / np.sqrt(hd) + mask
        att = np.exp(att - att.max(-1, keepdims=True))
        att /= att.sum(-1, keepdims=True)
        o = np.einsum("hlm,mhd->lhd", att, np.repeat(v, g, axis=1)).reshape(L, nh * hd)
        h = h + o @ W[p + "attn_output.weight"].T
        x = norm(h, W[p + "ffn_norm.weight"])
        if arch == "phi3":
            u = x @ W[p + "ffn_up.weight"].T
            n = u.shape[-1] // 2
            act = u[..., :n] / (1 + np.exp(-u[..., :n])) * u[..., n:]
        elif arch == "gemma":
            act = gelu_tanh(x @ W[p + "ffn_gate.weight"].T) * (x @ W[p + "ffn_up.weight"].T)
        else:
            gt = x @ W[p + "ffn_gate.weight"].T
            act = gt / (1 + np.exp(-gt)) * (x @ W[p + "ffn_up.weight"].T)
        h = h + act @ W[p + "ffn_down.weight"].T
    out = W.get("output.weight", W["token_embd.weight"])
    return norm(h if every_position else h[-1], W["output_norm.weight"]) @ out.T


def main() -> None:
    HERE.mkdir(exist_ok=True)
    pieces, scores = train_spm(300)
    out = {"llama_cpp_python": version("llama-cpp-python"), "gguf": version("gguf"), "models": {}}
    for name, s in SPEC.items():
        tokens, sc, types = vocabulary(s, pieces, scores)
        f32 = write_f32(name, s, tokens, sc, types)
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
            logp = f64_forward(path, ids, every_position=True)
            top = logp.max(-1, keepdims=True)
            logp = logp - top - np.log(np.exp(logp - top).sum(-1, keepdims=True))
            prompts.append({
                "name": p["name"], "chat": p.get("chat"), "text": text, "ids": ids,
                # 9 significant digits: far below the tests' 1e-3 (and Kiln's 1e-5), a smaller file.
                "logits_f64": [float(f"{x:.9g}") for x in ref],
                "llama_cpp_vs_f64": float(np.abs(logits - ref).max()),
                "greedy": greedy, "greedy_margins": margins,
                "logprobs_f64": [float(f"{logp[i - 1, ids[i]]:.9g}") for i in range(1, len(ids))],
            })
            print(name, p["name"], len(ids), "tokens; llama.cpp vs f64", prompts[-1]["llama_cpp_vs_f64"],
                  "min margin", min(margins))
        cases = []
        for t in TOKENIZER_TEXTS + SPECIAL_TEXTS[name]:
            ids = llm.tokenize(t.encode(), add_bos=s["add_bos"], special=True)
            cases.append({
                "text": t, "ids": ids,
                # Each token's bytes as llama.cpp's token_to_piece gives them (no special text).
                "pieces": [list(llm.detokenize([i])) for i in ids],
            })
        out["models"][name] = {"file": path.name, "ftype": s["ftype"], "prompts": prompts, "tokenizer": cases}
        del llm
    (HERE / "spm_reference.json").write_text(json.dumps(out, ensure_ascii=False) + "\n")
    print("wrote", HERE / "spm_reference.json")


if __name__ == "__main__":
    main()
