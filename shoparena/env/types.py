"""Episode-level types: what a policy returns, what a step record holds, what an episode is.

Everything stored is a frozen, ``extra="forbid"`` pydantic model. Step records themselves travel as plain
JSON dicts (upstream format, docs/shoppingbench.md §6.1) inside :class:`Episode`: the runner builds them without
per-call validation, and :class:`StepRecord` validates them at read boundaries.

The policy contract is one method, like Gymnasium's ``Env.step``: ``respond(messages, tools)`` returns an
:class:`AssistantMessage`. ``respond`` may be a plain function or ``async def``.
"""

from __future__ import annotations

from typing import Any, Literal, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field

from shoparena.types import Flavor, Status

StopReason = Literal["terminate", "max_steps", "empty_output", "error"]
ProtocolName = Literal["tags", "native"]
ProfileName = Literal["upstream4", "oro7", "oro_sft4"]
RecordFlavor = Literal["upstream", "oro", "both"]
"""Where tool outputs live in a step: ``upstream`` = ``message.obs``; ``oro`` = ``tool_call[].result``;
``both`` = both places (docs/shoppingbench.md §6.1)."""

_FROZEN = ConfigDict(frozen=True, extra="forbid")


class ToolCall(BaseModel):
    """One function call a policy asked for (OpenAI ``tool_calls[]`` entry, arguments already decoded)."""

    model_config = _FROZEN

    id: str = ""
    """Call id as the API gave it; empty ⇒ the runner derives the upstream MD5 id (§5.1)."""
    name: str
    arguments: dict[str, Any] = Field(default_factory=dict)


class Usage(BaseModel):
    """Token counts for one completion, when the backend reports them."""

    model_config = _FROZEN

    prompt_tokens: int | None = None
    completion_tokens: int | None = None
    total_tokens: int | None = None


class AssistantMessage(BaseModel):
    """What a policy returns for one step.

    Tag protocol: the text is in ``content`` (``<think>``/``<tool_call>``/``<response>``). Native protocol:
    ``tool_calls`` from the API, or Qwen3 text in ``content`` that the runner parses.
    """

    model_config = _FROZEN

    content: str = ""
    reasoning_content: str | None = None
    """API-side reasoning (DeepSeek / sglang / vLLM reasoning parsers); used as the think when the
    content carries none."""
    tool_calls: list[ToolCall] = Field(default_factory=list)
    usage: Usage | None = None
    parse_notes: tuple[str, ...] = Field(default=(), exclude=True)
    """What the backend's text parser left out of this message (a malformed or unclosed ``<tool_call>`` block):
    the gateway logs it (:attr:`~shoparena.llm.gateway.calllog.CallRecord.parse_notes`); never sent on, never
    dumped."""
    truncated: bool | None = Field(default=None, exclude=True)
    """Whether generation ended because the completion reached its token cap (the request's ``max_tokens`` under the
    backend's per-turn cap) rather than at an end token or a stop string: ``True`` cut, ``False`` ended by itself,
    ``None`` the backend does not say. A cut turn is answered with finish reason ``length``
    (:func:`shoparena.llm.wire.finish_reason`) and logged by the gateway
    (:attr:`~shoparena.llm.gateway.calllog.CallRecord.truncated`); never sent on, never dumped, like
    ``parse_notes``. It says how generation ended, not what the message says, so equality leaves it out."""

    def _said(self) -> dict[str, Any]:
        return {k: v for k, v in self.__dict__.items() if k != "truncated"}

    def __eq__(self, other: object) -> bool:
        """Equal when the messages say the same (every field but ``truncated``): a backend's reply equals the
        same message built by hand or read back from the wire, whether or not its backend reported the cut."""
        if not isinstance(other, AssistantMessage):
            return NotImplemented
        return type(self) is type(other) and self._said() == other._said()

    def __hash__(self) -> int:
        return hash((type(self), *self._said().values()))


@runtime_checkable
class Policy(Protocol):
    """Anything that answers a chat request. ``respond`` may also be ``async def`` (see ``arun_episode``).

    ``messages`` are OpenAI chat messages; ``tools`` are OpenAI function specs (empty for the tag protocol,
    whose tools are described in the system prompt). The policy never sees rewards or vouchers.
    """

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantMessage: ...


@runtime_checkable
class AsyncPolicy(Protocol):
    """The async form of :class:`Policy` (e.g. over an async OpenAI client); run with ``arun_episode``."""

    async def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantMessage: ...


# ── step record pieces (docs/shoppingbench.md §6.1) ────────────────────────────────────────────────────────


class ToolCallRecord(BaseModel):
    """``completion.message.tool_call[]``; ``result`` only in ORO-flavoured records."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    parameters: dict[str, Any]
    tool_call_id: str
    result: Any = None


class ObsRecord(BaseModel):
    """``completion.message.obs[]`` (upstream): the raw tool output; ``None`` when upstream's retries failed."""

    model_config = _FROZEN

    tool_call_id: str
    results: Any = None


class StepMessage(BaseModel):
    """``completion.message``: only non-empty parts are present in the JSON (upstream ``Message.to_dict``)."""

    model_config = _FROZEN

    think: str = ""
    tool_call: list[ToolCallRecord] = Field(default_factory=list)
    obs: list[ObsRecord] = Field(default_factory=list)
    response: str = ""


class Completion(BaseModel):
    model_config = _FROZEN

    reasoning_content: str | None = ""
    content: str = ""
    """Tag-protocol text: raw model output (tag protocol) or the re-rendered parts (native protocol)."""
    message: StepMessage


class ExtraInfo(BaseModel):
    model_config = _FROZEN

    step: int
    """1-based step number (ORO keeps counting through skipped empty replies, so gaps are possible)."""
    query: str
    timestamp: int | None = None
    """Milliseconds since the epoch, taken when the step was recorded."""
    problem_id: str | None = None
    execution_time: float | None = None
    """Seconds for the whole episode; first step only (ORO)."""
    proxy_calls: list[dict[str, Any]] | None = None
    parse_errors: list[str] | None = None
    """Why parts of the model output were dropped (malformed JSON, unknown tool names); ours."""
    auto_recommend: bool | None = None
    """True on the step injected by the ORO auto-recommend rescue; ours."""


class StepRecord(BaseModel):
    """One step of a trajectory, upstream or ORO flavour. Validate dict records with ``model_validate``."""

    model_config = _FROZEN

    prompt: list[dict[str, Any]] | None = None
    completion: Completion
    extra_info: ExtraInfo


# ── episode ───────────────────────────────────────────────────────────────────────────────────────────


class EpisodeConfig(BaseModel):
    """How one episode is run; stored with the episode. ``None`` fields take the profile's default."""

    model_config = _FROZEN

    protocol: ProtocolName = "tags"
    profile: ProfileName = "upstream4"
    max_steps: int | None = Field(default=None, ge=1)
    """Default 30 (upstream) or 25 (ORO profiles)."""
    empty_limit: int | None = Field(default=None, ge=1)
    """Consecutive empty replies that end the episode. Default 1 (upstream) or 3 (ORO)."""
    record_empty: bool | None = None
    """Record empty replies as steps. Default True (upstream) or False (ORO skips them)."""
    auto_recommend: bool = False
    """ORO rescue: if no recommend_product succeeded, recommend the first (product task) or all seen
    candidates in an extra step. Opt-in; off for strict evaluation."""
    tag_flavor: Flavor | None = None
    """History rendering of the tag protocol: upstream (ujson, ids, one block per turn) or ORO (json,
    no ids, one block per part). Default follows the profile."""
    react: bool = False
    """Tag protocol without think (upstream ``rollout.ablation_react.md``)."""
    system_prompt: str | None = None
    """Override the system prompt (``<|toolkit_description|>`` is substituted)."""
    record_flavor: RecordFlavor = "upstream"
    record_prompt: bool = False
    """Store each step's prompt messages (upstream does; quadratic in size)."""
    sku_bug_parity: bool = False
    """Reproduce ORO's check_product_match bug (SKU values never searched)."""
    web_search: bool = False
    python_execute: bool = False


class Timings(BaseModel):
    model_config = _FROZEN

    started_ms: int
    ended_ms: int
    total_s: float
    policy_s: float
    """Time spent inside the policy."""
    tools_s: float
    """Time spent executing tools."""


class EpisodeError(BaseModel):
    model_config = _FROZEN

    type: str
    message: str


class Episode(BaseModel):
    """One finished episode. ``steps`` are upstream-format step dicts; ``messages`` the same trajectory as
    canonical OpenAI messages (system, user, assistant, tool), ``tools`` the function specs offered."""

    model_config = _FROZEN

    problem_id: str
    query: str
    config: EpisodeConfig
    steps: list[dict[str, Any]]
    messages: list[dict[str, Any]]
    tools: list[dict[str, Any]]
    recommendation: str | None = None
    """``product_ids`` of the last recommend_product call, as a comma string; None if never called."""
    stop_reason: StopReason
    error: EpisodeError | None = None
    inference_total: int = 0
    """Policy calls made."""
    inference_failure_count: int = 0
    """Policy calls that raised or returned an empty reply."""
    n_tool_calls: int = 0
    usage: Usage | None = None
    """Summed token counts when the policy reported them."""
    timings: Timings


class Envelope(BaseModel):
    """ORO ``output.jsonl`` line for one problem (docs/shoppingbench.md §6.2): what a sandboxed agent run gives
    back and what an episode is written as. The one definition: the sandbox builds it, the scorer reads it."""

    model_config = _FROZEN

    problem_id: str
    status: Status
    execution_time: float
    inference_failure_count: int = 0
    inference_total: int = 0
    error: dict[str, str] | None = None
    """``{type, message}``."""
    dialogue: list[dict[str, Any]] | None = None
    """The agent's step list (upstream/ORO step records), or None when it produced none."""


#: The keys of an envelope line, in ORO's order.
ENVELOPE_KEYS: tuple[str, ...] = tuple(Envelope.model_fields)
