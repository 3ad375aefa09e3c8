"""System prompts per protocol and profile (docs/shoppingbench.md §5.1, §4.3, §5.3)."""

from __future__ import annotations

from typing import Any

from shoparena.catalog.search import SearchService
from shoparena.env.prompts import NATIVE, ORO_SFT, ROLLOUT, detect_task, system_prompt
from shoparena.env.runner import run_episode
from shoparena.env.tools import get_toolset
from tests.env._env_helpers import ScriptedPolicy, tags

TERMINATE = {"name": "terminate", "parameters": {"status": "success"}}


def test_detect_task_is_oros_keyword_heuristic_5_3() -> None:
    assert detect_task("My budget is only `425`, but I have a voucher") == "voucher"
    assert detect_task("Find a shop offering both a mouse and a keyboard") == "shop"
    assert detect_task("A shop near me? I want a violin bow") == "product"
    assert detect_task("violin bow") == "product"


def test_upstream_think_prompt_sections_5_1() -> None:
    text = get_toolset("upstream4").text()
    prompt = system_prompt(protocol="tags", profile="upstream4", toolkit_text=text)
    assert prompt == ROLLOUT.replace("<|toolkit_description|>", text)
    sections = [line for line in prompt.split("\n") if line.startswith("# ")]
    assert sections == ["# Role", "# Available Tools", "# Tools Rules", "# Output Format"]
    assert '1. Use the "tool_call_id" field to link tool calls to their results in `<obs>...</obs>`.' in prompt
    assert "7. Complete the task progressively without asking the user for external information." in prompt
    assert "Your output must always include `<think>...</think>`" in prompt and prompt.endswith("```")
    react = system_prompt(protocol="tags", profile="upstream4", toolkit_text=text, react=True)
    assert "Your output must only include `<tool_call>...</tool_call>` and nothing else." in react


def test_oro_prompt_adds_rule_6_strategy_and_task_block() -> None:
    text = get_toolset("oro7").text()
    voucher = system_prompt(protocol="tags", profile="oro7", toolkit_text=text, query="budget voucher")
    assert "6. **CRITICAL**: You MUST call `recommend_product` BEFORE calling `terminate`." in voucher
    assert "# Search Strategy (CRITICAL)" in voucher and voucher.endswith(
        "- NEVER terminate without recommending. If imperfect match, recommend best available.\n")
    assert "# Task: Find products within budget after voucher" in voucher
    assert "7. Name: calculate_voucher" in voucher


def test_native_prompts_and_override() -> None:
    assert system_prompt(protocol="native", profile="oro_sft4", toolkit_text="") == ORO_SFT
    assert system_prompt(protocol="native", profile="upstream4", toolkit_text="") == NATIVE
    assert "tool_call_id" not in NATIVE and "# Output Format" not in NATIVE
    assert system_prompt(protocol="tags", profile="upstream4", toolkit_text="T",
                         override="tools:\n<|toolkit_description|>") == "tools:\nT"


def test_oro_sft_prompt_is_the_released_one_4_3(data_dir: Any) -> None:
    import json

    row = json.loads((data_dir / "oro_samples" / "inputs.jsonl").read_text().splitlines()[0])
    assert row["messages"][0]["content"] == ORO_SFT


def test_oro7_tag_run_uses_oro_history_and_prompt(backend: SearchService) -> None:
    search = {"name": "find_product", "parameters": {"q": "violin bow", "page": 1}}
    pol = ScriptedPolicy([tags("s", [search]), tags("t", [TERMINATE])])
    run_episode("violin bow please", pol, backend, profile="oro7")
    system, user = pol.requests[1][0]
    assert "# Task: Find ONE product" in system["content"]
    assert user["content"].startswith(
        '# Dialogue Records History\n<user>violin bow please</user>\n\n<think>s</think>\n\n'
        '<tool_call>[{"name": "find_product", "parameters": {"q": "violin bow", "page": 1}}]</tool_call>\n\n<obs>')
