"""llama.cpp's view of SmolLM2-135M-Instruct (Q4_1 GGUF) for Kiln's tests, through
llama-cpp-python (CPU): written to smollm2/reference.json and smollm2/logits_<name>.npy beside
this script.

For each prompt (plain text, and chat prompts rendered with the GGUF's own Jinja chat template):
the token ids (llama.cpp's tokenizer, special tokens parsed, no BOS as the GGUF asks), the
logits after the whole prompt (all of them as f32 .npy, and the top 64 in the JSON), and a
greedy continuation of up to 40 tokens with llama.cpp's own top-1 minus top-2 logit margin at
each step (a small margin is a near-tie: another runtime may pick the other token and diverge
from there without being wrong). Also token ids of extra texts for the tokenizer alone.

Usage: python make_smollm2_reference.py FILE.gguf
(needs `pip install llama-cpp-python jinja2 numpy`; llama-cpp-python compiles llama.cpp.)
"""

import json
import sys
from importlib.metadata import version
from pathlib import Path

import jinja2
import numpy as np
from llama_cpp import Llama

HERE = Path(__file__).parent / "smollm2"
STEPS = 40

PROMPTS = [
    {"name": "capital", "text": "The capital of France is"},
    {"name": "code", "text": 'def fibonacci(n):\n    """Return the n-th Fibonacci number."""\n'},
    {"name": "story", "text": "Once upon a time, in a small village by the sea, there lived"},
    {"name": "chat_mountain", "chat": "What is the tallest mountain in the world?"},
    {"name": "chat_haiku", "chat": "Write a haiku about the ocean."},
]

TOKENIZER_TEXTS = [
    "Hello world",
    "  leading spaces and\ttabs\n\nnewlines   ",
    "Numbers: 1234567 and 3.14159, ٣٤ Arabic digits, ½ and Ⅻ",
    "Unicode: café naïve 日本語 emoji 😀👍🏽",
    "<|im_start|>user\nHi<|im_end|>\n<|endoftext|>",
    "don't won't I'm we'll they've DON'T",
    "x = [i**2 for i in range(10)]  # squares",
    "",
]


def main() -> None:
    path = sys.argv[1]
    llm = Llama(model_path=path, n_ctx=256, n_threads=2, n_batch=256, logits_all=True, verbose=False)
    template = llm.metadata["tokenizer.chat_template"]

    def tokenize(text: str) -> list[int]:
        return llm.tokenize(text.encode("utf-8"), add_bos=False, special=True)

    prompts = []
    for p in PROMPTS:
        if "chat" in p:
            text = jinja2.Template(template).render(
                messages=[{"role": "user", "content": p["chat"]}], add_generation_prompt=True
            )
        else:
            text = p["text"]
        ids = tokenize(text)
        llm.reset()
        llm.eval(ids)
        logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        np.save(HERE / f"logits_{p['name']}.npy", logits)
        top = np.argsort(-logits, kind="stable")[:64]
        greedy, margins = [], []
        step_logits = logits
        for _ in range(STEPS):
            order = np.argsort(-step_logits, kind="stable")
            t = int(order[0])
            greedy.append(t)
            margins.append(float(step_logits[order[0]] - step_logits[order[1]]))
            if t == llm.token_eos():
                break
            llm.eval([t])
            step_logits = np.array(llm.scores[llm.n_tokens - 1], dtype=np.float32)
        prompts.append(
            {
                "name": p["name"],
                "chat": p.get("chat"),
                "text": text,
                "ids": ids,
                "top64_ids": [int(i) for i in top],
                "top64_logits": [float(logits[i]) for i in top],
                "greedy": greedy,
                "greedy_margins": margins,
                "greedy_text": llm.detokenize(greedy).decode("utf-8", errors="replace"),
            }
        )
        print(p["name"], len(ids), "tokens ->", repr(prompts[-1]["greedy_text"][:60]), f"min margin {min(margins):.3f}")

    out = {
        "llama_cpp_python": version("llama-cpp-python"),
        "eos": llm.token_eos(),
        "prompts": prompts,
        "tokenizer": [{"text": t, "ids": tokenize(t)} for t in TOKENIZER_TEXTS],
    }
    (HERE / "reference.json").write_text(json.dumps(out, indent=1, ensure_ascii=False) + "\n")
    print(f"wrote {HERE / 'reference.json'}")


if __name__ == "__main__":
    main()
