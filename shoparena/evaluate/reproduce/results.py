"""``results.json`` and ``results.md`` of a reproduction: Table 1 from the evaluations of both held-out partitions.

Per partition and model: ASR with its bootstrap 95 % interval, per bucket, pass@k, how the episodes ended; and
the paired comparisons of every model against the base and against stage 1 (paired bootstrap of the ASR
difference, exact sign test on the per-problem success rates, exact McNemar on majority success, minimum detectable
difference: :func:`shoparena.evaluate.core.paired_comparison`, the one ``evaluation.json`` carries too).
The body is a pure function of the stored evaluations, like ``evaluation.json`` is of the stored runs
(``docs/reproduce.md``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from shoparena.evaluate.core import paired_comparison, problem_rates
from shoparena.tasks.types import ASR_BUCKETS

__all__ = ["RESULTS_FORMAT", "partition_results", "render_results"]

RESULTS_FORMAT = "shoparena-reproduce-results/1"


def partition_results(eval_dir: Path, evaluation: Mapping[str, Any], roles: Mapping[str, str]) -> dict[str, Any]:
    """One partition's block of ``results.json`` from its ``evaluation.json`` body and stored runs."""
    config = evaluation["config"]
    ids = list(evaluation["problems"]["ids"])
    seed, n_resamples = int(config["seed"]), int(config["n_resamples"])
    models: dict[str, Any] = {}
    rates: dict[str, list[float]] = {}
    for label, m in evaluation["models"].items():
        statuses = dict(m.get("statuses") or {})
        models[label] = {
            "uri": m["uri"], "asr": m["asr"], "ci": m["ci"]["asr"],
            "by_bucket": {b: {"asr": v["asr"], "ci": v["ci"]} for b, v in m["by_bucket"].items()},
            "pass@k": m["pass@k"], "pass^k": m["pass^k"], "gt_rate": m["gt_rate"],
            "episodes": sum(statuses.values()), "statuses": statuses, "seconds": m.get("seconds"),
            "diagnostics": m.get("diagnostics"),  # what happened in the episodes (docs/evaluate.md)
        }
        rates[label] = problem_rates(eval_dir / "models" / label, ids)
    comparisons: dict[str, dict[str, Any]] = {}
    for against in ("base", "stage1"):
        ref = roles.get(against)
        if ref not in rates:
            continue
        comparisons[f"vs_{against}"] = {label: paired_comparison(rates[ref], r, seed=seed, n_resamples=n_resamples)
                                        for label, r in rates.items() if label != ref}
    return {"problems": len(ids), "ids": ids, "by_bucket": evaluation["problems"]["by_bucket"],
            "samples": config["n_samples"], "temperature": config["temperature"], "timeout_s": config["timeout_s"],
            "problem_set": config["problem_set"], "models": models, "comparisons": comparisons}


def _ci(v: float, ci: Sequence[float] | None) -> str:
    return f"{v:.3f}" if not ci else f"{v:.3f} [{ci[0]:.3f}, {ci[1]:.3f}]"


def _cmp(c: Mapping[str, Any] | None) -> str:
    if not c:
        return "–"
    s = c["sign"]
    return f"{c['diff']:+.3f} [{c['ci'][0]:+.3f}, {c['ci'][1]:+.3f}], {s['b_better']} / {s['a_better']}"


def render_results(body: Mapping[str, Any]) -> str:
    """``results.md``: one table per partition (ASR with 95 % CIs, buckets, pass@k, finished episodes, the paired
    comparisons against the base and stage 1), then how it was made."""
    roles = body["roles"]
    names = {v: k for k, v in roles.items()}
    lines = [f"# Table 1 in miniature — profile `{body['profile']}`, seed {body['seed']}", "",
             f"`{body['command']}` · commit {body.get('commit') or 'unknown'} · {body['date']} · {body['machine']}",
             "", f"Recipe `{body['recipe']}` on base `{body['base']}`; ASR is the average success rate (strict "
             "scorer, percentile bootstrap 95 % intervals over problems); comparisons are paired over the same "
             "problems: difference [95 % CI], then the sign test's problems better / worse.", ""]
    for part, block in body["partitions"].items():
        first = next(iter(block["models"].values()))
        ks = list(first["pass@k"])
        k = ks[-1]
        lines += [f"## {part}: {block['problems']} problems × {block['samples']} samples "
                  f"(T {block['temperature']}, {block['timeout_s']:g} s an episode; {block['problem_set']})", "",
                  f"| model | ASR [95 % CI] | {' | '.join(ASR_BUCKETS)} | pass@{k} | finished / timed out / episodes | "
                  "vs base | vs stage 1 |",
                  "|---|---|" + "---:|" * len(ASR_BUCKETS) + "---:|---:|---|---|"]
        for label, m in block["models"].items():
            role = names.get(label)
            shown = f"{label} ({role})" if role and role != label else label
            buckets = [f"{m['by_bucket'][b]['asr']:.3f}" if b in m["by_bucket"] else "–" for b in ASR_BUCKETS]
            finished, timed_out = m["statuses"].get("SUCCESS", 0), m["statuses"].get("TIMED_OUT", 0)
            vs = block["comparisons"]
            lines.append(f"| {shown} | {_ci(m['asr'], m['ci'])} | {' | '.join(buckets)} | {m['pass@k'][k]:.3f} | "
                         f"{finished} / {timed_out} / {m['episodes']} | {_cmp(vs.get('vs_base', {}).get(label))} | "
                         f"{_cmp(vs.get('vs_stage1', {}).get(label))} |")
        lines.append("")
    lines += ["Steps and wall time: " + ", ".join(f"{k} {v:.0f} s" for k, v in body["timings_s"].items())
              + f"; total {body['wall_s']:.0f} s.", ""]
    return "\n".join(lines)
