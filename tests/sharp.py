"""Test models whose greedy continuations depend on the prompt.

The tiny models' random weights (std 0.02) make greedy decoding print one token forever, whatever the prompt, so
comparing two decoding paths' texts would pass whatever either did. Redrawing every matrix at std 0.3 from a fixed
seed gives continuations that differ from prompt to prompt, end at different lengths and still repeat exactly.
"""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any


def redraw(model: Any, *, seed: int = 0, std: float = 0.3) -> Any:
    """``model`` with every parameter of two or more dimensions redrawn from N(0, std²) (seeded); returned."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for _, param in model.named_parameters():
            if param.dim() >= 2:
                param.copy_(torch.randn(param.shape, generator=generator) * std)
    return model


def sharpened_copy(model_dir: Path, out: Path, *, seed: int = 0, std: float = 0.3) -> Path:
    """A copy of the checkpoint ``model_dir`` at ``out`` (every file kept) with its matrices redrawn."""
    from transformers import AutoModelForCausalLM

    shutil.copytree(model_dir, out)
    model = AutoModelForCausalLM.from_pretrained(model_dir, local_files_only=True)
    redraw(model, seed=seed, std=std).save_pretrained(out)
    return out


class SetAfter:
    """An event that reads as set from its ``n``-th look on (a run that closes while its answer is generated);
    counts the looks."""

    def __init__(self, n: int) -> None:
        self.n, self.looks = n, 0

    def is_set(self) -> bool:
        self.looks += 1
        return self.looks >= self.n
