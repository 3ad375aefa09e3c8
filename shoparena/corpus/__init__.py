"""The corpus: normalise every trajectory source into one canonical row, filter it structurally, split it by leak
cluster into train / eval / never-touch, export SFT / KTO / GRPO sets, and rewrite axis-B traces into agentic form
(paper §5 and §9; ``docs/paper.md`` §3; ``docs/training.md`` §2).

The public interface (``from shoparena.corpus import build_corpus, read_manifest``); names load lazily."""

from __future__ import annotations

from typing import TYPE_CHECKING

from shoparena._lazy import lazy_exports

if TYPE_CHECKING:
    from shoparena.corpus.build import CorpusConfig, CorpusReport, build_corpus
    from shoparena.corpus.export import (
        jsonable,
        read_manifest,
        training_hash,
        write_grpo,
        write_kto,
        write_manifest,
        write_sft,
    )
    from shoparena.corpus.filter import FilterConfig
    from shoparena.corpus.problems import partition_problems
    from shoparena.corpus.split import (
        MAX_VALIDATION_FRACTION,
        SplitConfig,
        SplitManifest,
        assign_rows,
        split_problems,
        verify_split,
    )
    from shoparena.corpus.types import Trajectory

#: Public name → ``module`` (same name) or ``module:attr`` under this package; imported on first use.
_EXPORTS: dict[str, str] = {
    "assign_rows": "split",
    "build_corpus": "build",
    "CorpusConfig": "build",
    "CorpusReport": "build",
    "FilterConfig": "filter",
    "jsonable": "export",
    "MAX_VALIDATION_FRACTION": "split",
    "partition_problems": "problems",
    "read_manifest": "export",
    "split_problems": "split",
    "SplitConfig": "split",
    "SplitManifest": "split",
    "training_hash": "export",
    "Trajectory": "types",
    "verify_split": "split",
    "write_grpo": "export",
    "write_kto": "export",
    "write_manifest": "export",
    "write_sft": "export",
}
__all__ = [
    "MAX_VALIDATION_FRACTION", "CorpusConfig", "CorpusReport", "FilterConfig", "SplitConfig", "SplitManifest",
    "Trajectory", "assign_rows", "build_corpus", "jsonable", "partition_problems", "read_manifest", "split_problems",
    "training_hash", "verify_split",
    "write_grpo", "write_kto", "write_manifest", "write_sft"
]
__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS)
