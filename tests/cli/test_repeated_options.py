"""A single-valued option given twice is refused; options declared to repeat, and values that merely look like
options, are not.

Click keeps the last value of a repeated single-valued option, so ``--model A --model B`` would run B alone and
report success. The check parses with each command's own parser, run here over the real command tree.
"""

from __future__ import annotations

from typing import Any

import pytest
import typer

from shoparena.cli import app, main
from shoparena.cli._common import repeated_option


def _command(*path: str) -> Any:
    command = typer.main.get_command(app)
    for name in path:
        command = command.commands[name]
    return command


@pytest.mark.parametrize(("path", "args", "flag"), [
    (("run",), ["--model", "policy:expert", "--model", "policy:random"], "--model"),
    (("run",), ["--seed", "1", "--seed=1"], "--seed"),
    (("train",), ["recipe.yaml", "--out", "a", "--out", "b"], "--out"),
    (("arena", "simulate"), ["--days", "2", "--days", "3"], "--days"),
    (("submit",), ["--check", "agent.py", "--no-check"], "--check"),
])
def test_a_single_valued_option_given_twice_is_found(path: tuple[str, ...], args: list[str], flag: str) -> None:
    found = repeated_option(_command(*path), args)
    assert found is not None and found[0] == flag, found


@pytest.mark.parametrize(("path", "args"), [
    (("evaluate",), ["--model", "a=policy:expert", "--model", "b=policy:random"]),  # declared to repeat
    (("score",), ["--k", "1", "--k", "2"]),
    (("run",), ["--model", "--model"]),  # the second is the first one's value
    (("submit",), ["--check", "--check", "agent.py"]),  # the same flag twice says the same thing
    (("run",), ["--bogus", "--seed", "1", "--seed", "2"]),  # the parse stops at --bogus: the command reports it
])
def test_repeatable_options_and_option_like_values_pass(path: tuple[str, ...], args: list[str]) -> None:
    assert repeated_option(_command(*path), args) is None


def test_main_refuses_a_repeat_with_one_error_line_and_the_usage_code(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--model", "policy:expert", "--agent", "react", "--model", "policy:random"])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    errors = [line for line in err.splitlines() if line.startswith("error:")]
    assert errors == [errors[0]] and "--model" in errors[0], err
    assert "hint: give --model once" in err and "shoparena run --help" in err


def test_an_unknown_option_is_still_reported_by_the_command(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["run", "--bogus", "--seed", "1", "--seed", "2"])
    assert exit_info.value.code == 2
    assert "No such option: --bogus" in capsys.readouterr().err
