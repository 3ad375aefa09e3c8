"""What an artefact directory is, and the one check every command makes before it writes to ``--out``.

Each directory a command writes says what it is through the typed manifest it already keeps: a corpus
(``manifest.json``, format ``shoparena-corpus-export/…``), a training run (``manifest.json``, ``shoparena-train/…``),
an evaluation (``evaluation.json``), a harness run of ``shoparena run`` (``summary.json`` with its ``config``), a
reproduction (``reproduce.json``), a loop (``loop.json``), a catalog (``index/``), a bank set (``manifest.json``,
``shoparena-banks/…``). :func:`identify` reads that (nothing else), and :func:`claim_out` refuses, with exit 2 and a
hint, to write into another command's artefact, into one made with other settings, into a non-empty directory that
is no artefact, or into (or around) one of the command's own inputs. :func:`fresh_out` removes what a failed run
left behind in a directory it created. :func:`relative_to` / :func:`resolve_recorded` keep the paths recorded inside
an artefact relative to it, so it can be moved or copied and still be read from any working directory.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson

from shoparena.errors import ConfigError

__all__ = ["COMMANDS", "NAMES", "Found", "claim_file", "claim_new", "claim_out", "enclosing", "fresh_out", "identify",
           "relative_to", "resolve_input", "resolve_recorded"]

COMMANDS: dict[str, str] = {
    "corpus": "shoparena corpus build", "train": "shoparena train", "evaluation": "shoparena evaluate",
    "harness-run": "shoparena run", "reproduction": "shoparena reproduce", "loop": "shoparena loop",
    "demo": "shoparena demo", "catalog": "shoparena catalog", "banks": "shoparena arena banks build",
    "arena": "shoparena arena simulate", "model": "shoparena models prepare",
}
"""Artefact kind → the command that writes it (named in the refusals)."""

_MANIFEST_FORMATS = {"shoparena-corpus-export": "corpus", "shoparena-train": "train", "shoparena-banks": "banks",
                     "shoparena-evaluation": "evaluation", "shoparena-reproduce": "reproduction",
                     "shoparena-loop": "loop", "shoparena-arena": "arena", "shoparena-demo": "demo"}


@dataclass(frozen=True)
class Found:
    """An artefact directory: its ``kind`` and the manifest body that says so (``None`` for an interrupted run of a
    command whose manifest is written at the end)."""

    kind: str
    root: Path
    body: dict[str, Any] | None = None


def _json(path: Path) -> dict[str, Any] | None:
    try:
        body = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError):
        return None
    return body if isinstance(body, dict) else None


def _by_format(body: dict[str, Any] | None) -> str | None:
    if body is None:
        return None
    kind = body.get("kind")
    if isinstance(kind, str) and kind in COMMANDS:
        return kind
    fmt = body.get("format")
    return _MANIFEST_FORMATS.get(fmt.split("/")[0]) if isinstance(fmt, str) else None


def identify(path: str | os.PathLike[str], *, strict: bool = False) -> Found | None:
    """The artefact ``path`` holds, from its manifest; ``None`` for a path that is missing, not a directory, or
    holds no manifest this project writes. ``strict``: only a manifest (or a catalog's index), not the files an
    interrupted run leaves before its manifest, which a user's working directory can hold too. Reads only."""
    root = Path(path)
    if not root.is_dir():
        return None
    if not strict and (root / "demo.log").is_file() and not (root / "demo.json").is_file():
        return Found("demo", root)  # a demo run before demos wrote demo.json (its loop's loop.json is beside it)
    # demo.json first: a demo's directory also holds the loop.json of the loop it runs
    for name in ("demo.json", "manifest.json", "evaluation.json", "reproduce.json", "loop.json", "arena.json",
                 "prepare.json", "summary.json"):
        body = _json(root / name) if (root / name).is_file() else None
        kind = _by_format(body)
        if kind is None and name == "summary.json" and body is not None and {"config", "summary"} <= set(body):
            kind = "harness-run"  # written before summaries carried their kind
        if kind is None and name == "prepare.json" and body is not None and {"model", "source", "files"} <= set(body):
            kind = "model"
        if kind is not None:
            return Found(kind, root, body)
    # a catalog's index says what it is by itself
    if (root / "index" / "meta.json").is_file():
        return Found("catalog", root)
    if strict:
        return None
    # interrupted runs: the files a command writes first, before its manifest (a working directory can hold files
    # of these names too, a redirected train.log or a prepared base/, so only a command's own --out is read this way)
    if (root / "split.json").is_file():
        return Found("corpus", root)
    if (root / "episodes.partial.jsonl").is_file():
        return Found("harness-run", root)
    if (root / "models").is_dir() and (root / "evaluate.log").is_file():
        return Found("evaluation", root)
    if (root / "train.log").is_file() or (root / "base" / "config.json").is_file():
        return Found("train", root)
    if (root / "demo.log").is_file():  # before the loop's test: a demo holds an arena and a corpus too
        return Found("demo", root)
    if (root / "loop.log").is_file() or ((root / "arena" / "subnet.db").is_file() and (root / "corpus").is_dir()):
        return Found("loop", root)
    if (root / "subnet.db").is_file() and ((root / "catalog").is_dir() or (root / "agents").is_dir()):
        return Found("arena", root)
    return None


def enclosing(path: str | os.PathLike[str]) -> Found | None:
    """The nearest artefact a path lies inside (its parents only, not the path itself, each identified
    ``strict``ly: a working directory holding a prepared ``base/``, a redirected ``train.log`` or ``arena/`` and
    ``corpus/`` side by side is no training or loop run); ``None`` when none does."""
    for parent in Path(path).resolve().parents:
        found = identify(parent, strict=True)
        if found is not None:
            return found
    return None


NAMES: dict[str, str] = {"corpus": "a corpus", "train": "a training run", "evaluation": "an evaluation",
                         "harness-run": "a harness run", "reproduction": "a reproduction", "loop": "a loop run",
                         "demo": "a demo run", "catalog": "a catalog", "banks": "a bank set",
                         "arena": "an arena simulation", "model": "a prepared model"}
"""Each kind as the refusals name it."""


def _a(kind: str) -> str:
    return NAMES.get(kind, kind)


def _within(a: Path, b: Path) -> bool:
    """Whether ``a`` is ``b`` or lies under it."""
    return a == b or b in a.parents


def claim_out(out: str | os.PathLike[str], kind: str, *, inputs: Sequence[tuple[str, str | os.PathLike[str] | None]]
              = (), differs: Callable[[Found], list[str]] | None = None, resume: bool = False, force: bool = False,
              again: str | None = None, ignore: Sequence[str] = ()) -> Found | None:
    """Check ``out`` before a command that writes a ``kind`` artefact there writes anything; returns what ``out``
    already holds (``None``: nothing), after ``force`` removed one made with other settings.

    Refused (:class:`ConfigError`, exit 2, with a hint): ``out`` is a file; ``out`` is, contains or lies inside
    one of ``inputs`` (``(flag, path)`` pairs); ``out`` lies inside an artefact (its files belong to the command
    that wrote it, and its readers check them); ``out`` is another command's artefact; ``out`` is a non-empty
    directory that is no artefact (``ignore``: names a command may find there first, its log); ``out`` holds a
    ``kind`` artefact for which ``differs(found)`` names settings that differ from this run's — unless ``force``
    (it is removed and the run starts afresh). ``again`` is the command line that continues the run in ``out``
    with ``--resume``."""
    root = Path(out)
    if root.exists() and not root.is_dir():
        raise ConfigError(f"--out {root} is a file", hint="pass a directory")
    _refuse_inputs(root, inputs)
    _refuse_inside(root)
    if not root.is_dir() or not any(p.name not in ignore for p in root.iterdir()):
        return None
    found = identify(root)
    command = COMMANDS[kind]
    if found is None:
        raise ConfigError(f"--out {root} is not empty and holds no {kind} (nothing there says what it is)",
                          hint=f"choose an empty or new --out for `{command}`")
    if found.kind != kind:
        raise ConfigError(f"--out {root} holds {_a(found.kind)} (written by `{COMMANDS[found.kind]}`), not "
                          f"{_a(kind)}", hint=f"choose another --out for `{command}`: writing there would overwrite "
                                              f"{_a(found.kind)}")
    changed = differs(found) if differs is not None else []
    if changed:
        if force:
            shutil.rmtree(root)
            return None
        cont = f"`{again}`" if again else "the settings it was made with and --resume"
        raise ConfigError(f"--out {root} holds {_a(kind)} made with other settings: {', '.join(changed)}",
                          hint=f"continue it with {cont}, choose another --out, or pass --force to replace it")
    return found


def _refuse_inputs(out: Path, inputs: Sequence[tuple[str, str | os.PathLike[str] | None]],
                   flag: str = "--out") -> None:
    """Refuse an ``out`` that is, lies inside or contains one of ``inputs`` (``(flag, path)`` pairs)."""
    where = out.resolve()
    for name, given in inputs:
        if given is None:
            continue
        src = Path(given).resolve()
        if _within(where, src) or _within(src, where):
            rel = "is" if where == src else ("lies inside" if _within(where, src) else "contains")
            raise ConfigError(f"{flag} {out} {rel} the input {name} {given}",
                              hint=f"write to another {flag}, outside the command's inputs")


def _refuse_inside(out: Path, flag: str = "--out") -> None:
    host = enclosing(out)
    if host is not None:
        raise ConfigError(f"{flag} {out} lies inside {_a(host.kind)} at {host.root} (written by "
                          f"`{COMMANDS[host.kind]}`)",
                          hint="write to a path outside it: its files are checked by whoever reads it")


def claim_file(out: str | os.PathLike[str], *, inputs: Sequence[tuple[str, str | os.PathLike[str] | None]] = (),
               flag: str = "--out") -> Path:
    """Check a file a command is about to write: refused (:class:`ConfigError`, exit 2) when it is a directory,
    one of ``inputs`` or inside one, or inside an artefact directory. Returns the path."""
    path = Path(out)
    if path.is_dir():
        raise ConfigError(f"{flag} {path} is a directory", hint="pass a file path")
    _refuse_inputs(path, inputs, flag)
    _refuse_inside(path, flag)
    return path


def claim_new(out: str | os.PathLike[str], kind: str, *,
              inputs: Sequence[tuple[str, str | os.PathLike[str] | None]] = (), force: bool = False,
              replace_own: bool = False) -> Found | None:
    """:func:`claim_out` for a command that cannot continue an earlier run: an ``out`` that already holds its
    ``kind`` is refused unless ``force`` (then returned, for the command to replace) — or, with ``replace_own``
    (a throwaway run such as the demo), removed."""
    found = claim_out(out, kind, inputs=inputs)
    if found is None:
        return None
    if replace_own:
        shutil.rmtree(found.root)
        return None
    if not force:
        raise ConfigError(f"--out {out} holds {_a(kind)} already",
                          hint="choose another --out, or pass --force to replace it")
    return found


class fresh_out:
    """Around a command's work: when it fails, the directories it created for ``out`` (``--out a/b`` may create
    ``a`` too; noted when this is made, so make it before the command creates anything) are removed if nothing in
    them is worth keeping (:func:`_hollow`) — a failed run leaves no empty directory behind."""

    def __init__(self, out: str | os.PathLike[str]) -> None:
        top = Path(out).absolute()
        self.top: Path | None = None
        if not top.exists():
            while not top.parent.exists():
                top = top.parent
            self.top = top

    def __enter__(self) -> fresh_out:
        return self

    def __exit__(self, kind: type[BaseException] | None, *rest: object) -> None:
        if kind is not None and self.top is not None and self.top.is_dir() and _hollow(self.top):
            shutil.rmtree(self.top, ignore_errors=True)


def _hollow(root: Path) -> bool:
    """Whether nothing a failed run made under ``root`` is worth keeping: empty files, the command's own log
    (``*.log``: the console said why it stopped) and an episode file holding no episode (its header line only)."""
    def nothing(p: Path) -> bool:
        if p.is_dir() or p.suffix == ".log":
            return True
        if p.name.endswith(".partial.jsonl"):
            with open(p, "rb") as fh:
                return sum(1 for _ in fh) <= 1
        return p.is_file() and p.stat().st_size == 0

    return all(nothing(p) for p in root.rglob("*"))


def relative_to(path: str | os.PathLike[str], root: str | os.PathLike[str]) -> str:
    """``path`` as recorded inside the artefact at ``root``: relative to ``root`` (POSIX separators, ``..`` where it
    lies outside), so the artefact keeps working when moved or copied together with what it points at."""
    return Path(os.path.relpath(Path(path).resolve(), Path(root).resolve())).as_posix()


def resolve_recorded(recorded: str | os.PathLike[str], root: str | os.PathLike[str]) -> Path:
    """A path read from the artefact at ``root``: absolute as it stands (older artefacts recorded absolute paths),
    otherwise relative to ``root``."""
    p = Path(recorded)
    return p if p.is_absolute() else Path(root) / p


def resolve_input(recorded: str | os.PathLike[str], root: str | os.PathLike[str]) -> Path:
    """An input an artefact at ``root`` records (its bank, catalog, rollout file): absolute as it stands; relative
    to ``root`` as artefacts record them now; for older artefacts, which recorded the path as given on their
    command line, relative to the working directory or to ``root``'s parent when that is where it exists."""
    p = Path(recorded)
    if p.is_absolute():
        return p
    for cand in (Path(root) / p, p, Path(root).parent / p):
        if cand.exists():
            return cand
    return Path(root) / p
