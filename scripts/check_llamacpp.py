"""Check the llama.cpp build behind the ``llamacpp:`` backend: ``make llamacpp`` runs it after building.

1. The CPU library holds no AMX instruction (``tilezero``, ``tileloadd``, ``tdp*``, ``ldtilecfg``): some virtual
   machines advertise AMX tiles a process may not use, and a library with them dies of SIGILL there, so the build
   leaves them out (read with ``objdump`` when it is installed).
2. The library loads and samples: a tiny llama GGUF built here decodes a few tokens through ``llama_cpp.Llama`` and
   through the batched engine the backend uses (:mod:`shoparena.llm.llamacpp_batch`).

Prints one ``ok`` line, or ``error:`` + ``hint:`` lines and exits 1.
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from shoparena.cli.pipes import run_script

AMX = re.compile(r"\b(tilezero|tileloadd|tileloaddt1|tilestored|tilerelease|ldtilecfg|sttilecfg|tdpb[su][su]d|tdpbf16ps|"
                 r"tdpfp16ps)\b")


def amx_instructions(library: Path) -> list[str]:
    """The AMX mnemonics ``objdump -d`` finds in ``library`` (empty: none, or objdump is not installed)."""
    objdump = shutil.which("objdump")
    if objdump is None:
        return []
    text = subprocess.run([objdump, "-d", "--no-show-raw-insn", str(library)], capture_output=True, text=True,
                          check=False).stdout
    return sorted({m.group(1) for m in AMX.finditer(text)})


def main() -> int:
    try:
        import llama_cpp
    except ImportError as exc:
        print(f"error: llama-cpp-python does not import ({exc})\nhint: make llamacpp", file=sys.stderr)
        return 1
    libs = sorted(Path(llama_cpp.__file__).parent.glob("lib/libggml-cpu*.so*"))
    for lib in libs:
        found = amx_instructions(lib)
        if found:
            print(f"error: {lib.name} holds AMX instructions ({', '.join(found)}): it dies of SIGILL where AMX "
                  "is advertised but not usable\nhint: rebuild with make llamacpp (it passes -mno-amx-*)",
                  file=sys.stderr)
            return 1
    from shoparena.llm.llamacpp_batch import BatchEngine, GenerationRequest
    from shoparena.llm.tiny_gguf import build_tiny_llama_gguf

    with tempfile.TemporaryDirectory() as tmp:
        gguf, _ = build_tiny_llama_gguf(Path(tmp) / "tiny.gguf", quant="F32", layers=2)
        llm = llama_cpp.Llama(model_path=str(gguf), n_ctx=128, n_threads=1, verbose=False)
        single = []
        for token in llm.generate([1, 40, 41, 42], top_k=1, temp=0.0, reset=True):
            single.append(int(token))
            if len(single) == 8:
                break
        llm.close()
        engine = BatchEngine(gguf, n_seq=2, ctx=128, threads=1)
        try:
            batched = engine.generate(GenerationRequest(ids=[1, 40, 41, 42], max_new=8), timeout=60)
        finally:
            engine.close()
    if len(single) != 8 or len(batched) != 8:
        print(f"error: llama.cpp sampled {len(single)} / {len(batched)} of 8 tokens\nhint: rebuild with make llamacpp",
              file=sys.stderr)
        return 1
    print(f"ok: llama.cpp {getattr(llama_cpp, '__version__', '?')} loads and samples "
          f"({len(libs)} CPU librar{'y' if len(libs) == 1 else 'ies'} checked for AMX)")
    return 0


if __name__ == "__main__":
    run_script(main)
