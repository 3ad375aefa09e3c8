"""A turn cut at the token cap is marked cut, end to end: the ``hf:`` backend (serial and batched) and the
``llamacpp:`` backend (slots and batched) mark a completion ``truncated`` when generation ran into its budget and not
when it ended at an end token or a stop string; ``serve`` answers such a turn with ``finish_reason: "length"``; the
``openai:`` backend reads that back; the gateway logs it on the call record, and records without it dump as before.

What "cut" means is checked against behaviour, not against the rule the backends share: a turn is cut at cap ``C``
exactly when the same greedy turn with a larger cap goes on past ``C`` tokens; a turn that ended by itself gives the
same text and token count under the larger cap. The models are real and tiny: the tiny Qwen3 (its greedy decoding
prints one token forever, so a small cap surely cuts it) and sharpened copies (tests/sharp.py) that name a token
they emit as an extra end token, so some turns end early and others run to the cap."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest

pytest.importorskip("transformers")

from fastapi import FastAPI
from fastapi.responses import JSONResponse

from shoparena._http import BackgroundServer
from shoparena.llm.gateway import CallRecord, Gateway, Limits, dump_record, log_sha256
from shoparena.llm.gateway.calllog import read_call_log
from shoparena.llm.hf_backend import HFBackend
from shoparena.llm.openai_backend import OpenAIBackend
from shoparena.llm.serve import create_app
from shoparena.llm.types import Sampling, chat_sync
from tests.llm.conversations import CONVERSATIONS, TOOLS, USER

CAP = 12
MORE = 40


@pytest.fixture(scope="module")
def sharp_qwen3(tiny_qwen3: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny Qwen3 with its matrices redrawn (tests/sharp.py) and ``%`` (which its continuations emit at varied
    positions) as an extra end token."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from tests.sharp import redraw

    out = tmp_path_factory.mktemp("sharp") / "sharp-qwen3"
    model = redraw(AutoModelForCausalLM.from_pretrained(tiny_qwen3, local_files_only=True))
    tokenizer = AutoTokenizer.from_pretrained(tiny_qwen3, local_files_only=True)
    model.generation_config.eos_token_id = [tokenizer.convert_tokens_to_ids(t)
                                            for t in ("<|im_end|>", "<|endoftext|>", "%")]
    model.save_pretrained(out)
    tokenizer.save_pretrained(out)
    return out


def _check_against_a_larger_cap(backend: Any) -> list[bool]:
    """Each conversation's turn at cap ``CAP`` is marked cut exactly when the turn at cap ``MORE`` goes on past
    ``CAP`` tokens, and one that ended by itself is the same turn under the larger cap; returns the marks."""
    marks = []
    for conversation in CONVERSATIONS:
        short = chat_sync(backend, conversation, TOOLS, Sampling(max_tokens=CAP))
        long = chat_sync(backend, conversation, TOOLS, Sampling(max_tokens=MORE))
        assert short.truncated is not None and long.truncated is not None
        went_on = long.usage.completion_tokens > CAP
        assert short.truncated is went_on, (conversation, short, long)
        if not went_on:
            assert (short.content, short.reasoning_content, short.usage) == \
                (long.content, long.reasoning_content, long.usage)
            assert long.truncated is False
        else:
            assert short.usage.completion_tokens == CAP
        marks.append(short.truncated)
    return marks


@pytest.mark.parametrize("mode", ["serial", "batched"])
def test_hf_marks_a_turn_cut_at_the_cap_and_not_one_that_ended(sharp_qwen3: Path, mode: str) -> None:
    backend = HFBackend(sharp_qwen3, device="cpu", max_new_tokens=64, mode=mode)
    try:
        marks = _check_against_a_larger_cap(backend)
    finally:
        backend.close()
    assert True in marks and False in marks  # both kinds of turn were seen


@pytest.mark.parametrize("mode", ["serial", "batched"])
def test_hf_four_token_cap_cuts_and_a_stop_string_does_not(tiny_qwen3: Path, mode: str) -> None:
    """The tiny Qwen3 prints one token forever: under ``max_new_tokens=4`` every turn is cut; the same turn ended
    by a stop string (the text of that token) is not cut, whatever the cap."""
    backend = HFBackend(tiny_qwen3, device="cpu", max_new_tokens=4, mode=mode)
    try:
        cut = chat_sync(backend, USER, None, Sampling())
        assert cut.truncated is True and cut.usage.completion_tokens == 4
        token_text = backend.generate(USER, None, Sampling(max_tokens=1))[0]
        assert token_text
        stopped = chat_sync(backend, USER, None, Sampling(stop=[token_text]))
        assert stopped.truncated is False and stopped.usage.completion_tokens < 4
        at_cap = chat_sync(backend, USER, None, Sampling(max_tokens=1, stop=[token_text]))
        assert at_cap.truncated is False  # the stop string ended it on its last allowed token
    finally:
        backend.close()
    assert "truncated" not in cut.model_dump()  # never dumped, like parse_notes


@pytest.fixture(scope="module")
def sharp_gguf(prepared: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The prepared tiny checkpoint sharpened (tests/sharp.py), with an extra end token: the token its greedy
    continuation of the first conversation samples fourth, so that turn ends early and others run on."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from shoparena.llm.hf_backend import render_prompt
    from tests.sharp import sharpened_copy

    out = sharpened_copy(prepared, tmp_path_factory.mktemp("sharp-gguf") / "sharp")
    torch = pytest.importorskip("torch")
    tokenizer = AutoTokenizer.from_pretrained(out, local_files_only=True)
    model = AutoModelForCausalLM.from_pretrained(out, local_files_only=True).eval()
    ids = tokenizer(render_prompt(tokenizer, CONVERSATIONS[0], TOOLS), add_special_tokens=False,
                    return_tensors="pt")["input_ids"]
    with torch.no_grad():
        new = model.generate(ids, max_new_tokens=4, do_sample=False)[0, ids.shape[1]:].tolist()
    config_file = out / "generation_config.json"
    config = json.loads(config_file.read_text(encoding="utf-8")) if config_file.is_file() else {}
    eos = config.get("eos_token_id", model.config.eos_token_id)
    config["eos_token_id"] = [*(eos if isinstance(eos, list) else [eos] if eos is not None else []), new[3]]
    config_file.write_text(json.dumps(config), encoding="utf-8")
    return out


@pytest.mark.parametrize("mode", ["slots", "batched"])
def test_llamacpp_marks_a_turn_cut_at_the_cap_and_not_one_that_ended(sharp_gguf: Path, prepared: Path,
                                                                     mode: str) -> None:
    pytest.importorskip("llama_cpp")
    from shoparena.llm.llamacpp_backend import LlamaCppBackend

    backend = LlamaCppBackend(sharp_gguf, dtype="F32", threads=1, mode=mode, max_new_tokens=64)
    try:
        marks = _check_against_a_larger_cap(backend)
    finally:
        backend.close()
    assert marks[0] is False and True in marks
    plain = LlamaCppBackend(prepared, dtype="F32", threads=1, mode=mode, max_new_tokens=4)
    try:  # the unsharpened model prints one token forever: cut at 4, and not cut when a stop string ends it
        cut = chat_sync(plain, USER, None, Sampling())
        assert cut.truncated is True and cut.usage.completion_tokens == 4
        token_text = plain.generate(USER, None, Sampling(max_tokens=1))[0]
        stopped = chat_sync(plain, USER, None, Sampling(stop=[token_text]))
        assert stopped.truncated is False and stopped.usage.completion_tokens < 4
    finally:
        plain.close()


async def _openai_turns(base_url: str, model: str, samplings: list[Sampling]) -> list[Any]:
    async with OpenAIBackend(base_url, model, max_retries=0) as backend:
        return [await backend.chat(USER, None, s) for s in samplings]


def test_serve_answers_length_and_the_openai_backend_reads_it(tiny_qwen3: Path) -> None:
    backend = HFBackend(tiny_qwen3, device="cpu", max_new_tokens=4, mode="serial")
    token_text = backend.generate(USER, None, Sampling(max_tokens=1))[0]
    with BackgroundServer(create_app(backend)) as srv:
        raw = httpx.post(f"{srv.url}/v1/chat/completions", timeout=30,
                         json={"model": backend.name, "messages": USER, "max_tokens": 100}).json()
        cut, stopped = asyncio.run(_openai_turns(srv.url + "/v1", backend.name, [
            Sampling(max_tokens=100), Sampling(max_tokens=100, stop=[token_text])]))
    # the backend's cap (4) cut the turn, not the request's max_tokens (100): no guess could have told
    assert raw["choices"][0]["finish_reason"] == "length" and raw["usage"]["completion_tokens"] == 4
    assert cut.truncated is True and stopped.truncated is False


def test_openai_backend_without_a_finish_reason_leaves_it_unknown() -> None:
    app = FastAPI()
    reasons = iter(["length", "stop", None])

    @app.post("/v1/chat/completions")
    async def completions() -> JSONResponse:
        choice: dict[str, Any] = {"index": 0, "message": {"role": "assistant", "content": "Recommending 42."}}
        reason = next(reasons)
        if reason is not None:
            choice["finish_reason"] = reason
        return JSONResponse({"id": "x", "object": "chat.completion", "created": 0, "model": "m",
                             "choices": [choice]})

    with BackgroundServer(app) as srv:
        got = asyncio.run(_openai_turns(srv.url + "/v1", "m", [Sampling()] * 3))
    assert [m.truncated for m in got] == [True, False, None]


def test_gateway_logs_the_cut_and_old_records_dump_as_before(tiny_qwen3: Path, tmp_path: Path) -> None:
    backend = HFBackend(tiny_qwen3, device="cpu", max_new_tokens=4, mode="serial")
    token_text = backend.generate(USER, None, Sampling(max_tokens=1))[0]
    gateway = Gateway(None, {"tiny": backend}, limits=Limits.unlimited())
    run = gateway.open_run("run-cut", problem_id="p1", models=["tiny"])
    with gateway.serve() as srv, httpx.Client(base_url=srv.url, timeout=60,
                                              headers={"Authorization": f"Bearer {run.token}"}) as client:
        answers = [client.post("/inference/chat/completions", json=body).json() for body in (
            {"model": "tiny", "messages": USER},
            {"model": "tiny", "messages": USER, "stop": [token_text]})]
        streamed = client.post("/inference/chat/completions", json={"model": "tiny", "messages": USER,
                                                                    "stream": True})
        refused = client.post("/inference/chat/completions", json={"model": "other", "messages": USER})
    assert answers[0]["choices"][0]["finish_reason"] == "length"
    assert answers[1]["choices"][0]["finish_reason"] == "stop" and refused.status_code == 403
    chunks = [json.loads(line[6:]) for line in streamed.text.splitlines()
              if line.startswith("data: {")]
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]] == [None, "length"]
    cut, stopped, _, refusal = gateway.close_run(run.token)
    assert (cut.truncated, stopped.truncated, refusal.truncated) == (True, False, None)
    lines = [orjson.loads(dump_record(r)) for r in (cut, stopped, refusal)]
    assert lines[0]["truncated"] is True and lines[1]["truncated"] is False and "truncated" not in lines[2]
    assert "truncated" not in refusal.model_dump(mode="json")  # the validator's path to calls.jsonl, too

    # a line written before the field: it validates, and dumps (so hashes) to the very same bytes
    old = {**lines[0]}
    del old["truncated"]
    old_bytes = orjson.dumps(old) + b"\n"
    (tmp_path / "calls.jsonl").write_bytes(old_bytes)
    (record,) = read_call_log(tmp_path / "calls.jsonl")
    assert record.truncated is None and dump_record(record) == old_bytes
    assert log_sha256([record]) == log_sha256([CallRecord.model_validate(old)])
    assert dump_record(CallRecord.model_validate({**old, "truncated": True})) != old_bytes
