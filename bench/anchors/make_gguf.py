"""Writes random-weight GGUFs of real models' shapes for decode/prefill benchmarks (a token's
speed depends on the shapes and block types, not the values).

  make_gguf.py smol META.pkl OUT        SmolLM2-135M-Instruct's metadata and tensor table
                                        (META from dump_meta.py on the real file), Q4_1 as it is
  make_gguf.py llama1b TYPE META.pkl OUT  Llama-3.2-1B's dimensions (16 layers, hidden 2048, 32
                                        heads, 8 KV heads, FFN 8192, vocabulary 128,256, tied
                                        embeddings), every matrix in TYPE (q4_0 or q8_0: a
                                        "pure" quantization; q4_k_m: Q4_K with Q6_K attn_v,
                                        ffn_down and the tied embedding, as llama.cpp's Q4_K_M
                                        mostly does), SmolLM2's tokenizer padded to the
                                        vocabulary (META as above)

Blocks are random bytes with a sane f16 scale (0.02) at each block's start, so activations stay
finite; norms are 1 + 0.01 N(0, 1).
"""
import pickle
import sys

import gguf
import numpy as np

VT = gguf.GGUFValueType
Q = gguf.GGMLQuantizationType
rng = np.random.default_rng(0)


def random_blocks(qt, rows, cols):
    bs, ts = gguf.GGML_QUANT_SIZES[qt]
    nblocks = rows * cols // bs
    raw = rng.integers(0, 256, size=(nblocks, ts), dtype=np.uint8)
    raw[:, 0:2] = np.full(nblocks, 0.02, dtype=np.float16).view(np.uint8).reshape(nblocks, 2)
    if qt == Q.Q4_1:  # its minimum m after d
        raw[:, 2:4] = np.full(nblocks, -0.15, dtype=np.float16).view(np.uint8).reshape(nblocks, 2)
    if qt == Q.Q4_K:  # d and dmin scale 6-bit sub-block scales and mins: |x| < 0.5
        raw[:, 0:4] = np.full((nblocks, 2), 5e-4, dtype=np.float16).view(np.uint8).reshape(nblocks, 4)
    if qt == Q.Q6_K:  # d last, scaling int8 sub-block scales: |x| < 0.8
        raw[:, 208:210] = np.full(nblocks, 2e-4, dtype=np.float16).view(np.uint8).reshape(nblocks, 2)
    return raw.reshape(rows, -1)


def add_kv(w, kv, skip=()):
    for k, kind, sub, v in kv:
        if k == "general.architecture" or k in skip:
            continue
        if kind == "str":
            w.add_key_value(k, v, VT.STRING)
        elif kind == "array":
            w.add_key_value(k, v, VT.ARRAY, sub_type=VT(sub))
        else:
            w.add_key_value(k, v, VT(sub if sub is not None else kind))


def norm(n):
    return (1.0 + 0.01 * rng.standard_normal(n)).astype(np.float32)


def smol(meta, out):
    m = pickle.load(open(meta, "rb"))
    arch = next(v for k, kind, s, v in m["kv"] if k == "general.architecture")
    w = gguf.GGUFWriter(out, arch)
    add_kv(w, m["kv"])
    for name, shape, ttype, _nbytes in m["tensors"]:
        qt = Q(ttype)
        if qt == Q.F32:
            w.add_tensor(name, norm(int(np.prod(shape))).reshape(shape[::-1]))
            continue
        raw = random_blocks(qt, int(np.prod(shape[1:])), shape[0])
        w.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=qt)
    return w


def llama1b(ty, meta, out):
    qt = {"q4_0": Q.Q4_0, "q8_0": Q.Q8_0, "q4_k_m": Q.Q4_K}[ty]
    q6 = Q.Q6_K if ty == "q4_k_m" else qt
    L, D, H, KV, F, V, HD = 16, 2048, 32, 8, 8192, 128256, 64
    m = pickle.load(open(meta, "rb"))
    w = gguf.GGUFWriter(out, "llama")
    keep = [e for e in m["kv"] if e[0].startswith("tokenizer.") and e[0] not in
            ("tokenizer.ggml.tokens", "tokenizer.ggml.token_type", "tokenizer.ggml.scores")]
    add_kv(w, keep)
    tok = dict((k, v) for k, kind, s, v in m["kv"])
    tokens = list(tok["tokenizer.ggml.tokens"])
    types = list(tok["tokenizer.ggml.token_type"])
    pad = V - len(tokens)
    w.add_token_list(tokens + [f"<|pad_{i}|>" for i in range(pad)])
    w.add_token_types(types + [4] * pad)  # user-defined: never produced by the BPE merges
    w.add_name(f"random Llama-3.2-1B-shaped {ty}")
    w.add_block_count(L)
    w.add_context_length(8192)
    w.add_embedding_length(D)
    w.add_feed_forward_length(F)
    w.add_head_count(H)
    w.add_head_count_kv(KV)
    w.add_rope_dimension_count(HD)
    w.add_rope_freq_base(500000.0)
    w.add_layer_norm_rms_eps(1e-5)
    w.add_vocab_size(V)
    w.add_file_type({"q4_0": 2, "q8_0": 7, "q4_k_m": 15}[ty])

    def mat(name, rows, cols, t=qt):
        raw = random_blocks(t, rows, cols)
        w.add_tensor(name, raw, raw_shape=raw.shape, raw_dtype=t)

    mat("token_embd.weight", V, D, q6)
    w.add_tensor("output_norm.weight", norm(D))
    for i in range(L):
        p = f"blk.{i}."
        w.add_tensor(p + "attn_norm.weight", norm(D))
        mat(p + "attn_q.weight", D, D)
        mat(p + "attn_k.weight", KV * HD, D)
        mat(p + "attn_v.weight", KV * HD, D, q6)
        mat(p + "attn_output.weight", D, D)
        w.add_tensor(p + "ffn_norm.weight", norm(D))
        mat(p + "ffn_gate.weight", F, D)
        mat(p + "ffn_up.weight", F, D)
        mat(p + "ffn_down.weight", D, F, q6)
    return w


if __name__ == "__main__":
    if sys.argv[1] == "smol":
        w = smol(sys.argv[2], sys.argv[3])
    elif sys.argv[1] == "llama1b":
        w = llama1b(sys.argv[2], sys.argv[3], sys.argv[4])
    else:
        sys.exit(__doc__)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    print("wrote", sys.argv[-1])
