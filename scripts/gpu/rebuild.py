"""Rebuild a merged checkpoint from the base and LoRA adapters that ``scripts/gpu/sft_job.py`` returned: base +
adapter of the first stage, merged, + adapter of the next, merged, …, fp32; tokenizer and chat template from the
base, ``shoparena_format.json`` (the rendering it was trained with) from the last stage.

    python -P scripts/gpu/rebuild.py RESULT_DIR BASE_DIR OUT_DIR STAGE[/LR][,STAGE[/LR]...]

``RESULT_DIR``: the unpacked ``result.tar`` (``cat result.tar.* | tar x``). ``STAGE/LR`` picks a sweep run's
adapter (``s1/0.0003``) where the stage's ``stage.json`` is missing (a sweep that did not finish).
"""

from __future__ import annotations

import json
import shutil
import sys
from pathlib import Path

import torch
import transformers
from peft import PeftModel

from shoparena.errors import ShopArenaError
from shoparena.train.checkpoint import checkpoint_sha256


def format_of(stage_dir: Path, lr: float) -> Path:
    """The ``shoparena_format.json`` a stage's run at ``lr`` trained with: its sweep run's, else the stage's."""
    return next(stage_dir.glob(f"**/lr-{lr:g}/model/shoparena_format.json"), None) or \
        stage_dir / "model" / "shoparena_format.json"


def rebuild(base: Path, adapters: list[tuple[Path, Path]], out: Path) -> str:
    """``base`` + each ``(adapter_dir, shoparena_format.json)`` merged in turn (fp32) → ``out``; tokenizer and chat
    template from the base, the rendering from the last adapter's run. Returns the checkpoint's sha256."""
    model = transformers.AutoModelForCausalLM.from_pretrained(base, local_files_only=True, dtype=torch.float32)
    for adapter, _ in adapters:
        model = PeftModel.from_pretrained(model, adapter).merge_and_unload()
    shutil.rmtree(out, ignore_errors=True)
    out.mkdir(parents=True)
    model.save_pretrained(out)
    for f in ("tokenizer.json", "tokenizer_config.json", "chat_template.jinja", "generation_config.json"):
        shutil.copy(base / f, out / f)
    shutil.copy(adapters[-1][1], out / "shoparena_format.json")
    return checkpoint_sha256(out)


def main() -> None:
    src, base, out = Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
    adapters = []
    for item in sys.argv[4].split(","):
        name, _, lr = item.partition("/")
        if not lr:
            lr = f'{json.loads((src / name / "stage.json").read_text())["metrics"]["lr"]:g}'
        adapters.append((src / name / f"adapter-lr{float(lr):g}", format_of(src / name, float(lr))))
    print(json.dumps({"out": str(out), "sha256": rebuild(base, adapters, out)}))


if __name__ == "__main__":
    try:
        main()
    except (ShopArenaError, OSError, ValueError, KeyError, IndexError) as exc:  # one line, exit 2
        print(f"error: {type(exc).__name__}: {exc}", file=sys.stderr)
        sys.exit(2)
