"""The gguf Python package's view of SmolLM2's GGUF file, written to gguf.json beside this
script: header counts, alignment and data offset, the model's metadata, tokenizer facts (counts,
a sample of tokens and merges, the special tokens) and the whole tensor table (name, ggml type,
dims in ggml order, offset in the data section, bytes). models/tests/smollm2_gguf.rs checks the
Rust reader against it.

Usage: python dump_gguf.py FILE.gguf   (needs `pip install gguf`)
"""

import json
import sys
from pathlib import Path

import gguf


def main() -> None:
    reader = gguf.GGUFReader(sys.argv[1])
    fields = reader.fields

    def scalar(key):
        return fields[key].contents()

    def strings(key):
        f = fields[key]
        return [bytes(f.parts[i]).decode("utf-8") for i in f.data]

    tokens = strings("tokenizer.ggml.tokens")
    merges = strings("tokenizer.ggml.merges")
    token_type = [
        int(fields["tokenizer.ggml.token_type"].parts[i][0]) for i in fields["tokenizer.ggml.token_type"].data
    ]
    keys = [
        "general.architecture",
        "general.name",
        "llama.block_count",
        "llama.context_length",
        "llama.embedding_length",
        "llama.feed_forward_length",
        "llama.attention.head_count",
        "llama.attention.head_count_kv",
        "llama.rope.freq_base",
        "llama.attention.layer_norm_rms_epsilon",
        "llama.vocab_size",
        "llama.rope.dimension_count",
        "general.file_type",
        "tokenizer.ggml.model",
        "tokenizer.ggml.pre",
        "tokenizer.ggml.add_bos_token",
        "tokenizer.ggml.bos_token_id",
        "tokenizer.ggml.eos_token_id",
        "tokenizer.chat_template",
    ]
    data_offset = reader.data_offset
    out = {
        "version": int(scalar("GGUF.version")),
        "tensor_count": int(scalar("GGUF.tensor_count")),
        "kv_count": int(scalar("GGUF.kv_count")),
        "alignment": int(reader.alignment),
        "data_offset": int(data_offset),
        "keys": sorted(k for k in fields if not k.startswith("GGUF.")),
        "metadata": {k: scalar(k) for k in keys},
        "tokenizer": {
            "n_tokens": len(tokens),
            "n_merges": len(merges),
            "first_tokens": tokens[:40],
            "last_tokens": tokens[-10:],
            "first_merges": merges[:20],
            "last_merges": merges[-5:],
            "non_normal": {str(i): t for i, t in enumerate(token_type) if t != 1},
        },
        "tensors": [
            {
                "name": t.name,
                "type": t.tensor_type.name,
                "dims": [int(d) for d in t.shape],
                "offset": int(t.data_offset) - int(data_offset),
                "n_bytes": int(t.n_bytes),
            }
            for t in reader.tensors
        ],
    }
    path = Path(__file__).with_name("gguf.json")
    path.write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {path}")


if __name__ == "__main__":
    main()
