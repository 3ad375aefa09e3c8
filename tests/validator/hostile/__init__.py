"""Hostile single-file agents (test data for the sandbox containment tests).

Each file is a real ``agent_main`` agent that attacks the sandbox and reports what it managed in its dialogue,
so a test can assert on it. They take their targets from the problem's ``query`` (a JSON object), since a
sanitised problem is all an agent ever gets. They are loaded by path, never imported by the test suite.
"""

from pathlib import Path

HOSTILE = Path(__file__).resolve().parent


def agent(name: str) -> Path:
    """The path of hostile agent ``name`` (``net``, ``snoop``, ``forkbomb``, …)."""
    return HOSTILE / f"{name}.py"
