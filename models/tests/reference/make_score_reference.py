"""Per-token log-probabilities of the small GGUF decoders in arch/ (made by
make_arch_reference.py), from its exact float64 pass: the reference for `CausalLM::score` /
Python's `CausalLM.score` (models/tests/arch_models.rs, tests/python/test_models_score.py).

For each file and prompt of arch/reference.json: log p(ids[i] | ids[:i]) for i >= 1 (log-softmax
of the float64 logits after each prefix, computed in float64), written to arch/scores.json.

Usage: python make_score_reference.py   (needs gguf, numpy, jinja2 and llama-cpp-python, as
make_arch_reference.py imports them)
"""

import json

import numpy as np
from make_arch_reference import HERE, f64_forward


def main() -> None:
    ref = json.loads((HERE / "reference.json").read_text())
    out = {}
    for name, m in ref["models"].items():
        rows = []
        for p in m["prompts"]:
            ids = p["ids"]
            logits = f64_forward(HERE / m["file"], ids, every_position=True)  # [L, vocab]
            top = logits.max(-1, keepdims=True)
            logp = logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))
            scores = [float(logp[i - 1, ids[i]]) for i in range(1, len(ids))]
            # The last row is the one reference.json holds: the two passes must agree.
            assert np.abs(logits[-1] - np.array(p["logits_f64"])).max() < 1e-9
            rows.append({"name": p["name"], "ids": ids, "logprobs_f64": scores})
            print(name, p["name"], len(ids), "tokens; mean log-prob", np.mean(scores))
        out[name] = rows
    (HERE / "scores.json").write_text(json.dumps(out) + "\n")
    print("wrote", HERE / "scores.json")


if __name__ == "__main__":
    main()
