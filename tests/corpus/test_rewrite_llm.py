"""The LLM rewriter against real offline backends (no mocks): the ``policy:careful`` model continuing the rewritten
trace as its own conversation, and the tiny local Qwen3 through the ``hf:`` backend with the instruct prompt. The
calls, observations and recommendation stay verbatim; every step the model gets wrong is a counted template
fallback; what the model does write is grounded."""

from __future__ import annotations

import importlib.util

import orjson
import pytest

from shoparena.corpus.rewrite import (
    LLMRewriter,
    TemplateRewriter,
    grounding_errors,
    plan_rewrite,
    rewrite_all,
)
from shoparena.corpus.rewrite import sources_for as sources
from shoparena.corpus.types import Rejection
from shoparena.errors import ConfigError
from shoparena.llm import Sampling
from tests.corpus.test_rewrite import assert_format, calls_of, pipeline, rows, to_row  # noqa: F401  (fixtures)


def test_policy_model_writes_grounded_reasoning_for_the_real_calls(pipeline):  # noqa: F811
    rewriter = LLMRewriter("policy:careful")
    assert rewriter.mode == "continue" and rewriter.name == "llm/1:continue:policy:careful"
    kept, report = rewrite_all(pipeline, rewriter)
    template, _ = rewrite_all(pipeline, TemplateRewriter())
    assert report.kept == len(pipeline) and not report.rejected
    notes = report.notes
    assert notes["llm_steps"] > 0 and notes["template_fallbacks"], notes  # both paths are exercised on real data
    assert notes["llm_steps"] + sum(notes["template_fallbacks"].values()) == notes["steps"]
    assert set(notes["template_fallbacks"]) <= {"call_mismatch", "empty", "not_prose", "markup", "echo",
                                                "too_long", "ungrounded", "backend_error"}
    assert rewriter.llm_steps == notes["llm_steps"]
    model_written = 0
    for orig, new, tmpl in zip(pipeline, kept, template, strict=True):
        assert calls_of(new) == calls_of(tmpl)  # the model changes nothing but the reasoning
        assert new.provenance["rewriter"] == rewriter.name and new.provenance["rewritten_from"] == orig.traj_id
        assert_format(new)
        plan = plan_rewrite(orig)
        assert not isinstance(plan, Rejection)
        figures = new.extras["rewrite"]
        assert figures["llm_steps"] + sum(figures["fallbacks"].values()) == figures["steps"]
        for k, (m, t) in enumerate(zip(new.assistant_messages(), tmpl.assistant_messages(), strict=True)):
            assert grounding_errors(m["reasoning_content"], sources(plan, k)) == []
            model_written += m["reasoning_content"] != t["reasoning_content"]
    assert model_written == notes["llm_steps"]
    again, _ = rewrite_all(pipeline, LLMRewriter("policy:careful"))
    assert [orjson.dumps(t.messages) for t in again] == [orjson.dumps(t.messages) for t in kept]


@pytest.mark.skipif(importlib.util.find_spec("torch") is None or importlib.util.find_spec("transformers") is None,
                    reason="the hf: backend needs torch and transformers")
def test_tiny_hf_qwen3_falls_back_per_step_and_counts_it(pipeline, tmp_path):  # noqa: F811
    from shoparena.llm.tiny import build_tiny_qwen3

    path = build_tiny_qwen3(tmp_path / "tiny")
    rewriter = LLMRewriter(f"hf:{path}", sampling=Sampling(temperature=0.0, max_tokens=16, seed=0))
    assert rewriter.mode == "instruct"
    kept, report = rewrite_all(pipeline[:1], rewriter)
    assert report.kept == 1
    notes = report.notes
    # a random-init model writes noise: every step must have fallen back to the template, and been counted
    assert notes["llm_steps"] + sum(notes["template_fallbacks"].values()) == notes["steps"] == len(
        kept[0].assistant_messages())
    template = TemplateRewriter().rewrite(pipeline[0])
    assert calls_of(kept[0]) == calls_of(template)
    assert_format(kept[0])


def test_an_unknown_model_uri_is_a_config_error():
    with pytest.raises(ConfigError):
        LLMRewriter("nosuch:model")


def test_an_unreachable_backend_is_a_counted_fallback_not_a_crash(pipeline, monkeypatch):  # noqa: F811
    monkeypatch.setenv("SHOPARENA_OPENAI_MAX_RETRIES", "0")
    monkeypatch.setenv("SHOPARENA_OPENAI_TIMEOUT", "2")
    rewriter = LLMRewriter("openai:http://127.0.0.1:9/v1/none", sampling=Sampling(max_tokens=8))
    new = rewriter.rewrite(pipeline[0])
    assert not isinstance(new, Rejection)
    assert set(new.extras["rewrite"]["fallbacks"]) == {"backend_error"}
    assert new.extras["rewrite"]["fallbacks"]["backend_error"] == new.extras["rewrite"]["steps"]
