"""Post-training: the five stages of the distillation recipe (SFT → rejection-sampled re-SFT → teacher SFT → KTO →
Dr. GRPO) over a model checkpoint and the corpus exports, recipes that chain them, and the run manifest.

Every stage is a function ``train_<stage>(model_dir, ..., config, out_dir, *, resume=False) -> StageResult`` that
reads a plain transformers checkpoint (adapters of the previous stage already merged) and writes one: the same text
format (:mod:`shoparena.train.format`) is used for training, rollouts and evaluation."""

BUILTIN_RECIPES: tuple[str, ...] = ("tiny", "cpu-mini", "paper", "gpu-smollm2")
"""The recipes shipped in ``shoparena/train/recipes/`` (here, not in :mod:`shoparena.train.recipe`, so that the
command's help can name them without importing the training stack): ``tiny`` (CI and the demo), ``cpu-mini``
(SmolLM2-135M on a 2-core CPU), ``paper`` (the paper's hyperparameters), ``gpu-smollm2`` (``paper`` bounded for one
GPU with SmolLM2-135M). The recipes of past experiments are in ``docs/experiments/recipes/`` and run by path."""
