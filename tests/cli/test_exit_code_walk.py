"""Every command walked with bad input: bad option values, missing files, malformed files, hung servers. Each
answer is the README's exit code ("Exit codes"), one ``error:`` line with a ``hint:`` line under it, and no
traceback; values that can be checked at parsing (seeds, timestamps, sandbox names, recipes) are refused before
anything is created.

The cases run in-process through the console entry point :func:`shoparena.cli.main` (its exception handling is
what is under test; typer's ``CliRunner`` would bypass it), a few seconds in all; the commands that serve
forever once their input is good (``web``, ``serve``, ``catalog serve``) and the ones pointed at a model server
that accepts connections and never answers run as real subprocesses with a timeout, so that a missed refusal
fails instead of hanging. The fixtures are :mod:`tests.cli.test_bad_input`'s (reused,
not rebuilt), whose own cases are not repeated here.
"""

from __future__ import annotations

import socket
from collections.abc import Iterator
from pathlib import Path
from typing import NamedTuple

import pytest

from tests.cli.test_bad_input import BACKEND, DATA_ERROR, NOT_FOUND, USAGE, Fx, fx, shoparena  # noqa: F401
from tests.hung_server import hung_server

BIG = "1" + "0" * 30  # 10**30: past any 64-bit seed or timestamp


class Walk(NamedTuple):
    """Fixture paths of the walk: ``f`` the shared fixture directory, ``hung`` an openai: base URL that accepts
    connections and never answers, ``closed`` a loopback port nobody listens on."""

    f: Path
    hung: str
    closed: int


@pytest.fixture(scope="module")
def walk(fx: Fx) -> Iterator[Walk]:  # noqa: F811
    f = fx.root
    (f / "bad_corpus").mkdir(exist_ok=True)
    (f / "bad_corpus" / "manifest.json").write_text("{not json", encoding="utf-8")
    (f / "bad_recipe.yaml").write_text("stages: [sft\n  base: {", encoding="utf-8")
    (f / "empty.jsonl").write_text("", encoding="utf-8")
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        closed = s.getsockname()[1]
    with hung_server("silent") as hung:
        yield Walk(f, hung, closed)


class Case(NamedTuple):
    name: str
    args: str
    """Split on spaces after ``{f}``, ``{hung}``, ``{closed}`` and ``{big}`` are filled in."""
    code: int
    absent: str | None = None
    """A path (under ``{f}``) the refused command must not have created."""


PROBLEMS = "--problems {f}/problems.jsonl"
RUN = "run --catalog {f}/cat " + PROBLEMS + " --agent react"
EVAL = "evaluate --catalog {f}/cat " + PROBLEMS + " --out {f}/ev"
VALIDATE = "validate --catalog {f}/cat " + PROBLEMS + " --agent react --sandbox process --allow-non-hermetic"
STORE = "--store sqlite:///{f}/store.db"

CASES = [
    # seeds outside 0 … 2**64-1, on every command that takes one
    *(Case(f"seed {v} {cmd.split(' --')[0]}", f"{cmd} --seed {v}", USAGE, absent) for v in ("-5", "{big}")
      for cmd, absent in (
          ("arena banks build " + PROBLEMS + " --out {f}/wb", "wb"),
          ("arena simulate --out {f}/ws", "ws"),
          ("arena validator --api http://127.0.0.1:{closed} --catalog {f}/cat " + STORE, None),
          ("catalog generate --out {f}/wc", "wc"),
          ("corpus build --out {f}/wcorpus --from sqlite:///{f}/store.db", "wcorpus"),
          ("demo --out {f}/wdemo", "wdemo"),
          (EVAL + " --model policy:expert", "ev"),
          ("judge audit " + STORE, None),
          ("loop --out {f}/wl", "wl"),
          ("problems generate --catalog {f}/cat --out {f}/wp.jsonl", "wp.jsonl"),
          ("reproduce table1 --profile smoke --out {f}/wr", "wr"),
          (RUN, None),
          ("score --catalog {f}/cat " + PROBLEMS + " --rollouts {f}/rollouts.jsonl", None),
          (VALIDATE, None),
      )),
    # timestamps past what a store holds
    Case("since past int64 export", "store export " + STORE + " --out {f}/wx.jsonl --since {big}", USAGE, "wx.jsonl"),
    Case("until past int64 export", "store export " + STORE + " --out {f}/wx.jsonl --until {big}", USAGE, "wx.jsonl"),
    Case("since past int64 corpus", "corpus build --out {f}/wc2 --from sqlite:///{f}/store.db --since {big}", USAGE,
         "wc2"),
    Case("since past int64 rescore", "store rescore " + STORE + " --catalog {f}/cat " + PROBLEMS + " --since {big} "
         "--dry-run", USAGE),
    Case("since not a date", "store export " + STORE + " --out {f}/wx.jsonl --since yesterday", USAGE, "wx.jsonl"),
    # sandboxes and recipes: refused before the arena starts, nothing created
    Case("loop sandbox bogus", "loop --out {f}/wl2 --sandbox bogus", USAGE, "wl2"),
    Case("simulate sandbox bogus", "arena simulate --out {f}/ws2 --sandbox bogus", USAGE, "ws2"),
    Case("validate sandbox bogus", VALIDATE.replace("process", "bogus"), USAGE),
    Case("loop recipe without its base", "loop --out {f}/wl3 --recipe cpu-mini", NOT_FOUND, "wl3"),
    Case("loop no such recipe", "loop --out {f}/wl4 --recipe {f}/nowhere.yaml", NOT_FOUND, "wl4"),
    Case("loop malformed recipe", "loop --out {f}/wl5 --recipe {f}/bad_recipe.yaml", USAGE, "wl5"),
    Case("train no such recipe", "train {f}/nowhere.yaml --corpus {f}/bad_corpus --out {f}/wt", NOT_FOUND, "wt"),
    Case("train malformed recipe", "train {f}/bad_recipe.yaml --corpus {f}/bad_corpus --out {f}/wt", USAGE, "wt"),
    Case("train missing corpus", "train tiny --corpus {f}/nowhere --out {f}/wt", NOT_FOUND, "wt"),
    Case("train malformed corpus", "train tiny --corpus {f}/bad_corpus --out {f}/wt", DATA_ERROR, "wt"),
    Case("train recipe base missing", "train cpu-mini --corpus {f}/nowhere --out {f}/wt", NOT_FOUND, "wt"),
    # model servers: refused, unreachable, hung
    Case("run unreachable model", RUN + " --model openai:http://127.0.0.1:{closed}/v1/m", BACKEND),
    Case("run unknown model scheme", RUN + " --model bogus:x", USAGE),
    Case("evaluate missing hf model", EVAL + " --model hf:{f}/nowhere", NOT_FOUND),
    Case("judge audit timeout 0", "judge audit " + STORE + " --timeout 0", USAGE),
    Case("judge audit timeout nan", "judge audit " + STORE + " --timeout nan", USAGE),
    # missing files and directories
    Case("banks build missing problems", "arena banks build --problems {f}/nowhere.jsonl --out {f}/wb2", NOT_FOUND,
         "wb2"),
    Case("banks stats missing", "arena banks stats {f}/nowhere", NOT_FOUND),
    Case("banks verify missing", "arena banks verify {f}/nowhere", NOT_FOUND),
    Case("catalog info missing", "catalog info --catalog {f}/nowhere", NOT_FOUND),
    Case("catalog import missing", "catalog import {f}/nowhere.jsonl --out {f}/wi", NOT_FOUND, "wi"),
    Case("corpus show missing", "corpus show {f}/nowhere", NOT_FOUND),
    Case("corpus show not a corpus", "corpus show {f}/a_dir", NOT_FOUND),
    Case("corpus build missing store", "corpus build --out {f}/wc3 --from sqlite:///{f}/nowhere.db", NOT_FOUND),
    Case("corpus build missing rollouts", "corpus build --out {f}/wc4 --from-rollouts {f}/nowhere.jsonl "
         "--catalog {f}/cat " + PROBLEMS, NOT_FOUND),
    Case("evaluate missing catalog", EVAL.replace("{f}/cat", "{f}/nowhere") + " --model policy:expert", NOT_FOUND),
    Case("evaluate missing split", EVAL.replace(PROBLEMS, "--split {f}/nowhere:eval") + " --model policy:expert",
         NOT_FOUND),
    Case("run missing problems", RUN.replace("problems.jsonl", "nowhere.jsonl"), NOT_FOUND),
    Case("score missing rollouts", "score --catalog {f}/cat " + PROBLEMS + " --rollouts {f}/nowhere.jsonl",
         NOT_FOUND),
    Case("judge audit missing store", "judge audit --store sqlite:///{f}/nowhere.db", NOT_FOUND),
    Case("rescore missing store", "store rescore --store sqlite:///{f}/nowhere.db --catalog {f}/cat " + PROBLEMS
         + " --dry-run", NOT_FOUND),
    Case("rescore missing catalog", "store rescore " + STORE + " --catalog {f}/nowhere " + PROBLEMS + " --dry-run",
         NOT_FOUND),
    Case("rescore missing problems", "store rescore " + STORE + " --catalog {f}/cat --problems {f}/nowhere.jsonl "
         "--dry-run", NOT_FOUND),
    Case("submit missing agent", "submit --check {f}/nowhere.py", NOT_FOUND),
    Case("problems generate missing catalog", "problems generate --catalog {f}/nowhere --out {f}/wp2.jsonl",
         NOT_FOUND, "wp2.jsonl"),
    Case("validate missing agent", VALIDATE.replace("--agent react", "--agent {f}/nowhere.py"), NOT_FOUND),
    Case("models prepare unknown", "models prepare bogus-model --out {f}/wm", USAGE, "wm"),
    Case("reproduce unknown profile", "reproduce table1 --profile bogus --out {f}/wr2", USAGE, "wr2"),
    # malformed files
    Case("corpus show malformed", "corpus show {f}/bad_corpus", DATA_ERROR),
    Case("banks build random bytes", "arena banks build --problems {f}/garbage.bin --out {f}/wb3", DATA_ERROR, "wb3"),
    Case("banks stats a file", "arena banks stats {f}/garbage.bin", NOT_FOUND),
    Case("evaluate random-bytes problems", EVAL.replace("problems.jsonl", "garbage.bin") + " --model policy:expert",
         DATA_ERROR),
    Case("run no valid problem", RUN.replace("problems.jsonl", "no_valid_line.jsonl"), DATA_ERROR),
    Case("corpus build random-bytes rollouts", "corpus build --out {f}/wc5 --from-rollouts {f}/garbage.bin "
         "--catalog {f}/cat " + PROBLEMS, DATA_ERROR),
    Case("corpus build random-bytes store", "corpus build --out {f}/wc6 --from sqlite:///{f}/random.db", DATA_ERROR),
    Case("judge audit foreign store", "judge audit --store sqlite:///{f}/foreign.db", DATA_ERROR),
    Case("validate agent not a .py", VALIDATE.replace("--agent react", "--agent {f}/garbage.bin"), NOT_FOUND),
    # option values
    Case("arena validator bad api URL", "arena validator --api notaurl --catalog {f}/cat " + STORE, USAGE),
    Case("arena validator bad api port", "arena validator --api http://127.0.0.1:99999 --catalog {f}/cat " + STORE,
         USAGE),
    Case("arena validator unreachable api", "arena validator --api http://127.0.0.1:{closed} --catalog {f}/cat "
         + STORE + " --max-items 1", BACKEND),
    Case("evaluate without problems", "evaluate --catalog {f}/cat --out {f}/ev --model policy:expert", USAGE),
    Case("evaluate judge gate 2", EVAL + " --model policy:expert --judge-gate 2", USAGE),
    Case("banks build pattern matches nothing", "arena banks build --problems {f}/nope-*.jsonl --out {f}/wb4", USAGE,
         "wb4"),
    Case("evaluate unknown agent", EVAL + " --model policy:expert --agent bogus", NOT_FOUND),
    Case("run unknown agent", RUN.replace("react", "bogus"), NOT_FOUND),
    Case("rescore out a directory", "store rescore " + STORE + " --catalog {f}/cat " + PROBLEMS + " --out {f}/a_dir",
         USAGE),
]


def _fill(text: str, w: Walk) -> list[str]:
    return text.format(f=w.f, hung=w.hung, closed=w.closed, big=BIG).split()


def _in_process(args: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str, str]:
    from shoparena.cli import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as exc:
        main(args)
    out = capsys.readouterr()
    code = exc.value.code
    return (code if isinstance(code, int) else 1), out.out, out.err


def check_answer(code: int, expected: int, out: str, err: str) -> None:
    """The exit code, one ``error:`` line followed by its ``hint:`` line, no traceback, no internal error."""
    assert code == expected, f"exit {code}, expected {expected}\n{err}"
    assert "Traceback" not in out + err, err
    lines = err.splitlines()
    errors = [i for i, line in enumerate(lines) if line.startswith("error:")]
    assert len(errors) == 1, err
    assert "internal error" not in lines[errors[0]], err
    assert any(line.strip().startswith("hint:") for line in lines[errors[0] + 1:]), f"no hint:\n{err}"


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_walk(case: Case, walk: Walk, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("SHOPARENA_DEBUG", raising=False)
    monkeypatch.chdir(walk.f)
    code, out, err = _in_process(_fill(case.args, walk), capsys)
    check_answer(code, case.code, out, err)
    if case.absent:
        assert not (walk.f / case.absent).exists(), f"{case.absent} was created by a refused command"


SERVERS = [  # and the model servers that hang: a missed refusal would hang the command, not fail it
    Case("run hung model", RUN + " --model openai:{hung}/m", BACKEND),
    Case("evaluate hung model", EVAL + " --model openai:{hung}/m", BACKEND),
    Case("validate hung model", VALIDATE + " --model openai:{hung}/m", BACKEND),
    Case("judge audit hung judge", "judge audit " + STORE + " --judge llm:openai:{hung}/m", BACKEND),
    Case("web unreachable postgres", "web --store postgresql://nobody@127.0.0.1:{closed}/x --port 0", NOT_FOUND),
    Case("web missing store", "web --store sqlite:///{f}/nowhere.db --port 0", NOT_FOUND),
    Case("web foreign store", "web --store sqlite:///{f}/foreign.db --port 0", DATA_ERROR),
    Case("web missing corpus", "web " + STORE + " --corpus {f}/nowhere --port 0", USAGE),
    Case("web port out of range", "web " + STORE + " --port 70000", USAGE),
    Case("serve unknown model", "serve --model bogus:x --port 0", USAGE),
    Case("llm serve missing hf model", "llm serve --model hf:{f}/nowhere --port {closed}", NOT_FOUND),
    Case("catalog serve missing catalog", "catalog serve --catalog {f}/nowhere --port {closed}", NOT_FOUND),
]


@pytest.mark.parametrize("case", SERVERS, ids=[c.name for c in SERVERS])
def test_walk_servers(case: Case, walk: Walk) -> None:
    result = shoparena(*_fill(case.args, walk), cwd=walk.f)
    check_answer(result.returncode, case.code, result.stdout, result.stderr)
