"""Axis attribution of search calls: did the LLM ask for this call (axis A) or did Python issue it (axis B)?

The rule (per run; the gateway sees every completion it produced and every search call it answered):

1. **Emissions.** Every tool call in a completion the gateway returned (native ``tool_calls``, tag-protocol
   ``<tool_call>[…]</tool_call>`` text or Qwen3 ``<tool_call>{…}</tool_call>`` blocks) is an *emission*, remembered
   with the ``seq`` of that completion's inference record. Only completions count: tool calls the agent writes
   into the ``messages`` it sends are never emissions.
2. **Direct match.** A search call (``find_product`` / ``view_product_information``) whose normalised arguments
   equal an unconsumed emission of the same tool is axis ``A``, ``attributed_to`` the earliest such emission,
   which is then consumed: each emission justifies exactly one call (the same call issued twice after one
   emission is ``A`` then ``B``). Emissions do not expire.
3. **Composite tools** of the ORO 7-tool surface run in the agent and issue searches themselves. When the LLM
   emits one, a *window* opens that admits only the searches that tool's reference implementation
   (``shoparena.env.tools_oro``) can issue for those arguments, up to the most it can issue:

   - ``check_product_match(product_id)``: one ``view_product_information`` of exactly that id;
   - ``find_products_in_same_shop(product_queries)``: ``find_product`` page 1, default sort: the first spec
     (its ``q``, ``price``, ``service``, no shop), then in-shop searches (any ``shop_id``) of a later spec with
     its ``price``, no service, ``q`` = the spec's ``q`` or its first two words or its first word; at most
     ``1 + 30·(n−1)`` calls;
   - ``find_product`` with a ``shop_id`` (ORO's in-shop fallbacks): the same search without ``service``, then
     also with ``q`` cut to two words; at most 2 calls, never the emitted call itself;
   - ``calculate_voucher`` issues no search, so nothing is ever attributed to it.

   A search admitted by an open window (and not matched directly) is axis ``A`` with ``via`` = the composite
   tool's name and ``attributed_to`` = its completion. Windows close when the run's next inference request
   arrives (the agent has gone back to the model, so the tool has finished), or when their budget is spent.
4. Anything else answered is axis ``B``. Refused calls (non-200) are not attributed and consume nothing.

Normalisation (what "equal arguments" means): ``find_product`` → ``(q, page, shop_id, price, sort, service)``
with ``query`` accepted for ``q``, whitespace runs in ``q`` collapsed, ``page`` as its decimal text (omitted = 1),
empty values and ``default`` (sort, service pieces) dropped, ``service`` as a sorted set of codes (comma text
or array), numbers as their text; ``view_product_information`` → the tuple of ids from ``product_ids`` (comma
text or array, stripped, empties dropped) or ``product_id``.
"""

from __future__ import annotations

import json
from collections import deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, NamedTuple

from shoparena.env.tools import COMPOSITE_TOOLS, SEARCH_TOOLS

__all__ = ["COMPOSITE_TOOLS", "SEARCH_TOOLS", "Attribution", "Attributor", "find_key", "view_key"]

FindKey = tuple[str, str, str | None, str | None, str | None, str | None]
ViewKey = tuple[str, ...]


class Attribution(NamedTuple):
    axis: str
    via: str | None = None
    attributed_to: int | None = None


_B = Attribution("B")


def _text(value: Any) -> str | None:
    """A scalar argument as the text the tool layer would send; empty → None."""
    if value is None or isinstance(value, dict):
        return None
    if isinstance(value, bool):
        text = str(value)
    elif isinstance(value, float) and value.is_integer():
        text = str(int(value))
    elif isinstance(value, list | tuple):
        text = ",".join(str(v) for v in value)
    else:
        text = str(value)
    return text or None


def _q(value: Any) -> str:
    return " ".join((_text(value) or "").split())


def _page(value: Any) -> str:
    text = (_text(value) or "1").strip()
    return str(int(text)) if text.isdigit() and text.isascii() else text


def _service(value: Any) -> str | None:
    pieces = value if isinstance(value, list | tuple) else (_text(value) or "").split(",")
    codes = sorted({str(p).strip() for p in pieces if str(p).strip() and str(p).strip() != "default"})
    return ",".join(codes) or None


def find_key(args: Mapping[str, Any]) -> FindKey:
    """Normalised ``find_product`` arguments (from LLM tool-call arguments or query parameters)."""
    sort = _text(args.get("sort"))
    return (_q(args.get("q", args.get("query"))), _page(args.get("page")), _text(args.get("shop_id")),
            _text(args.get("price")), None if sort == "default" else sort, _service(args.get("service")))


def view_key(args: Mapping[str, Any]) -> ViewKey:
    """Normalised ``view_product_information`` arguments: the ids in order."""
    value = args.get("product_ids")
    if value is None:
        value = args.get("product_id")
    pieces = value if isinstance(value, list | tuple) else (_text(value) or "").split(",")
    return tuple(s for s in (str(p).strip() for p in pieces) if s)


def _key(tool: str, args: Mapping[str, Any]) -> tuple[str, tuple[Any, ...]]:
    return (tool, find_key(args) if tool == "find_product" else view_key(args))


@dataclass(slots=True)
class _Window:
    via: str
    seq: int
    admits: Callable[[str, tuple[Any, ...]], bool]
    budget: int


def _two_words(q: str) -> str:
    return " ".join(q.split()[:2])


def _one_word(q: str) -> str:
    words = q.split()
    return words[0] if words else q


def _decode(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return json.loads(value)
        except ValueError:
            return None
    return value


def _same_shop_window(args: Mapping[str, Any], seq: int) -> _Window | None:
    specs = _decode(args.get("product_queries"))
    if not isinstance(specs, list) or not specs or not all(isinstance(s, dict) for s in specs):
        return None
    first = specs[0]
    opening = (_q(first.get("q", "")), "1", None, _text(first.get("price")), None, _service(first.get("service")))
    in_shop: set[tuple[str, str | None]] = set()
    for spec in specs[1:]:
        q = _q(spec.get("q", ""))
        for variant in (q, _two_words(q), _one_word(q)):
            in_shop.add((variant, _text(spec.get("price"))))

    def admits(tool: str, key: tuple[Any, ...]) -> bool:
        if tool != "find_product" or key[1] != "1" or key[4] is not None:
            return False
        if key[2] is None:
            return key == opening
        return key[5] is None and (key[0], key[3]) in in_shop

    return _Window("find_products_in_same_shop", seq, admits, 1 + 30 * (len(specs) - 1))


def _check_match_window(args: Mapping[str, Any], seq: int) -> _Window | None:
    target = view_key({"product_ids": args.get("product_id")})
    if not target:
        return None
    return _Window("check_product_match", seq, lambda tool, key: tool == "view_product_information" and key == target, 1)


def _shop_fallback_window(args: Mapping[str, Any], seq: int) -> _Window | None:
    q, page, shop, price, sort, service = find_key(args)
    if shop is None:
        return None
    emitted = (q, page, shop, price, sort, service)
    retries = {(q, page, shop, price, sort, None), (_two_words(q), page, shop, price, sort, None)} - {emitted}
    if not retries:
        return None
    return _Window("find_product", seq, lambda tool, key: tool == "find_product" and key in retries, 2)


_WINDOWS: dict[str, Callable[[Mapping[str, Any], int], _Window | None]] = {
    "find_products_in_same_shop": _same_shop_window,
    "check_product_match": _check_match_window,
    "find_product": _shop_fallback_window,
}


class Attributor:
    """One run's attribution state. Not thread-safe: the run's lock guards it."""

    __slots__ = ("_direct", "_windows")

    def __init__(self) -> None:
        self._direct: dict[tuple[str, tuple[Any, ...]], deque[int]] = {}
        self._windows: list[_Window] = []

    def on_inference_request(self) -> None:
        """The agent went back to the model: the composite tools of earlier completions have finished."""
        self._windows.clear()

    def on_completion(self, seq: int, calls: Iterable[tuple[str, Mapping[str, Any]]]) -> None:
        """Remember the ``(name, arguments)`` tool calls completion ``seq`` emitted."""
        for name, args in calls:
            if not isinstance(args, Mapping):
                continue
            if name in SEARCH_TOOLS:
                self._direct.setdefault(_key(name, args), deque()).append(seq)
            make = _WINDOWS.get(name)
            window = make(args, seq) if make is not None else None
            if window is not None:
                self._windows.append(window)

    def attribute(self, tool: str, params: Mapping[str, Any]) -> Attribution:
        """Attribute one answered search call (``tool`` in :data:`SEARCH_TOOLS`), consuming what it matched."""
        key = _key(tool, params)
        pending = self._direct.get(key)
        if pending:
            seq = pending.popleft()
            if not pending:
                del self._direct[key]
            return Attribution("A", None, seq)
        for window in self._windows:
            if window.budget > 0 and window.admits(tool, key[1]):
                window.budget -= 1
                return Attribution("A", window.via, window.seq)
        return _B
