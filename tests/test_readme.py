"""The README is the package's user page (and its PyPI long description): it keeps to its budget, gives the two
commands of a fresh machine, and its exit-code table holds every code the errors carry."""

from __future__ import annotations

import re
from pathlib import Path

from shoparena import errors

ROOT = Path(__file__).resolve().parents[1]
README = (ROOT / "README.md").read_text(encoding="utf-8")


def test_readme_fits_its_budget() -> None:
    assert len(README.splitlines()) <= 300


def test_readme_first_screen_gives_the_two_commands() -> None:
    first_screen = "\n".join(README.splitlines()[:40])
    assert "make demo" in first_screen and "make test" in first_screen


def test_exit_code_table_lists_every_error_code() -> None:
    table = set(re.findall(r"^\|\s*(\d+)\s*\|", README, flags=re.M))
    codes = {str(cls.exit_code) for cls in vars(errors).values()
             if isinstance(cls, type) and issubclass(cls, errors.ShopArenaError)}
    assert codes, "no error classes found"
    assert codes <= table, f"exit codes missing from the README's table: {sorted(codes - table)}"
    assert {"0", "70", "130"} <= table


def test_readme_points_only_at_documents_that_exist() -> None:
    for link in re.findall(r"\]\((docs/[^)#]+)", README):
        assert (ROOT / link).exists(), link
