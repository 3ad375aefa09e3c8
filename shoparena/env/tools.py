"""The tool registry and its profiles (docs/shoppingbench.md §4).

One registry (``@register``), one classification (:func:`tool_kind` and the ``*_TOOLS`` sets every other
package reads instead of spelling tool names out), three profiles: ``upstream4`` (find_product,
view_product_information, recommend_product, terminate), ``oro7`` (+ check_product_match,
find_products_in_same_shop, calculate_voucher; find_product with ORO's in-shop fallbacks) and ``oro_sft4``
(the upstream four with the loose schemas of ORO's released SFT corpus, §4.3). ``web_search`` and
``python_execute`` can be added to any profile; offline both answer with an error observation.

A handler takes ``(arguments, context)`` and returns a JSON-serialisable observation. Handlers raise
:class:`ArgError` for bad arguments; :meth:`Toolset.execute` turns that (and anything else) into an error
observation ``{"error", "tool", "argument"}`` — a tool never raises into the loop.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal

from shoparena.catalog.types import SearchBackend
from shoparena.env.protocol_tags import ujson_dumps
from shoparena.errors import ConfigError, closest
from shoparena.registry import Registry


class ArgError(Exception):
    """A tool argument that cannot be used; becomes an error observation naming the argument."""

    def __init__(self, argument: str, message: str) -> None:
        super().__init__(message)
        self.argument = argument
        self.message = message


@dataclass(slots=True)
class ToolContext:
    """What handlers may touch: the search backend and the profile's behaviour switches."""

    backend: SearchBackend | None
    shop_fallbacks: bool = False
    """ORO find_product: retry an empty in-shop search without ``service``, then with 2 words of ``q``."""
    sku_bug_parity: bool = False
    """ORO check_product_match bug: SKU values never searched (§4.2)."""


Handler = Callable[[dict[str, Any], ToolContext], Any]


@dataclass(frozen=True, slots=True)
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    """JSON schema of the arguments (``{"type": "object", "properties": …, "required": …}``)."""
    handler: Handler

    def spec(self) -> dict[str, Any]:
        """OpenAI function spec ``{"type": "function", "function": {name, description, parameters}}``."""
        return {"type": "function", "function": {
            "name": self.name, "description": self.description, "parameters": self.parameters}}

    def flat_spec(self) -> dict[str, Any]:
        """The flat form of ORO's SFT rows ``{type, name, description, parameters}``."""
        return {"type": "function", "name": self.name, "description": self.description,
                "parameters": self.parameters}

    def to_text(self) -> str:
        """Upstream ``BaseTool.to_string``: ``Name: …\\nDescription: …\\nParameters: {ujson}``."""
        return f"Name: {self.name}\nDescription: {self.description}\nParameters: {ujson_dumps(self.parameters)}"


def _load_tools() -> None:
    from shoparena.env import tools_oro, tools_upstream  # noqa: F401  (registration side effect)


TOOLS: Registry[Tool] = Registry("tool", error=ConfigError, loader=_load_tools)
"""The registry: canonical (upstream / ORO) definition of every tool by name (a profile picks from it)."""


def register(name: str, description: str, parameters: dict[str, Any]) -> Callable[[Handler], Handler]:
    """Decorator registering a handler as tool ``name``."""

    def deco(handler: Handler) -> Handler:
        TOOLS.add(name, Tool(name, description, parameters, handler))
        return handler

    return deco


UPSTREAM4: tuple[str, ...] = ("find_product", "view_product_information", "recommend_product", "terminate")
PROFILES: dict[str, tuple[str, ...]] = {
    "upstream4": UPSTREAM4,
    "oro7": (*UPSTREAM4, "check_product_match", "find_products_in_same_shop", "calculate_voucher"),
    "oro_sft4": UPSTREAM4,
}
OPTIONAL_TOOLS: tuple[str, ...] = ("web_search", "python_execute")

# ── tool classification: the one place that says what kind of tool a name is ─────────────────────────────

ToolKind = Literal["search", "composite", "answer", "optional"]
"""``search``: a catalog search primitive (one gateway search endpoint each); ``composite``: ORO's Python
tools that run searches on the model's behalf; ``answer``: the calls that finish an episode; ``optional``: the
add-on tools (web search, python)."""

SEARCH_TOOLS: frozenset[str] = frozenset({"find_product", "view_product_information"})
"""The catalog search primitives: the gateway's search endpoints, the calls its log attributes to an axis."""
COMPOSITE_TOOLS: frozenset[str] = frozenset({"check_product_match", "find_products_in_same_shop",
                                             "calculate_voucher"})
"""ORO's composite tools (oro7): Python that issues search calls for the model (axis B inside an agent)."""
ANSWER_TOOLS: frozenset[str] = frozenset({"recommend_product", "terminate"})
"""The calls that finish an episode: recommend the answer, stop."""
VERIFY_TOOLS: frozenset[str] = frozenset({"view_product_information", "check_product_match"})
"""Calls that check a candidate's details (a verification step in a trace, once something was searched)."""
LISTING_TOOLS: frozenset[str] = frozenset({"find_product", "find_products_in_same_shop"})
"""Calls whose observation lists candidate products."""
NON_SEARCH_TOOLS: frozenset[str] = ANSWER_TOOLS | {"calculate_voucher", "python_execute"}
"""Calls that look nothing up (neither the catalog nor the web)."""

_KINDS: dict[str, ToolKind] = {
    **dict.fromkeys(SEARCH_TOOLS, "search"), **dict.fromkeys(COMPOSITE_TOOLS, "composite"),
    **dict.fromkeys(ANSWER_TOOLS, "answer"), **dict.fromkeys(OPTIONAL_TOOLS, "optional"),
}


def tool_kind(name: str) -> ToolKind | None:
    """The kind of tool ``name`` (:data:`ToolKind`), or None for a name no profile has."""
    return _KINDS.get(name)


def error_obs(tool: str, message: str, argument: str | None = None) -> dict[str, Any]:
    out: dict[str, Any] = {"error": message, "tool": tool}
    if argument is not None:
        out["argument"] = argument
    return out


class Toolset:
    """The tools of one profile, bound to nothing: pass a :class:`ToolContext` to :meth:`execute`."""

    __slots__ = ("_by_name", "name", "names", "tools")

    def __init__(self, name: str, tools: list[Tool]) -> None:
        self.name = name
        self.tools = tuple(tools)
        self._by_name = {t.name: t for t in self.tools}
        self.names = frozenset(self._by_name)

    def __getitem__(self, name: str) -> Tool:
        return self._by_name[name]

    def specs(self) -> list[dict[str, Any]]:
        return [t.spec() for t in self.tools]

    def text(self) -> str:
        """The numbered upstream text block substituted for ``<|toolkit_description|>``."""
        return "\n\n".join(f"{i}. {t.to_text()}" for i, t in enumerate(self.tools, 1))

    def execute(self, name: str, arguments: Any, context: ToolContext) -> Any:
        """Run one call; always returns an observation (errors included), never raises."""
        tool = self._by_name.get(name)
        if tool is None:
            return {**error_obs(name, f"unknown tool {name!r}"), "available": sorted(self.names)}
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            return error_obs(name, "arguments must be a JSON object")
        try:
            return tool.handler(arguments, context)
        except ArgError as exc:
            return error_obs(name, exc.message, exc.argument)
        except Exception as exc:  # a tool failure is an observation, never a crash (conventions)
            return error_obs(name, f"{type(exc).__name__}: {exc}")


def get_toolset(profile: str = "upstream4", *, web_search: bool = False, python_execute: bool = False) -> Toolset:
    """The toolset of ``profile``, optionally with ``web_search`` / ``python_execute`` appended."""
    if profile not in PROFILES:
        hint = closest(profile, list(PROFILES))
        raise ConfigError(f"unknown tool profile {profile!r}; expected one of {sorted(PROFILES)}",
                          hint=f"did you mean {hint!r}?" if hint else None)
    tools = [TOOLS[n] for n in PROFILES[profile]]
    if profile == "oro_sft4":
        from shoparena.env.tools_oro import SFT_SPECS

        tools = [dataclasses.replace(t, description=SFT_SPECS[t.name][0], parameters=SFT_SPECS[t.name][1])
                 for t in tools]
    tools += [TOOLS[n] for n, on in zip(OPTIONAL_TOOLS, (web_search, python_execute), strict=True) if on]
    return Toolset(profile, tools)


def normalize_tool_specs(specs: list[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Nested OpenAI specs from nested or flat (ORO SFT rows) ones."""
    out = []
    for s in specs:
        if "function" in s:
            out.append({"type": "function", "function": dict(s["function"])})
        else:
            out.append({"type": "function", "function": {
                k: s[k] for k in ("name", "description", "parameters") if k in s}})
    return out


# ── argument coercion (§4.4) ──────────────────────────────────────────────────────────────────────────


def arg_str(args: Mapping[str, Any], name: str, *, aliases: tuple[str, ...] = (), required: bool = False) -> str | None:
    """A string argument (``aliases`` accepted); numbers become their text, as in upstream's URL."""
    for key in (name, *aliases):
        value = args.get(key)
        if value is not None:
            break
    else:
        if required:
            raise ArgError(name, f"missing required argument {name!r}")
        return None
    if isinstance(value, bool):
        raise ArgError(name, f"{name!r} must be a string, not a boolean")
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return value
    raise ArgError(name, f"{name!r} must be a string, not {type(value).__name__}")


def arg_ids(args: Mapping[str, Any], *, required: bool = True) -> str | None:
    """``product_ids`` as a comma string: a string, an array of ids, or ``product_id`` alone."""
    for key in ("product_ids", "product_id"):
        value = args.get(key)
        if value is None:
            continue
        if isinstance(value, list | tuple):
            if not all(isinstance(v, str | int) and not isinstance(v, bool) for v in value):
                raise ArgError(key, f"{key!r} must be a comma-separated string or an array of ids")
            return ",".join(str(v) for v in value)
        if isinstance(value, str):
            return value
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        raise ArgError(key, f"{key!r} must be a comma-separated string or an array of ids")
    if required:
        raise ArgError("product_ids", "missing required argument 'product_ids' (a comma-separated string "
                                      "or an array of ids; 'product_id' for a single id)")
    return None


def arg_page(args: Mapping[str, Any], default: int = 1) -> int:
    """``page`` as an int: an integer or a digit string; absent ⇒ ``default``."""
    value = args.get("page")
    if value is None:
        return default
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and value.isdigit():
        return int(value)
    raise ArgError("page", f"'page' must be an integer from 1 to 5, got {value!r}")


def arg_num(args: Mapping[str, Any], name: str, *, default: float | None = None) -> float | int:
    """A number argument: int, float or numeric string; absent ⇒ ``default`` (required when None)."""
    value = args.get(name)
    if value is None:
        if default is None:
            raise ArgError(name, f"missing required argument {name!r}")
        return default
    if isinstance(value, bool):
        raise ArgError(name, f"{name!r} must be a number, not a boolean")
    if isinstance(value, int | float):
        return value
    if isinstance(value, str):
        try:
            text = value.strip()
            return int(text) if text.lstrip("-").isdigit() else float(text)
        except ValueError:
            pass
    raise ArgError(name, f"{name!r} must be a number, got {value!r}")
