"""Post-training: the five stages of the distillation recipe (SFT → rejection-sampled re-SFT → teacher SFT → KTO →
Dr. GRPO) over a model checkpoint and the corpus exports, recipes that chain them, and the run manifest.

Every stage is a function ``train_<stage>(model_dir, ..., config, out_dir, *, resume=False) -> StageResult`` that
reads a plain transformers checkpoint (adapters of the previous stage already merged) and writes one: the same text
format (:mod:`shoparena.train.format`) is used for training, rollouts and evaluation."""

BUILTIN_RECIPES: tuple[str, ...] = (
    "tiny", "cpu-mini", "cpu-mini-v2", "cpu-mini-sft2", "cpu-mini-sft3", "cpu-mini-freeze", "cpu-mini-fit", "cpu-mini-rs",
    "cpu-mini-teacher", "cpu-mini-kto", "cpu-mini-grpo", "cpu-mini-grpo-headroom", "paper")
"""The recipes shipped in ``shoparena/train/recipes/`` (here, not in :mod:`shoparena.train.recipe`, so that the
command's help can name them without importing the training stack)."""
