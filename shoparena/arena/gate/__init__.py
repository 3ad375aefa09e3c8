"""The submission gate: format checks, an AST rule engine with ORO's severities, bank-aware integrity checks and
code similarity against released agents (docs/arena.md §2.3; ``docs/arena-design.md`` §2).

    from shoparena.arena.gate import PhraseIndex, check_submission

    index = PhraseIndex.from_problems(all_bank_problems)       # once
    report = check_submission(code, phrases=index, released={"v1-winner": src})
    report.accepted, report.cooldown, report.violations        # {rule, severity, message, line}

The gate is the first wall; the sandbox (``arena.sandbox``) is the second: the gate aims to reject every known
evasion with a precise message, the sandbox contains whatever static analysis cannot see.
"""

from shoparena.arena.gate.check import check_submission
from shoparena.arena.gate.phrases import PhraseIndex
from shoparena.arena.gate.rules import RULES, Rule
from shoparena.arena.gate.types import GateConfig, GateReport, Violation

__all__ = ["RULES", "GateConfig", "GateReport", "PhraseIndex", "Rule", "Violation", "check_submission"]
