"""The evaluation report: rendered from a real stored evaluation (offline policy models), self-contained HTML with
inline SVG charts, escaped untrusted strings, byte-identical re-renders, the training progression, the corpus
funnel and what happened in the episodes."""

from __future__ import annotations

import json
import shutil
from html.parser import HTMLParser
from pathlib import Path

import pytest

from shoparena.errors import DataError, NotFoundError
from shoparena.evaluate import EvalConfig, evaluate_models, parse_models
from shoparena.evaluate.report import write_report
from tests.worlds import small_world

EVIL = "<script>alert(1)</script>"


@pytest.fixture(scope="module")
def evaluated(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    root = tmp_path_factory.mktemp("report")
    catalog, problems, _ = small_world(root, size=400, catalog_seed=3, n=8, problem_seed=5)
    config = EvalConfig(models=parse_models("expert=policy:expert,policy:random"), agent="react", n_samples=2,
                        temperature=0.7, seed=1, concurrency=2, timeout_s=60, n_resamples=200,
                        problem_set="problems.jsonl")
    body = evaluate_models(catalog, problems, config, root / "out")
    return root / "out", body


@pytest.fixture(scope="module")
def rendered(evaluated) -> tuple[Path, Path, dict]:
    out, body = evaluated
    md, html = write_report(out)
    return md, html, body


def _copy_eval(out: Path, dest: Path, body: dict | str | None = None) -> Path:
    dest.mkdir(parents=True, exist_ok=True)
    if body is None:
        shutil.copy(out / "evaluation.json", dest / "evaluation.json")
    else:
        text = body if isinstance(body, str) else json.dumps(body, indent=2, ensure_ascii=False)
        (dest / "evaluation.json").write_text(text, encoding="utf-8")
    return dest


class _Tags(HTMLParser):
    """Every start tag with its attributes (what a browser would load or run)."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.tags: list[tuple[str, dict[str, str | None]]] = []
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


SVG_TAGS = {"svg", "text", "line", "polyline", "polygon", "circle", "rect", "path", "title"}


def _check_self_contained(text: str) -> int:
    """The number of inline charts; fails on any tag or attribute that would load or run something."""
    tags = _Tags(text).tags
    assert {t for t, _ in tags} <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p",
                                    "table", "thead", "tbody", "tr", "th", "td", "figure"} | SVG_TAGS
    for _, attrs in tags:
        assert not ({"href", "src", "xlink:href", "xmlns"} & set(attrs)) and not any(a.startswith("on") for a in attrs)
    return sum(1 for t, _ in tags if t == "svg")


def _corpus(dir_: Path) -> Path:
    dir_.mkdir(parents=True, exist_ok=True)
    counts = [
        {"stage": "normalize", "seen": 100, "kept": 100, "rejected": {}, "examples": {}, "notes": {}},
        {"stage": "judge", "seen": 100, "kept": 60, "rejected": {"judge_below": 40}, "examples": {}, "notes": {}},
        {"stage": "dedup_rank", "seen": 60, "kept": 20, "rejected": {"duplicate": 30, "ranked_out": 10}},
    ]
    (dir_ / "manifest.json").write_text(json.dumps({"format": "x", "counts": counts, "files": {}}), encoding="utf-8")
    return dir_


def _train(dir_: Path, corpus: Path) -> Path:
    dir_.mkdir(parents=True, exist_ok=True)

    def stage(name: str, losses: list[float], sha: str, **extra: float) -> dict:
        return {"stage": name, "model_dir": str(dir_ / name / "model"), "checkpoint_sha256": sha,
                "metrics": {"losses": losses, "loss_first": losses[0], "loss_last": losses[-1],
                            "train_loss": sum(losses) / len(losses), "eval_loss": losses[-1] + 0.1, **extra},
                "steps": len(losses), "tokens_trained": 4000, "seconds": 12.5, "tokens_per_s": 320.0}

    manifest = {
        "format": "shoparena-train/1", "recipe": "tiny", "recipe_sha256": "ab" * 32, "recipe_text": "name: tiny\n",
        "corpus": str(corpus), "corpus_manifest_sha256": "cd" * 32, "base": "tiny", "base_sha256": "ef" * 32,
        "stages_requested": ["sft", "kto"], "seeds": {"recipe": 0, "sft": 0},
        "versions": {"python": "3.11", "torch": None},
        "stages": [stage("sft", [2.5, 2.1, 1.8, 1.6], "1234567890abcdef" * 4),
                   stage("kto", [0.69, 0.6, 0.52], "fedcba0987654321" * 4, reward_mean=0.25)],
        "checkpoints": {"sft": "1234567890abcdef" * 4, "kto": "fedcba0987654321" * 4},
        "skipped": [], "final_model": str(dir_ / "kto" / "model"), "complete": True, "wall_s": 31.0,
    }
    (dir_ / "manifest.json").write_text(json.dumps(manifest, indent=2), encoding="utf-8")
    return dir_


def test_report_renders_from_the_stored_run(rendered) -> None:
    md, html, _ = rendered
    assert md.name == "report.md" and html.name == "report.html"
    text = md.read_text(encoding="utf-8")
    assert "Table 1" in text and "Paired comparisons" in text
    assert "problems.jsonl" in text and "react" in text
    assert "Table 1: average success rate (ASR)" in text and "attack" not in text.lower()
    for svg in ("report_buckets.svg", "report_passk.svg"):
        chart = (md.parent / svg).read_text(encoding="utf-8")
        assert chart.startswith('<svg xmlns="http://www.w3.org/2000/svg"') and chart.rstrip().endswith("</svg>")
        assert f"]({svg})" in text
    assert "Training progression" not in text and "Corpus funnel" not in text
    assert not (md.parent / "report_loss.svg").exists()


def test_table_has_one_row_per_model_with_asr_and_ci(rendered) -> None:
    md, _, body = rendered
    lines = md.read_text(encoding="utf-8").splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith("| Model | ASR"))
    rows = []
    for line in lines[start + 2:]:
        if not line.startswith("|"):
            break
        rows.append([c.strip() for c in line.strip("|").split(" | ")])
    assert [r[0] for r in rows] == list(body["models"])  # one row per model, in evaluation order
    for row, m in zip(rows, body["models"].values(), strict=True):
        lo, hi = m["ci"]["asr"]
        assert row[1] == f"{m['asr']:.3f} [{lo:.3f}, {hi:.3f}]"
        lo, hi = m["ci"]["pass@2"]
        assert f"{m['pass@k']['2']:.3f} [{lo:.3f}, {hi:.3f}]" in row
        for b in m["by_bucket"].values():
            assert f"{b['asr']:.3f} [{b['ci'][0]:.3f}, {b['ci'][1]:.3f}]" in row
    c = body["comparisons"][0]
    assert f"{c['diff']:+.3f} [{c['ci'][0]:+.3f}, {c['ci'][1]:+.3f}]" in md.read_text(encoding="utf-8")
    sign = c["sign"]
    assert f"| {sign['b_better']} / {sign['a_better']} ({sign['p_value']:.3g}) |" in md.read_text(encoding="utf-8")
    assert "Retrieval and choice" in md.read_text(encoding="utf-8")
    for label, m in body["models"].items():  # the choice figures' row, counts with their shares
        ch = m["choice"]
        assert (f"| {label} | {ch['episodes']} | {ch['recommended']} ({ch['rates']['recommended']:.3f}) | "
                f"{ch['retrieved']} ({ch['rates']['retrieved']:.3f}) |") in md.read_text(encoding="utf-8")


def test_an_evaluation_written_before_the_sign_test_still_renders(evaluated, tmp_path: Path) -> None:
    out, body = evaluated
    old = json.loads(json.dumps(body))
    for c in old["comparisons"]:
        del c["sign"]
    md, _ = write_report(_copy_eval(out, tmp_path / "old", old))
    row = next(line for line in md.read_text(encoding="utf-8").splitlines() if line.startswith("| policy-random − "))
    assert "| – |" in row  # the column says it was not recorded, nothing invented
    bad = json.loads(json.dumps(body))
    bad["comparisons"][0]["sign"] = {"b_better": "x", "a_better": 0, "p_value": 1.0}
    with pytest.raises(DataError):
        write_report(_copy_eval(out, tmp_path / "bad", bad))


def test_html_is_self_contained(rendered) -> None:
    _, html, _ = rendered
    text = html.read_text(encoding="utf-8")
    assert _check_self_contained(text) == 2
    assert "http://" not in text and "https://" not in text
    assert "<script" not in text.lower() and "<link" not in text.lower()
    assert "<style>" in text


def test_untrusted_strings_are_escaped(evaluated, tmp_path: Path) -> None:
    out, body = evaluated
    evil = json.loads(json.dumps(body))
    names = {"expert": EVIL, "policy-random": "$\\nope{$ & | ](x)"}  # also not math text in the plots
    evil["models"] = {names[k]: v for k, v in evil["models"].items()}
    evil["models"][EVIL]["uri"] = 'policy:"><img src=https://evil.example/x.png>'
    evil["config"]["problem_set"] = "<b>set</b>"
    for c in evil["comparisons"]:
        c["a"], c["b"] = names[c["a"]], names[c["b"]]
    md, html = write_report(_copy_eval(out, tmp_path / "evil", evil))
    for path in (md, html):
        text = path.read_text(encoding="utf-8")
        assert EVIL not in text and "<img src=https" not in text and "<b>set</b>" not in text
        assert "&lt;script&gt;alert(1)&lt;/script&gt;" in text
    assert _check_self_contained(html.read_text(encoding="utf-8")) == 2
    assert "| $\\\\nope{$ &amp; \\| ]\\(x) |" in md.read_text(encoding="utf-8")  # no cell break, no link
    for svg in md.parent.glob("report_*.svg"):  # the legends of the charts escape the labels too
        chart = svg.read_text(encoding="utf-8")
        assert EVIL not in chart and "&lt;script&gt;" in chart


def test_stale_charts_of_an_earlier_report_are_removed(evaluated, tmp_path: Path) -> None:
    out, _ = evaluated
    dest = _copy_eval(out, tmp_path / "stale")
    for name in ("report_loss.png", "report_passk.png", "report_funnel.svg"):
        (dest / name).write_bytes(b"old")
    write_report(dest)
    assert sorted(p.name for p in dest.glob("report_*")) == ["report_buckets.svg", "report_passk.svg"]


def test_rendering_twice_gives_identical_bytes(evaluated, tmp_path: Path) -> None:
    out, _ = evaluated
    dest = _copy_eval(out, tmp_path / "again")
    corpus = _corpus(tmp_path / "corpus")
    train = _train(tmp_path / "train", corpus)
    first = [p.read_bytes() for p in write_report(dest, train_manifest=train)]
    charts = {p.name: p.read_bytes() for p in sorted(dest.glob("report_*.svg"))}
    second = [p.read_bytes() for p in write_report(dest, train_manifest=train)]
    assert first == second
    assert charts == {p.name: p.read_bytes() for p in sorted(dest.glob("report_*.svg"))}
    assert len(charts) == 4


def test_train_manifest_adds_the_progression(evaluated, tmp_path: Path) -> None:
    out, _ = evaluated
    dest = _copy_eval(out, tmp_path / "t")
    train = _train(tmp_path / "train", tmp_path / "no-corpus-here")
    md, html = write_report(dest, train_manifest=train / "manifest.json")
    text = md.read_text(encoding="utf-8")
    assert "Training progression" in text and "Corpus funnel" not in text
    assert "2.5000 → 1.6000" in text and "0.6900 → 0.5200" in text
    assert "1234567890ab" in text and "fedcba098765" in text and "reward_mean 0.25" in text
    loss = (dest / "report_loss.svg").read_text(encoding="utf-8")
    assert loss.count("<polyline") == 2 and ">sft</text>" in loss and ">kto</text>" in loss
    assert _check_self_contained(html.read_text(encoding="utf-8")) == 3
    write_report(dest)  # a later report without the manifest drops the stale plot
    assert not (dest / "report_loss.svg").exists()


def test_corpus_manifest_adds_the_funnel(evaluated, tmp_path: Path) -> None:
    out, _ = evaluated
    dest = _copy_eval(out, tmp_path / "c")
    corpus = _corpus(tmp_path / "corpus")
    md, html = write_report(dest, corpus_manifest=corpus)
    assert _check_self_contained(html.read_text(encoding="utf-8")) == 3
    text = md.read_text(encoding="utf-8")
    assert "Corpus funnel" in text and "Training progression" not in text
    assert "| judge | 100 | 60 | 40 | judge_below 40 |" in text
    assert "duplicate 30, ranked_out 10" in text
    funnel = (dest / "report_funnel.svg").read_text(encoding="utf-8")
    assert funnel.count("<rect") == 6 and "rejected: judge_below" in funnel  # kept ×3, judge_below, 2 reasons
    # by default the corpus comes from the training manifest's `corpus`
    md, _ = write_report(dest, train_manifest=_train(tmp_path / "train", corpus))
    assert "Corpus funnel" in md.read_text(encoding="utf-8")


def test_missing_or_malformed_inputs(evaluated, tmp_path: Path) -> None:
    out, body = evaluated
    with pytest.raises(NotFoundError, match=r"evaluation\.json"):
        write_report(tmp_path / "nothing")
    with pytest.raises(DataError, match="not JSON"):
        write_report(_copy_eval(out, tmp_path / "bad", "{not json"))
    with pytest.raises(DataError, match="not a shoparena evaluation"):
        write_report(_copy_eval(out, tmp_path / "fmt", {**body, "format": "other/1"}))
    broken = json.loads(json.dumps(body))
    broken["models"]["expert"]["asr"] = "high"
    with pytest.raises(DataError, match="expected a number"):
        write_report(_copy_eval(out, tmp_path / "num", broken))
    del broken["models"]["expert"]["ci"]
    with pytest.raises(DataError):
        write_report(_copy_eval(out, tmp_path / "ci", broken))
    dest = _copy_eval(out, tmp_path / "ok")
    with pytest.raises(NotFoundError):
        write_report(dest, train_manifest=tmp_path / "no-train")
    (tmp_path / "t.json").write_text(json.dumps({"recipe": "x"}))
    with pytest.raises(DataError, match="not a training manifest"):
        write_report(dest, train_manifest=tmp_path / "t.json")
    with pytest.raises(NotFoundError):
        write_report(dest, corpus_manifest=tmp_path / "no-corpus")
    assert not (dest / "report.md").exists()  # nothing written when an input is bad


def test_what_happened_in_the_episodes(rendered, evaluated, tmp_path: Path) -> None:
    md, _, body = rendered
    text = md.read_text(encoding="utf-8")
    assert "What happened in the episodes" in text
    for label, m in body["models"].items():
        d = m["diagnostics"]
        assert (f"| {label} | {d['episodes']} | {d['finished']} | {d['timed_out']} | "
                f"{d['timed_out_after_recommending']} | {d['failed']} | – |") in text
        per = d["per_episode"]
        assert (f"| {label} | {per['inference_calls']:.2f} | {d['totals']['inference_failed']} | "
                f"{per['turns']:.2f} | {per['tool_calls']:.2f} |") in text
        assert (f"| {d['think_then_stop']} | {d['episodes_think_then_stop']} | "
                f"{d['repeated_tool_calls']} ({d['episodes_repeating']}) | "
                f"{d['gt_retrieved']} / {d['gt_recommended']} |") in text
    assert "the baseline is expert" in text
    # a model whose every episode failed on its backend is said so; an evaluation without diagnostics renders
    out, _ = evaluated
    dead = json.loads(json.dumps(body))
    d = dead["models"]["policy-random"]["diagnostics"]
    d.update(failed=d["episodes"], finished=0, failed_by_reason={"BackendError": d["episodes"]},
             failure_examples={"BackendError": "answered 500"}, all_failed_on_backend=True)
    text = write_report(_copy_eval(out, tmp_path / "dead", dead))[0].read_text(encoding="utf-8")
    assert f"BackendError {d['episodes']} (answered 500)" in text
    assert "Every episode of policy-random failed on its model backend" in text
    # a model evaluated before diagnostics existed, beside one with them: its rows are dashes, every column filled
    mixed = json.loads(json.dumps(body))
    first = next(iter(mixed["models"]))
    mixed["models"][first]["diagnostics"] = None
    text = write_report(_copy_eval(out, tmp_path / "mixed", mixed))[0].read_text(encoding="utf-8")
    assert f"| {first} | – | – | – | – | – | – |" in text
    assert f"| {first} |{' – |' * 12}" in text
    old = json.loads(json.dumps(body))
    for m in old["models"].values():
        del m["diagnostics"]
    del old["baseline"]
    text = write_report(_copy_eval(out, tmp_path / "old", old))[0].read_text(encoding="utf-8")
    assert "What happened in the episodes" not in text and "the baseline is expert" in text


def test_the_report_names_the_clock(evaluated, tmp_path: Path) -> None:
    out, body = evaluated
    md, _ = write_report(_copy_eval(out, tmp_path / "wall"))
    assert "clock 60 s an episode (wall)" in md.read_text(encoding="utf-8")
    tokens = json.loads(json.dumps(body))
    tokens["config"]["episode_tokens"] = 2048
    md, _ = write_report(_copy_eval(out, tmp_path / "tokens", tokens))
    assert "clock 2048 generated tokens an episode (wall bound 60 s)" in md.read_text(encoding="utf-8")
