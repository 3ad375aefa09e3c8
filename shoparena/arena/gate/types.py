"""Records of the submission gate: a violation, the report, and the gate's configuration (docs/arena.md §2.3).

Severities follow ORO's two classes plus the format class: ``security`` (banned imports and calls, file writes,
raw network: the sandbox would stop them, so a reduced cooldown), ``integrity`` (answer leakage: product ids,
tables, copied phrases, copied agents: the full cooldown) and ``format`` (too big, not UTF-8, does not parse, no
``agent_main``: reduced cooldown).
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

Severity = Literal["security", "integrity", "format"]
Cooldown = Literal["none", "reduced", "full"]
_FROZEN = ConfigDict(frozen=True, extra="forbid")


class Violation(BaseModel):
    """One finding, shaped like ORO's ``CodeAnalysisError.violations[]`` item."""

    model_config = _FROZEN

    rule: str
    """Rule id from :data:`shoparena.arena.gate.rules.RULES` (``banned_call``, ``product_id``, …)."""
    severity: Severity
    message: str
    """What was found, where, and why it is banned."""
    line: int
    """1-based source line (0 when the finding is about the whole file)."""


class GateReport(BaseModel):
    """The gate's verdict on one file: accepted iff there is no violation."""

    model_config = _FROZEN

    accepted: bool
    violations: list[Violation] = Field(default_factory=list)
    """Sorted by line, then rule id."""
    cooldown: Cooldown
    """``full`` with any integrity violation, ``reduced`` with only security / format ones, ``none`` if accepted."""
    similarity: float | None = None
    """Highest code similarity (0–1) against the released agents; None when none were given."""
    similar_to: str | None = None
    """Name of the released agent that similarity refers to."""

    @classmethod
    def from_violations(cls, violations: list[Violation], *, similarity: float | None = None,
                        similar_to: str | None = None) -> GateReport:
        ordered = sorted(violations, key=lambda v: (v.line, v.rule, v.message))
        severities = {v.severity for v in ordered}
        cooldown: Cooldown = "full" if "integrity" in severities else ("reduced" if severities else "none")
        return cls(accepted=not ordered, violations=ordered, cooldown=cooldown, similarity=similarity,
                   similar_to=similar_to)

    def public(self) -> dict[str, object]:
        """The CLI / API shape: ``{accepted, violations:[{rule, severity, message, line}], cooldown, …}``."""
        return self.model_dump()


class GateConfig(BaseModel):
    """Thresholds of the gate. Stored with each analysis report so a verdict can be explained later."""

    model_config = _FROZEN

    max_bytes: int = 1_000_000
    """ORO's upload limit (1 MB)."""
    similarity_threshold: float = 0.9
    """Similarity to a released agent at or above which the file is ``copied_agent``."""
    min_table_entries: int = 3
    """Entries of a literal container that must be bank-linked for ``answer_table`` / ``suite_dict``."""
    min_id_list: int = 3
    """Id-shaped literals in one container that make an ``id_list`` even without banks."""
