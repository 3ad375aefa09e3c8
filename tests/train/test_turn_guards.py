"""The turn guards of the row-trained stages on the tiny Qwen3: a trained assistant turn that ends a thought without its
tool call drops its SFT row (counted, logged, in stage.json; ``keep`` keeps it), RS leaves such successful samples
out, KTO never takes such a turn as desirable and leaves out the undesirable turns calling ``undesirable_exclude``'s
tools, and ``scripts/row_turns.py`` measures the rows against the serving cap."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from shoparena.env import get_toolset
from shoparena.errors import ConfigError
from shoparena.train.format import FormatConfig, encode_rows
from shoparena.train.kto import KTOConfig, train_kto, turn_filter
from shoparena.train.recipe import parse_recipe
from shoparena.train.rs import without_callless
from shoparena.train.sft import SFTConfig, train_sft
from shoparena.train.trainer import LOGGER
from tests.scripts import load_script

TOOLS = json.dumps(get_toolset("upstream4").specs())


def _call(name: str, args: dict[str, Any], cid: str) -> dict[str, Any]:
    return {"id": cid, "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}


def _assistant(reasoning: str, call: dict[str, Any] | None = None, content: str = "") -> dict[str, Any]:
    m: dict[str, Any] = {"role": "assistant", "content": content, "reasoning_content": reasoning}
    if call is not None:
        m["tool_calls"] = [call]
    return m


def _tool(cid: str, content: str) -> dict[str, Any]:
    return {"role": "tool", "content": content, "tool_call_id": cid}


def _messages(n: int, *, stop: bool = False, closing: bool = False, stop_text: str = "") -> list[dict[str, Any]]:
    """A short successful episode: search, (a think-then-stop turn), recommend, terminate, (a closing text)."""
    pid = str(1000 + n)
    msgs: list[dict[str, Any]] = [
        {"role": "user", "content": f"find me a red dress number {n}"},
        _assistant("Searching for a red dress.", _call("find_product", {"q": "red dress"}, f"a{n}")),
        _tool(f"a{n}", json.dumps([{"product_id": pid, "title": "Red Dress", "price": 10.0}])),
    ]
    if stop:
        msgs.append(_assistant(stop_text or f"The first result fits. Recommending {pid}."))
    msgs += [
        _assistant(f"Recommending {pid}.", _call("recommend_product", {"product_ids": pid}, f"b{n}")),
        _tool(f"b{n}", f"Having recommended the products to the user: {pid}."),
        _assistant("Done.", _call("terminate", {"status": "success"}, f"c{n}")),
        _tool(f"c{n}", "The interaction has been completed with status: success"),
    ]
    if closing:
        msgs.append(_assistant("", content="The task is complete."))
    return msgs


def _row(n: int, **kw: Any) -> dict[str, Any]:
    return {"id": f"r{n}", "messages": _messages(n, **kw), "tools": TOOLS}


# ── SFT rows ────────────────────────────────────────────────────────────────────────────────────────────────────


def test_the_guard_drops_exactly_the_rows_with_a_trained_callless_turn(tiny_tokenizer: Any) -> None:
    rows = [_row(0), _row(1, stop=True), _row(2, closing=True), _row(3)]
    dropped = encode_rows(tiny_tokenizer, rows, FormatConfig(max_length=4096, callless_turns="drop"))
    kept = encode_rows(tiny_tokenizer, rows, FormatConfig(max_length=4096, callless_turns="keep"))
    assert dropped.counts["dropped_callless_turn"] == 1 and dropped.counts["kept"] == 3
    assert dropped.counts["rows_callless"] == 1 and dropped.counts["callless_turns_trained"] == 1
    # the closing text after terminate is no open callless turn: its row stays
    assert dropped.samples == [kept.samples[0], kept.samples[2], kept.samples[3]]
    assert kept.counts["kept"] == 4 and kept.counts["rows_callless"] == 1 and not kept.counts["dropped_callless_turn"]


def test_a_callless_turn_left_out_of_the_loss_does_not_drop_its_row(tiny_tokenizer: Any) -> None:
    # the callless turn is nearly all text and over the turn budget: too little reasoning to shorten, so it is
    # context, not a target
    long_text = " ".join(f"word{i}" for i in range(120))
    row = {"messages": _messages(0, stop=True), "tools": TOOLS}
    row["messages"][3] = _assistant("Hm.", content=long_text)
    enc = encode_rows(tiny_tokenizer, [row], FormatConfig(max_length=8192, turn_tokens=96, callless_turns="drop"))
    assert enc.counts["turns_untrained"] == 1 and enc.counts["kept"] == 1 and not enc.counts["rows_callless"]


def test_sft_records_the_dropped_rows_in_stage_json_and_logs_them(tiny_model: Path, tmp_path: Path,
                                                                    caplog: pytest.LogCaptureFixture) -> None:
    rows = [_row(0), _row(1, stop=True), _row(2), _row(3, stop=True), _row(4)]
    cfg = SFTConfig(max_steps=1, batch_size=2, max_length=2048, lora=None)
    with caplog.at_level(logging.INFO, logger=LOGGER):
        res = train_sft(tiny_model, rows, [_row(5, stop=True)], cfg, tmp_path / "s")
    stage = json.loads((tmp_path / "s" / "stage.json").read_text())
    assert stage["metrics"]["callless_turns"] == {"rule": "drop", "train_rows": 2, "eval_rows": 1}
    assert stage["metrics"]["train_counts"]["dropped_callless_turn"] == 2
    assert stage["metrics"]["train_counts"]["kept"] == 3 and res.metrics["eval_counts"]["dropped_callless_turn"] == 1
    assert any("2 train rows have a trained assistant turn without a tool call" in r.getMessage()
               for r in caplog.records)


def test_sft_keep_trains_the_callless_rows(tiny_model: Path, tmp_path: Path) -> None:
    rows = [_row(0), _row(1, stop=True), _row(2)]
    cfg = SFTConfig(max_steps=1, batch_size=2, max_length=2048, lora=None, callless_turns="keep")
    res = train_sft(tiny_model, rows, [], cfg, tmp_path / "s")
    assert res.metrics["train_counts"]["kept"] == 3 and res.metrics["callless_turns"]["train_rows"] == 1


# ── RS ──────────────────────────────────────────────────────────────────────────────────────────────────────────


def test_rs_leaves_out_the_successful_samples_with_a_callless_turn() -> None:
    rows = [_row(0), _row(1, stop=True), _row(2, closing=True), _row(3, stop=True)]
    pairs = [("p0", 0), ("p0", 1), ("p1", 0), ("p1", 1)]
    kept, kept_pairs, dropped = without_callless(rows, pairs)
    assert [r["id"] for r in kept] == ["r0", "r2"] and kept_pairs == [("p0", 0), ("p1", 0)] and dropped == 2
    with pytest.raises(ValueError, match="pairs"):
        without_callless(rows, pairs[:2])


# ── KTO ─────────────────────────────────────────────────────────────────────────────────────────────────────────


def _kto_rows(n: int, *, label: bool, stop: bool = False) -> list[dict[str, Any]]:
    """One KTO row per assistant turn of an episode, as the corpus export writes them."""
    msgs = _messages(n, stop=stop)
    return [{"id": f"t{n}:{i}", "prompt": msgs[:i], "completion": [msgs[i]], "label": label, "tools": TOOLS}
            for i, m in enumerate(msgs) if m["role"] == "assistant"]


def test_kto_callless_is_never_desirable_and_excluded_tools_leave_the_undesirable_class() -> None:
    good, bad = _kto_rows(0, label=True, stop=True), _kto_rows(1, label=False, stop=True)
    rows = good + bad
    kept, counts = turn_filter(rows, callless="drop", exclude=("recommend_product",))
    assert counts["dropped_desirable_callless"] == 1 and counts["undesirable_excluded"] == 1
    assert counts["undesirable_excluded_by_tool"] == {"recommend_product": 1}
    left = {(r["label"], r["id"]) for r in rows} - {(r["label"], r["id"]) for r in kept}
    assert left == {(True, "t0:3"), (False, "t1:4")}  # the desirable callless turn, the undesirable recommend turn
    # the undesirable callless turn stays (it pushes the stop down); keep / no exclusion leave every row
    assert any(r["id"] == "t1:3" for r in kept)
    everything, none = turn_filter(rows, callless="keep")
    assert everything == rows and none == {"dropped_desirable_callless": 0, "undesirable_excluded": 0}


def test_train_kto_counts_what_the_filters_left_out(tiny_model: Path, tmp_path: Path) -> None:
    rows = _kto_rows(0, label=True, stop=True) + _kto_rows(1, label=False) + _kto_rows(2, label=True)
    cfg = KTOConfig(max_steps=1, batch_size=2, max_length=2048, save_steps=1, probe_every=1,
                    undesirable_exclude=("recommend_product",))
    res = train_kto(tiny_model, rows, cfg, tmp_path / "k", rate_fn=lambda m: 1.0)
    assert res.metrics["dropped_desirable_callless"] == 1 and res.metrics["undesirable_excluded"] == 1
    assert res.metrics["desirable"] == 6 and res.metrics["undesirable"] == 2 and res.metrics["rows"] == 8


def test_an_unknown_excluded_tool_is_a_config_error_at_recipe_load() -> None:
    recipe = parse_recipe("name: x\nkto:\n  undesirable_exclude: [recommend_product]\n")
    assert recipe.kto.undesirable_exclude == ("recommend_product",) and recipe.sft.callless_turns == "drop"
    with pytest.raises(ConfigError, match=r"kto\.undesirable_exclude.*unknown: recommend"):
        parse_recipe("name: x\nkto:\n  undesirable_exclude: [recommend]\n")
    with pytest.raises(ConfigError, match=r"sft\.callless_turns"):
        parse_recipe("name: x\nsft:\n  callless_turns: sometimes\n")
    with pytest.raises(ValidationError):
        KTOConfig(undesirable_exclude=("terminate", "terminate"))


# ── scripts/row_turns.py ────────────────────────────────────────────────────────────────────────────────────────


def _script() -> Any:
    return load_script("row_turns")


def test_row_turns_measures_sft_and_kto_rows(tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
                                             ) -> None:
    long = " ".join(f"Reason {i} is noted." for i in range(40))
    sft = [_row(0), _row(1, stop=True), _row(2)]
    sft[2]["messages"][1]["reasoning_content"] = long  # over the cap: fitting shortens it
    kto = _kto_rows(0, label=True) + _kto_rows(1, label=False, stop=True)
    (tmp_path / "sft.jsonl").write_text("".join(json.dumps(r) + "\n" for r in sft))
    (tmp_path / "kto.jsonl").write_text("".join(json.dumps(r) + "\n" for r in kto))
    rc = _script().main([str(tmp_path / "sft.jsonl"), str(tmp_path / "kto.jsonl"), "--tokenizer", str(tiny_model),
                         "--turn-tokens", "128", "--json"])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    s, k = out["files"]
    g = s["groups"]["all"]
    assert s["kind"] == "sft" and g["rows"] == 3 and g["turns"] == 10
    assert g["callless"] == 1 and g["think_then_stop"] == 1 and g["rows_guard_drops"] == 1
    assert g["tokens"]["over_cap"] == 1 and g["fit"]["shortened"] == 1 and g["fit"]["out_of_loss"] == 0
    assert g["tokens"]["max"] > 128 >= g["fit"]["tokens"]["max"]
    d, u = k["groups"]["desirable"], k["groups"]["undesirable"]
    assert k["kind"] == "kto" and (d["rows"], u["rows"]) == (3, 4)
    assert (d["callless"], u["callless"], u["think_then_stop"]) == (0, 1, 1)
    assert u["recommend_turns"] == 1 and u["recommend_after_stated_decision"] == 1


@pytest.mark.parametrize("content", [None, "not json\n", "[1, 2]\n", '{"other": 1}\n'])
def test_row_turns_bad_input_is_one_error_line_and_exit_2(tiny_model: Path, tmp_path: Path, content: str | None,
                                                          capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "rows.jsonl"
    if content is not None:
        path.write_text(content)
    rc = _script().main([str(path), "--tokenizer", str(tiny_model)])
    err = capsys.readouterr().err.splitlines()
    assert rc == 2 and err[0].startswith("error: ") and err[1].startswith("hint: ") and len(err) == 2
    rc = _script().main([str(path), "--tokenizer", str(tmp_path)])  # no tokenizer there
    assert rc == 2 and "no tokenizer" in capsys.readouterr().err


def test_row_turns_keeps_a_tool_profile(tiny_model: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    other = {**_row(1, stop=True), "tools": json.dumps(get_toolset("upstream4").specs()[:3])}
    (tmp_path / "sft.jsonl").write_text(json.dumps(_row(0)) + "\n" + json.dumps(other) + "\n")
    four = "find_product,view_product_information,recommend_product,terminate"
    rc = _script().main([str(tmp_path / "sft.jsonl"), "--tokenizer", str(tiny_model), "--tools", four, "--json"])
    s = json.loads(capsys.readouterr().out)["files"][0]
    assert rc == 0 and s["off_profile"] == 1 and s["groups"]["all"]["rows"] == 1
    assert s["groups"]["all"]["callless"] == 0  # the callless row is the one off the profile
    rc = _script().main([str(tmp_path / "sft.jsonl"), "--tokenizer", str(tiny_model), "--tools", "find_product,nope"])
    err = capsys.readouterr().err
    assert rc == 2 and err.startswith("error: --tools") and "unknown tools nope" in err


# ── scripts/teacher_rows.py ─────────────────────────────────────────────────────────────────────────────────────


def test_teacher_rows_samples_the_stage_s_teacher_and_a_view_capped_one(train_world: Any, tiny_model: Path,
                                                                       tmp_path: Path,
                                                                       capsys: pytest.CaptureFixture[str]) -> None:
    script = load_script("teacher_rows")
    common = ["--corpus", str(train_world.corpus), "--catalog", str(train_world.catalog), "--recipe", "tiny",
              "--tokenizer", str(tiny_model), "--json"]
    assert script.main([*common, "--out", str(tmp_path / "plain")]) == 0
    plain = json.loads(capsys.readouterr().out)["figures"]
    assert script.main([*common, "--out", str(tmp_path / "capped"), "--teacher", "policy:expert?view=1"]) == 0
    capped = json.loads(capsys.readouterr().out)["figures"]
    for figures, out in ((plain, tmp_path / "plain"), (capped, tmp_path / "capped")):
        rows = [json.loads(line) for line in (out / "rows.jsonl").read_text().splitlines()]
        assert figures["rows"] == len(rows) == figures["samples"]["kept"] and figures["problems"] == 4
        assert figures["rows_fitting"] <= figures["rows"]
    assert plain["products_per_view_call"] > capped["products_per_view_call"]
    assert script.view_calls(rows)[0] == capped["view_calls"]
    stamp = (tmp_path / "capped" / "samples" / "runs.jsonl").stat().st_mtime_ns
    assert script.main([*common, "--out", str(tmp_path / "capped"), "--teacher", "policy:expert?view=1"]) == 0
    assert (tmp_path / "capped" / "samples" / "runs.jsonl").stat().st_mtime_ns == stamp  # the samples reused
    capsys.readouterr()
    assert script.main([*common, "--out", str(tmp_path / "capped")]) == 2  # another teacher in the same OUT
    err = capsys.readouterr().err
    assert err.startswith("error:") and "hint:" in err
    assert script.main([*common, "--out", str(tmp_path / "x"), "--teacher", "policy:expert?view=99"]) == 2
