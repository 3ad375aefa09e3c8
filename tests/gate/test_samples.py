"""Whole files: the built-in agents and the clean sample pass with every bank; leaky and escaping samples and
the sandbox's hostile agents are rejected with the right severity."""

from __future__ import annotations

from pathlib import Path

import pytest

from shoparena.arena.gate import check_submission
from tests.gate import BUILTIN_AGENTS, SAMPLES, bank_index, rules

HOSTILE = Path(__file__).resolve().parents[1] / "validator" / "hostile"


@pytest.mark.parametrize("name", ["react", "oro7", "pipeline"])
def test_builtin_agents_are_accepted_with_every_bank(name: str) -> None:
    report = check_submission((BUILTIN_AGENTS / f"{name}.py").read_bytes(), phrases=bank_index())
    assert report.accepted, report.violations
    assert report.cooldown == "none"


def test_the_clean_sample_is_accepted() -> None:
    report = check_submission((SAMPLES / "clean_agent.py").read_text(), phrases=bank_index())
    assert report.accepted, report.violations


@pytest.mark.parametrize(("name", "expected"), [
    ("leak_ids.py", {"product_id", "id_list", "answer_table"}),
    ("leak_query_table.py", {"answer_table", "product_id"}),
    ("leak_base64.py", {"encoded_id", "obfuscation_import"}),
    ("leak_phrase.py", {"verbatim_phrase"}),
    ("leak_suite_dict.py", {"suite_dict"}),
])
def test_leaky_samples_are_rejected_with_integrity(name: str, expected: set[str]) -> None:
    report = check_submission((SAMPLES / name).read_text(), phrases=bank_index())
    assert expected <= rules(report), report.violations
    assert report.cooldown == "full"
    assert all(v.severity == "integrity" for v in report.violations)


def test_leaky_samples_without_banks_keep_only_structural_findings() -> None:
    assert rules(check_submission((SAMPLES / "leak_ids.py").read_text())) == {"id_list"}
    assert rules(check_submission((SAMPLES / "leak_base64.py").read_text())) == {"obfuscation_import"}
    assert check_submission((SAMPLES / "leak_phrase.py").read_text()).accepted


def test_the_escape_sample_is_rejected_for_each_of_its_tricks() -> None:
    report = check_submission((SAMPLES / "escape_agent.py").read_text())
    found = {(v.rule, v.line) for v in report.violations}
    assert {("dynamic_access", 10), ("banned_call", 11), ("banned_import", 12), ("banned_import", 13),
            ("raw_network", 14), ("file_write", 25)} <= found
    assert report.cooldown == "reduced"


@pytest.mark.parametrize(("name", "rule"), [
    ("forkbomb", "banned_import"), ("membomb", "banned_import"), ("net", "raw_network"),
    ("shell", "banned_import"), ("snoop", "banned_import"), ("writes", "file_write"),
])
def test_the_sandbox_hostile_agents_are_stopped_at_the_gate(name: str, rule: str) -> None:
    report = check_submission((HOSTILE / f"{name}.py").read_text())
    assert rule in rules(report) and report.cooldown == "reduced"


def test_well_behaved_hostile_fixtures_pass() -> None:
    for name in ("gateway", "loop"):
        assert check_submission((HOSTILE / f"{name}.py").read_text()).accepted, name
