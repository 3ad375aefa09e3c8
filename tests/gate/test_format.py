"""Format rules: size, UTF-8, parse, agent_main; report shape and cooldown mapping."""

from __future__ import annotations

import subprocess
import sys

from shoparena.arena.gate import RULES, GateConfig, GateReport, Violation, check_submission
from tests.gate import agent, rules


def test_a_minimal_agent_is_accepted() -> None:
    report = check_submission(agent("import json"))
    assert report.accepted and report.violations == [] and report.cooldown == "none"
    assert report.similarity is None and report.similar_to is None


def test_too_large_is_rejected_before_parsing() -> None:
    code = agent("X = 1") + "#" * 1_000_001
    report = check_submission(code)
    assert [(v.rule, v.severity) for v in report.violations] == [("too_large", "format")]
    assert report.cooldown == "reduced" and "1,000,000" in report.violations[0].message
    assert check_submission(code, config=GateConfig(max_bytes=2_000_000)).accepted


def test_not_utf8_reports_the_line() -> None:
    raw = b"import json\n\nX = '\xff'\n\ndef agent_main(p):\n    return []\n"
    report = check_submission(raw)
    assert [(v.rule, v.line) for v in report.violations] == [("not_utf8", 3)]


def test_a_utf8_bom_is_fine() -> None:
    assert check_submission(b"\xef\xbb\xbf" + agent("import re").encode()).accepted


def test_syntax_error_reports_its_line() -> None:
    report = check_submission("import json\n\ndef agent_main(p):\n    return [\n")
    (violation,) = report.violations
    assert violation.rule == "syntax_error" and violation.severity == "format" and violation.line == 4
    assert report.cooldown == "reduced"


def test_null_bytes_are_a_syntax_error() -> None:
    assert rules(check_submission("x = 1\x00\ndef agent_main(p): return []\n")) == {"syntax_error"}


def test_too_deeply_nested_code_is_rejected_not_crashing() -> None:
    for code in ("x = a" + ".b" * 400, "x = f" + "(1)" * 400, "x = a" + ".b" * 60_000):
        report = check_submission(code + "\n\ndef agent_main(p):\n    return []\n")
        assert [(v.rule, v.severity) for v in report.violations] == [("too_complex", "format")]
        assert report.cooldown == "reduced"


def test_missing_agent_main() -> None:
    report = check_submission("def main(problem_data):\n    return []\n")
    assert [(v.rule, v.line) for v in report.violations] == [("missing_agent_main", 0)]


def test_agent_main_by_assignment_import_or_inside_if() -> None:
    assert check_submission("def _run(p):\n    return []\n\nagent_main = _run\n").accepted
    assert check_submission("from shoparena.sdk import find_product as agent_main\n").accepted
    assert check_submission("import sys\nif sys.version_info >= (3, 10):\n    def agent_main(p):\n"
                            "        return []\n").accepted


def test_a_nested_agent_main_does_not_count() -> None:
    code = "class A:\n    def agent_main(self, p):\n        return []\n"
    assert rules(check_submission(code)) == {"missing_agent_main"}


def test_cooldown_full_with_any_integrity_violation() -> None:
    sec = Violation(rule="banned_call", severity="security", message="m", line=3)
    integ = Violation(rule="id_list", severity="integrity", message="m", line=1)
    assert GateReport.from_violations([sec]).cooldown == "reduced"
    report = GateReport.from_violations([sec, integ])
    assert report.cooldown == "full" and not report.accepted
    assert [v.line for v in report.violations] == [1, 3]  # sorted by line


def test_public_shape() -> None:
    out = check_submission("import subprocess\n").public()
    assert set(out) == {"accepted", "violations", "cooldown", "similarity", "similar_to"}
    assert all(set(v) == {"rule", "severity", "message", "line"} for v in out["violations"])


def test_importing_the_package_registers_every_rule() -> None:
    code = "from shoparena.arena.gate import RULES; print(sorted(RULES))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == str(sorted(RULES))


def test_every_rule_has_a_severity_and_summary() -> None:
    assert {"too_large", "not_utf8", "syntax_error", "too_complex", "missing_agent_main", "banned_import", "banned_call",
            "raw_network", "file_write", "dynamic_access", "product_id", "encoded_id", "answer_table", "id_list",
            "suite_dict", "verbatim_phrase", "obfuscation_import", "copied_agent"} <= set(RULES)
    assert all(r.severity in ("security", "integrity", "format") and r.summary for r in RULES.values())
