"""A corpus partition's problems, read back from the problem bank the corpus was built from and verified against
the corpus: the one reader behind ``evaluate --split CORPUS:PARTITION``, the teacher's held-out check and the tools
that sample a corpus's train problems (docs/corpus-design.md)."""

from __future__ import annotations

import os
from pathlib import Path

from shoparena.errors import ConfigError, DataError, NotFoundError
from shoparena.tasks.types import Problem

__all__ = ["partition_problems"]


def partition_problems(corpus_dir: str | os.PathLike[str], partition: str, *,
                       problems: str | os.PathLike[str] | None = None) -> list[Problem]:
    """The bank problems the corpus split at ``corpus_dir`` put in ``partition`` (any of its partitions:
    :func:`split_problems` is the evaluation's guard that refuses ``train``), sorted by id. The corpus is verified
    first, as ``corpus show`` and ``train`` do: every file against the sealed ``manifest.json``, ``split.json``
    against its own seal, and the problems found against the partition's frozen ids and GT-product hash — an
    edited split or another bank is a :class:`DataError` (a :class:`~shoparena.errors.LeakError` for a split
    edited after it was frozen), never a silently different evaluation set."""
    from shoparena.artefact import resolve_input
    from shoparena.corpus.export.manifest import read_manifest
    from shoparena.corpus.split import SplitManifest, gt_ids_hash
    from shoparena.tasks.loader import load_problems

    root = Path(corpus_dir)
    split_file, manifest_file = root / "split.json", root / "manifest.json"
    if not split_file.is_file():
        raise NotFoundError(f"{root}: no split.json (not a corpus directory)", hint="shoparena corpus build --out DIR")
    if not manifest_file.is_file():
        raise DataError(f"{root}: split.json without the corpus's manifest.json (not a whole corpus)",
                        hint="pass the --out of `shoparena corpus build`; its split is verified against the manifest")
    body = read_manifest(root, verify=True)  # a changed, missing or unlisted file (split.json too) is an error
    split = SplitManifest.load(split_file)  # its hashes and cross-references
    sealed = (body.get("split") or {}).get("manifest_hash") if isinstance(body.get("split"), dict) else None
    if sealed != split.manifest_hash:
        raise DataError(f"{split_file} is not the split {manifest_file} was built with",
                        hint="rebuild the corpus (shoparena corpus build) instead of swapping its split")
    info = split.partitions[partition]
    wanted = set(info.problems)
    source = problems
    if source is None:
        try:
            source = body["sources"]["problems"]
        except (KeyError, TypeError):
            source = None
    if source is None:
        raise ConfigError(f"{root}: the corpus manifest names no problem bank", hint="pass --problems FILE|DIR")
    path = Path(source) if problems is not None else resolve_input(source, root)  # recorded: relative to the corpus
    files = sorted(path.glob("problems-*.jsonl")) or sorted(path.glob("*.jsonl")) if path.is_dir() else [path]
    if not files or not all(f.is_file() for f in files):
        raise NotFoundError(f"no problem bank at {path}", hint="pass --problems FILE|DIR")
    seen: dict[str, Problem] = {}
    for f in files:
        for p in load_problems(f, refuse_conflicts=True):
            if p.problem_id in wanted:
                seen.setdefault(p.problem_id, p)
    if not seen:
        raise DataError(f"no problem of {path} falls in the {partition!r} partition of {root}",
                        hint="pass the bank the corpus was built from (--problems FILE|DIR)")
    missing = sorted(wanted - set(seen))
    if missing:
        raise DataError(f"{path} lacks {len(missing)} of the {len(wanted)} problems of the {partition!r} partition "
                        f"of {root} ({', '.join(missing[:3])}{' …' if len(missing) > 3 else ''})",
                        hint="pass the bank the corpus was built from (--problems FILE|DIR)")
    if gt_ids_hash(seen.values()) != info.gt_ids_hash:
        raise DataError(f"the ground truths of {path}'s {partition!r} problems differ from those the split of {root} "
                        "froze", hint="pass the bank the corpus was built from (--problems FILE|DIR)")
    return [seen[k] for k in sorted(seen)]
