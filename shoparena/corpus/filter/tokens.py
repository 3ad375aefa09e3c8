"""Token counts for the format gate's ``too_long`` reject: a fast conservative estimate (the default) or a real
``transformers`` tokenizer with its chat template.

The estimate (:func:`estimate_tokens`) is designed to *over*-count, so that a row it lets through is not too long
for the trainer either: every ASCII digit counts as one token (Qwen-family tokenizers split numbers into single
digits, and product ids are ten of them), every other three UTF-8 bytes as one token (Qwen3's BPE averages about
four bytes a token on English and three to four on JSON; CJK characters are three bytes each), plus a fixed
overhead per message (``<|im_start|>role\\n … <|im_end|>\\n``), per tool call (the ``<tool_call>`` JSON wrapper)
and for the tools preamble of the system turn. It costs one ``bytes.translate`` over the trace's text.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson

from shoparena.errors import ConfigError

__all__ = ["HFTokenCounter", "estimate_tokens", "make_counter"]

_DIGITS = b"0123456789"
MESSAGE_OVERHEAD = 6
"""``<|im_start|>`` + role + newline + ``<|im_end|>`` + newline, rounded up."""
CALL_OVERHEAD = 14
"""``<tool_call>\\n{"name": "…", "arguments": …}\\n</tool_call>`` around a call's name and arguments."""
TOOLS_OVERHEAD = 120
"""The fixed English of the tools preamble in the system turn (Qwen3 template: about 100 tokens)."""


def _text_tokens(data: bytes) -> int:
    n = len(data)
    digits = n - len(data.translate(None, _DIGITS))
    return digits + (n - digits + 2) // 3


def estimate_tokens(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
    """Conservative token estimate of a whole trace rendered with a Qwen3-style chat template (see the module
    docstring for the rule). Deterministic; never raises on odd field types (non-strings are JSON-dumped)."""
    parts: list[str] = []
    extra = 0
    for m in messages:
        extra += MESSAGE_OVERHEAD
        if not isinstance(m, dict):
            continue
        for key in ("content", "reasoning_content"):
            v = m.get(key)
            if v:
                parts.append(v if isinstance(v, str) else orjson.dumps(v).decode())
        for call in m.get("tool_calls") or ():
            extra += CALL_OVERHEAD
            fn = call.get("function") if isinstance(call, dict) else None
            if isinstance(fn, dict):
                parts.append(str(fn.get("name") or ""))
                args = fn.get("arguments")
                if args is not None:
                    parts.append(args if isinstance(args, str) else orjson.dumps(args).decode())
    data = "".join(parts).encode("utf-8", "surrogatepass")
    if tools:
        extra += TOOLS_OVERHEAD
        data += orjson.dumps(tools)
    return extra + _text_tokens(data)


class HFTokenCounter:
    """Token count under a real ``transformers`` tokenizer, loaded on the first call: the chat template renders
    the messages and tools when the tokenizer has one (``tokenize=False``, then encoded without extra special
    tokens, which the template already wrote); otherwise the message texts are joined and encoded. A template that
    fails on a row falls back to the joined text and is counted in :attr:`template_fallbacks`."""

    def __init__(self, path: str) -> None:
        self.path = path
        self._tok: Any = None
        self.template_fallbacks = 0

    def _load(self) -> Any:
        if self._tok is None:
            try:
                from transformers import AutoTokenizer
            except ImportError as exc:  # pragma: no cover - transformers is a dependency of the hf extra
                raise ConfigError(f"tokenizer {self.path!r} needs transformers ({exc.name} is missing)",
                                  hint="pip install 'shoparena[hf]' or leave tokenizer unset") from exc
            try:
                self._tok = AutoTokenizer.from_pretrained(self.path)
            except (OSError, ValueError) as exc:
                raise ConfigError(f"cannot load tokenizer {self.path!r}: {exc}",
                                  hint="give a local tokenizer directory, or leave tokenizer unset") from exc
        return self._tok

    def __call__(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None) -> int:
        tok = self._load()
        if getattr(tok, "chat_template", None):
            try:
                text = tok.apply_chat_template(messages, tools=tools or None, tokenize=False)
            except Exception:  # a template raising on an odd row: count it, do not crash (house rule)
                self.template_fallbacks += 1
            else:
                return len(tok(text, add_special_tokens=False)["input_ids"])
        text = "\n".join(_plain_parts(messages, tools))
        return len(tok(text, add_special_tokens=False)["input_ids"])


def _plain_parts(messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None) -> list[str]:
    out = [orjson.dumps(tools).decode()] if tools else []
    for m in messages:
        if not isinstance(m, dict):
            continue
        out.extend(str(m[k]) for k in ("role", "reasoning_content", "content") if m.get(k))
        for call in m.get("tool_calls") or ():
            out.append(orjson.dumps(call).decode())
    return out


def make_counter(tokenizer: str | None) -> Callable[[list[dict[str, Any]], list[dict[str, Any]] | None], int]:
    """The token counter a :class:`~shoparena.corpus.filter.config.FilterConfig` asks for."""
    return estimate_tokens if tokenizer is None else HFTokenCounter(tokenizer)
