"""The evaluation report: rendered from a real stored evaluation (offline policy models), self-contained HTML,
escaped untrusted strings, byte-identical re-renders, the training progression and the corpus funnel."""

from __future__ import annotations

import json
import shutil
import sys
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


def _check_self_contained(text: str) -> list[str]:
    """The ``src`` of every image; fails on any tag or attribute that would load or run something."""
    tags = _Tags(text).tags
    assert {t for t, _ in tags} <= {"html", "head", "meta", "title", "style", "body", "h1", "h2", "h3", "p",
                                    "table", "thead", "tbody", "tr", "th", "td", "img"}
    for _, attrs in tags:
        assert "href" not in attrs and not any(a.startswith("on") for a in attrs)
    srcs = [a.get("src") or "" for t, a in tags if t == "img"]
    assert all(s.startswith("data:image/png;base64,") for s in srcs)
    return srcs


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
    for png in ("report_buckets.png", "report_passk.png"):
        assert (md.parent / png).read_bytes().startswith(b"\x89PNG")
        assert f"]({png})" in text
    assert "Training progression" not in text and "Corpus funnel" not in text
    assert not (md.parent / "report_loss.png").exists()


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
    assert len(_check_self_contained(text)) == 2
    assert "http://" not in text and "https://" not in text
    assert "<script" not in text.lower() and "<link" not in text.lower()
    assert text.count('src="data:image/png;base64,') == 2
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
    assert len(_check_self_contained(html.read_text(encoding="utf-8"))) == 2
    assert "| $\\\\nope{$ &amp; \\| ]\\(x) |" in md.read_text(encoding="utf-8")  # no cell break, no link


def test_without_matplotlib_the_report_has_no_plots(evaluated, tmp_path: Path,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    out, _ = evaluated
    monkeypatch.setitem(sys.modules, "matplotlib", None)  # import matplotlib → ImportError
    md, html = write_report(_copy_eval(out, tmp_path / "noplot"))
    assert "matplotlib is not installed" in md.read_text(encoding="utf-8")
    assert "data:image" not in html.read_text(encoding="utf-8")
    assert not list(md.parent.glob("report_*.png"))


def test_rendering_twice_gives_identical_bytes(evaluated, tmp_path: Path) -> None:
    out, _ = evaluated
    dest = _copy_eval(out, tmp_path / "again")
    corpus = _corpus(tmp_path / "corpus")
    train = _train(tmp_path / "train", corpus)
    first = [p.read_bytes() for p in write_report(dest, train_manifest=train)]
    pngs = {p.name: p.read_bytes() for p in sorted(dest.glob("report_*.png"))}
    second = [p.read_bytes() for p in write_report(dest, train_manifest=train)]
    assert first == second
    assert pngs == {p.name: p.read_bytes() for p in sorted(dest.glob("report_*.png"))}
    assert len(pngs) == 4


def test_train_manifest_adds_the_progression(evaluated, tmp_path: Path) -> None:
    out, _ = evaluated
    dest = _copy_eval(out, tmp_path / "t")
    train = _train(tmp_path / "train", tmp_path / "no-corpus-here")
    md, html = write_report(dest, train_manifest=train / "manifest.json")
    text = md.read_text(encoding="utf-8")
    assert "Training progression" in text and "Corpus funnel" not in text
    assert "2.5000 → 1.6000" in text and "0.6900 → 0.5200" in text
    assert "1234567890ab" in text and "fedcba098765" in text and "reward_mean 0.25" in text
    assert (dest / "report_loss.png").read_bytes().startswith(b"\x89PNG")
    assert html.read_text(encoding="utf-8").count("data:image/png;base64,") == 3
    write_report(dest)  # a later report without the manifest drops the stale plot
    assert not (dest / "report_loss.png").exists()


def test_corpus_manifest_adds_the_funnel(evaluated, tmp_path: Path) -> None:
    out, _ = evaluated
    dest = _copy_eval(out, tmp_path / "c")
    corpus = _corpus(tmp_path / "corpus")
    md, html = write_report(dest, corpus_manifest=corpus)
    assert html.read_text(encoding="utf-8").count("data:image/png;base64,") == 3
    text = md.read_text(encoding="utf-8")
    assert "Corpus funnel" in text and "Training progression" not in text
    assert "| judge | 100 | 60 | 40 | judge_below 40 |" in text
    assert "duplicate 30, ranked_out 10" in text
    assert (dest / "report_funnel.png").is_file()
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
