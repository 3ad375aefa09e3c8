"""What the three corpus exports share: the export result, chat-row building (trainer keys, JSON-string tool-call
arguments and tools), the split-partition guard, de-duplication, and writing one row set as JSONL, Parquet (through
:mod:`shoparena._parquet`) and a ``datasets`` directory; plus the readers of those three forms."""

from __future__ import annotations

import hashlib
import importlib.util
import os
import shutil
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import orjson
import pyarrow as pa

from shoparena import _parquet
from shoparena._io import iter_lines, write_jsonl
from shoparena.corpus.split import EXPORTABLE, SplitManifest
from shoparena.corpus.types import Rejection, StageReport, Trajectory
from shoparena.env.tools import normalize_tool_specs
from shoparena.errors import ConfigError, LeakError
from shoparena.seal import sha256_file

EXPORT_FORMAT = "shoparena-corpus-export/1"
MANIFEST_NAME = "manifest.json"
MESSAGE_KEYS: tuple[str, ...] = ("role", "content", "reasoning_content", "tool_calls", "tool_call_id", "name")
ROLES = frozenset({"system", "user", "assistant", "tool"})

_S, _J = pa.string(), _parquet.JSON
#: Column → Arrow type per export kind; ``"json"`` columns hold lists/dicts stored as JSON strings in Parquet.
SCHEMAS: dict[str, dict[str, Any]] = {
    "sft": {"id": _S, "problem_id": _S, "bucket": _S, "source": _S, "messages": _J, "tools": _S},
    "kto": {"prompt": _J, "completion": _J, "label": pa.bool_(), "tools": _S, "id": _S, "traj_id": _S,
            "problem_id": _S, "bucket": _S, "turn": pa.int64()},
    "grpo": {"prompt": _J, "tools": _S, "problem_id": _S, "bucket": _S, "gt_ids": _J, "problem": _S,
             "reference_id": _S, "reference_steps": _J},
}


class BadRow(Exception):
    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


@dataclass
class ExportResult:
    """What one writer did: rows written, files (relative to ``out_dir``) with their sha256, the stage report
    (rejections by reason; ``notes`` carry kind-specific figures) and notes such as a skipped ``datasets`` dir."""

    kind: str
    name: str
    out_dir: Path
    rows: int = 0
    files: dict[str, str] = field(default_factory=dict)
    report: StageReport = field(default_factory=lambda: StageReport(stage="export"))
    rejections: list[Rejection] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def path(self, fmt: Literal["jsonl", "parquet", "dataset"]) -> Path:
        return self.out_dir / (f"{self.name}_dataset" if fmt == "dataset" else f"{self.name}.{fmt}")

    def reject(self, reason: str, message: str, where: str, traj_id: str | None = None) -> None:
        self.report.reject(reason, where)
        self.rejections.append(Rejection(stage=self.report.stage, reason=reason, message=message, where=where,
                                         traj_id=traj_id))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "name": self.name, "rows": self.rows, "files": dict(sorted(self.files.items())),
                "report": self.report.to_dict(), "notes": list(self.notes)}


# ─────────────────────────────────────────────────────────────────────────────── row building

def _arguments(raw: Any) -> str:
    if raw is None:
        return "{}"
    if isinstance(raw, str):
        try:
            orjson.loads(raw)
        except orjson.JSONDecodeError as exc:
            raise BadRow("bad_arguments", f"tool-call arguments are not JSON: {raw[:80]!r}") from exc
        return raw
    if isinstance(raw, dict | list):
        return orjson.dumps(raw).decode()
    raise BadRow("bad_arguments", f"tool-call arguments are a {type(raw).__name__}")


def _tool_call(call: Any) -> dict[str, Any]:
    fn = call.get("function") if isinstance(call, Mapping) else None
    if not isinstance(fn, Mapping) or not isinstance(fn.get("name"), str) or not fn["name"]:
        raise BadRow("bad_tool_call", f"tool call without a function name: {str(call)[:80]}")
    out: dict[str, Any] = {}
    if call.get("id") is not None:
        out["id"] = str(call["id"])
    out["type"] = call.get("type") or "function"
    out["function"] = {"name": fn["name"], "arguments": _arguments(fn.get("arguments"))}
    return out


def _message(m: Any) -> dict[str, Any]:
    if not isinstance(m, Mapping) or m.get("role") not in ROLES:
        raise BadRow("bad_message", f"not a chat message: {str(m)[:80]}")
    out: dict[str, Any] = {}
    for key in MESSAGE_KEYS:
        value = m.get(key)
        if value is None:
            continue
        if key == "tool_calls":
            if not isinstance(value, list):
                raise BadRow("bad_tool_call", "tool_calls is not a list")
            if value:
                out[key] = [_tool_call(c) for c in value]
        elif key == "content" and m["role"] == "tool" and not isinstance(value, str):
            out[key] = orjson.dumps(value).decode()
        else:
            out[key] = value
    return out


def messages_of(t: Trajectory) -> list[dict[str, Any]]:
    if not isinstance(t.messages, list) or not t.messages:
        raise BadRow("no_messages", "trajectory has no messages")
    msgs = [_message(m) for m in t.messages]
    if not any(m["role"] == "assistant" for m in msgs):
        raise BadRow("no_assistant", "trajectory has no assistant turn")
    try:
        orjson.dumps(msgs)
    except TypeError as exc:
        raise BadRow("not_json", f"messages are not JSON-serialisable: {exc}") from exc
    return msgs


def tools_of(t: Trajectory) -> str:
    try:
        return orjson.dumps(normalize_tool_specs(list(t.tools or []))).decode()
    except (TypeError, AttributeError, KeyError) as exc:
        raise BadRow("bad_tools", f"tools are not a list of tool specs: {exc}") from exc


def guard(items: Iterable[tuple[str, str | None]], manifest: SplitManifest | None, partition: str,
           what: str) -> None:
    """Raise :class:`LeakError` when an item's problem is not in ``partition`` of ``manifest``."""
    if manifest is None:
        return
    bad: dict[str, list[str]] = {}
    for where, pid in items:
        part = manifest.partition(pid) if pid is not None else None
        if part != partition:
            bad.setdefault(part or "unassigned", []).append(where)
    if bad:
        detail = "; ".join(f"{len(v)} in {k} (e.g. {', '.join(sorted(v)[:3])})" for k, v in sorted(bad.items()))
        raise LeakError(f"refusing to export {what} outside the {partition} partition: {detail}",
                        hint="route rows with assign_rows() before exporting", violations=sorted(bad))


def check_partition(manifest: SplitManifest | None, partition: str) -> None:
    if manifest is not None and partition not in EXPORTABLE:
        raise ConfigError(f"partition {partition!r} cannot be exported", hint=f"use one of {list(EXPORTABLE)}")


def dedup(rows: Iterable[Trajectory], result: ExportResult) -> list[Trajectory]:
    seen: dict[str, Trajectory] = {}
    for t in rows:
        result.report.seen += 1
        if t.traj_id in seen:
            result.reject("duplicate", f"trajectory {t.traj_id} appears twice", t.traj_id, t.traj_id)
            continue
        seen[t.traj_id] = t
    return sorted(seen.values(), key=lambda t: (t.problem_id or "", t.traj_id))


# ─────────────────────────────────────────────────────────────────────────────── writing

def _parquet_schema(kind: str) -> pa.Schema:
    return _parquet.json_schema(SCHEMAS[kind], fmt=f"{EXPORT_FORMAT}:{kind}")


def _write_parquet(path: Path, kind: str, rows: Sequence[dict[str, Any]]) -> None:
    _parquet.write_rows(path, _parquet_schema(kind), rows, row_group=max(1, len(rows)))


def datasets_available() -> bool:
    """Whether the ``datasets`` package (the ``train`` extra) can be imported."""
    return importlib.util.find_spec("datasets") is not None


def _replace_dir(tmp: Path, dest: Path) -> None:
    old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
    if dest.exists():
        os.replace(dest, old)
    os.replace(tmp, dest)
    shutil.rmtree(old, ignore_errors=True)


def _write_dataset(path: Path, rows: Sequence[dict[str, Any]], result: ExportResult) -> None:
    if not datasets_available():
        if path.exists():
            shutil.rmtree(path)
            result.notes.append(f"removed the stale {path.name}/ (datasets is not installed)")
        result.notes.append(f"datasets is not installed (the 'train' extra): {path.name}/ not written; "
                            f"load {path.stem.removesuffix('_dataset')}.jsonl instead")
        return
    import datasets

    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    shutil.rmtree(tmp, ignore_errors=True)
    try:
        datasets.disable_progress_bars()  # a library write, not an interactive step
        ds = datasets.Dataset.from_list(list(rows))
        # the fingerprint is random by default; derive it from the rows so the same rows give the same bytes
        ds._fingerprint = hashlib.sha256(orjson.dumps(list(rows), option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]
        ds.save_to_disk(str(tmp))
        _replace_dir(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    result.notes.append(f"{path.name}/ written (datasets {datasets.__version__})")


def finish(result: ExportResult, rows: list[dict[str, Any]]) -> ExportResult:
    result.out_dir.mkdir(parents=True, exist_ok=True)
    jsonl, parquet, ds = result.path("jsonl"), result.path("parquet"), result.path("dataset")
    write_jsonl(jsonl, rows)
    _write_parquet(parquet, result.kind, rows)
    _write_dataset(ds, rows, result)
    result.rows = len(rows)
    result.report.kept = len(rows)
    for p in (jsonl, parquet):
        result.files[p.name] = sha256_file(p)
    if ds.is_dir():
        for f in sorted(ds.rglob("*")):
            if f.is_file():
                result.files[f.relative_to(result.out_dir).as_posix()] = sha256_file(f)
    return result



# ─────────────────────────────────────────────────────────────────────────────── readers

def read_jsonl_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of an exported ``.jsonl`` file."""
    return [orjson.loads(line) for _n, line in iter_lines(path)]


def read_parquet_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of an exported ``.parquet`` file, JSON-string columns decoded (equal to the JSONL rows)."""
    return _parquet.read_rows(path)


def _drop_none(value: Any) -> Any:
    if isinstance(value, list):
        return [_drop_none(v) for v in value]
    if isinstance(value, dict):
        return {k: _drop_none(v) for k, v in value.items() if v is not None}
    return value


def read_dataset_rows(path: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of an exported ``datasets`` directory; keys Arrow added as null inside nested messages are dropped
    again (exported messages never hold null-valued keys), so the rows equal the JSONL rows."""
    if not datasets_available():
        raise ConfigError("reading a datasets directory needs the datasets package",
                          hint="pip install 'shoparena[train]', or read the .jsonl / .parquet export")
    import datasets

    ds = datasets.load_from_disk(str(path))
    return [{k: _drop_none(v) if isinstance(v, list | dict) else v for k, v in row.items()} for row in ds]
