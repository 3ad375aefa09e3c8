"""``submit --check --banks DIR`` reads a saved bank set (``arena banks build``) through its seal: an intact one
feeds the integrity checks, an edited one is refused (exit 3 with a hint) instead of being used as it stands."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shoparena.tasks.banks import BankSet
from shoparena.tasks.loader import load_problems
from tests.gate import DATA, SAMPLES


@pytest.fixture(scope="module")
def bank_set(tmp_path_factory: pytest.TempPathFactory) -> Path:
    problems = [p for f in sorted((DATA / "shoppingbench").glob("*.jsonl")) for p in load_problems(f)]
    out = tmp_path_factory.mktemp("sealed") / "bank"
    BankSet.build(problems, seed=0).save(out)
    return out


def check(capsys: pytest.CaptureFixture[str], banks: Path) -> tuple[int, str, str]:
    from shoparena.cli import main

    try:
        main(["submit", "--check", str(SAMPLES / "leak_phrase.py"), "--banks", str(banks), "--json"])
        code: object = 0
    except SystemExit as exc:
        code = exc.code
    captured = capsys.readouterr()
    return (code if isinstance(code, int) else 1), captured.out, captured.err


def test_an_intact_bank_set_feeds_the_checks(bank_set: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = check(capsys, bank_set)
    assert code == 0, err
    assert json.loads(out)["accepted"] is False  # the sample quotes an upstream query the bank holds


def test_an_edited_bank_set_is_refused(bank_set: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    edited = tmp_path / "bank"
    edited.mkdir()
    for f in bank_set.iterdir():
        (edited / f.name).write_bytes(f.read_bytes())
    problems = next(edited.glob("problems-*.jsonl"))
    lines = problems.read_text(encoding="utf-8").splitlines()
    row = json.loads(lines[0])
    row["query"] = row["query"] + " (edited)"
    problems.write_text("\n".join([json.dumps(row), *lines[1:]]) + "\n", encoding="utf-8")
    code, out, err = check(capsys, edited)
    assert code == 3 and out == "", err
    assert err.startswith("error:") and "hash mismatch" in err and "hint:" in err
