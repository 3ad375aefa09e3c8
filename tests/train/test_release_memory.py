"""Memory a finished stage freed goes back to the system before the next stage (``release_memory``), so a run of
several stages in one process does not grow by each stage's freed heap."""

from __future__ import annotations

import platform
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest

GLIBC = platform.system() == "Linux" and platform.libc_ver()[0] == "glibc"

# Freed heap that glibc keeps: one 16 MiB block freed raises its mmap threshold, so the 200 blocks of 1 MiB that
# follow come from the heap; a live block above them keeps free() from trimming the top, the way a trainer's last
# allocations sit above its freed activations.
HEAP_KEPT = textwrap.dedent("""
    import ctypes, json
    from shoparena.train.clock import rss_mib
    from shoparena.train.trainer import release_memory
    libc = ctypes.CDLL("libc.so.6")
    libc.malloc.restype = ctypes.c_void_p
    libc.free.argtypes = [ctypes.c_void_p]
    libc.memset.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_size_t]
    libc.free(libc.malloc(16 << 20))
    blocks = [libc.malloc(1 << 20) for _ in range(200)]
    for b in blocks:
        libc.memset(b, 1, 1 << 20)
    top = libc.malloc(4096)
    for b in blocks:
        libc.free(b)
    kept = rss_mib()
    print(json.dumps({"kept": kept, "released": release_memory()}))
""")


@pytest.mark.skipif(not GLIBC, reason="the heap retention and malloc_trim are glibc's")
def test_freed_heap_goes_back_to_the_system() -> None:
    import json

    out = subprocess.run([sys.executable, "-c", HEAP_KEPT], capture_output=True, text=True, check=True, timeout=120)
    got = json.loads(out.stdout)
    before, after = got["released"]
    assert before >= got["kept"] >= 150  # the 200 MiB freed were still resident
    assert before - after >= 150  # and release_memory gave them back


def test_release_memory_is_harmless_anywhere() -> None:
    """Called between every stage: without torch loaded, twice in a row, it only reports the resident set."""
    from shoparena.train.trainer import release_memory

    first, second = release_memory(), release_memory()
    if first is not None and second is not None:
        assert first[1] > 0 and second[0] > 0


def test_each_stage_of_a_recipe_releases_what_it_freed(train_world: Any, tmp_path: Path,
                                                       monkeypatch: pytest.MonkeyPatch) -> None:
    """The recipe runner releases after every stage it ran (not after one it found finished on resume)."""
    from shoparena.train import recipe as recipe_mod

    calls: list[int] = []
    monkeypatch.setattr(recipe_mod, "release_memory", lambda: calls.append(1))
    recipe, text = recipe_mod.load_recipe("tiny")
    recipe_mod.run_recipe(recipe, train_world.corpus, tmp_path / "run", stages=["sft"], recipe_text=text)
    assert calls == [1]
    recipe_mod.run_recipe(recipe, train_world.corpus, tmp_path / "run", stages=["sft"], recipe_text=text, resume=True)
    assert calls == [1]
