"""Code similarity against released agents: robust to renaming and comments, deterministic, thresholded."""

from __future__ import annotations

import re
import subprocess
import sys

from shoparena.arena.gate import GateConfig, check_submission
from shoparena.arena.gate.similarity import fingerprint, most_similar
from tests.gate import BUILTIN_AGENTS, SAMPLES

REACT = (BUILTIN_AGENTS / "react.py").read_text()
ORO7 = (BUILTIN_AGENTS / "oro7.py").read_text()
PIPELINE = (BUILTIN_AGENTS / "pipeline.py").read_text()
CLEAN = (SAMPLES / "clean_agent.py").read_text()


def _disguise(src: str) -> str:
    """What a copier does: rename helpers and constants, new docstring and comments, other prompts."""
    out = re.sub(r"\b_ask\b", "_query_model", src).replace("CANDIDATES", "TOP_K").replace("_Recorder", "Log")
    out = out.replace('"""Built-in agent', '"""My own agent, written from scratch. Built-in', 1)
    out = out.replace("def _one_shop", "# try every shop\ndef _one_shop").replace("Done.", "Finished!")
    return out


def test_a_disguised_copy_is_rejected_as_copied_agent() -> None:
    report = check_submission(_disguise(PIPELINE), released={"winner-2026-05-01": PIPELINE})
    assert report.similarity == 1.0 and report.similar_to == "winner-2026-05-01"
    (v,) = report.violations
    assert v.rule == "copied_agent" and v.severity == "integrity" and report.cooldown == "full"
    assert "winner-2026-05-01" in v.message


def test_a_copy_padded_with_new_code_is_still_a_copy() -> None:
    padded = PIPELINE + "\n\n" + CLEAN.replace("def agent_main", "def other_main")
    report = check_submission(padded, released={"winner": PIPELINE})
    assert report.similarity is not None and report.similarity >= 0.9 and not report.accepted


def test_different_agents_are_not_similar() -> None:
    report = check_submission(CLEAN, released={"react": REACT, "pipeline": PIPELINE})
    assert report.accepted and report.similarity is not None and report.similarity < 0.2


def test_small_reference_agents_do_not_capture_agents_built_on_them() -> None:
    extended = REACT + "\n\n" + PIPELINE.replace("def agent_main", "def pipeline_main")
    assert check_submission(extended, released={"react": REACT}).accepted


def test_the_threshold_is_configurable_and_sequences_get_names() -> None:
    score, name = most_similar(ORO7, [PIPELINE, REACT])
    assert (score, name) == (1.0, "released[1]")  # react and oro7 differ only in strings
    relaxed = check_submission(ORO7, released=[REACT], config=GateConfig(similarity_threshold=1.01))
    assert relaxed.accepted and relaxed.similarity == 1.0


def test_fingerprints_are_deterministic_across_processes() -> None:
    code = ("import sys; sys.path.insert(0, '.'); from shoparena.arena.gate.similarity import fingerprint; "
            "print(sorted(fingerprint(open('shoparena/agents/pipeline.py').read()))[:20])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                         env={"PYTHONHASHSEED": "123"}, cwd=BUILTIN_AGENTS.parents[1]).stdout
    assert out.strip() == str(sorted(fingerprint(PIPELINE))[:20])


def test_unparsable_code_has_no_fingerprint() -> None:
    assert fingerprint("def (:") == frozenset()
