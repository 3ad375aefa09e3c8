"""Multi-turn episodes for stage 5, token in / token out, over the real environment in-process.

:class:`RolloutEnv` holds what every episode needs: the catalog's search service (the same ``SearchService`` the
gateway serves), the strict rule scorer, and the GRPO rows by prompt. :func:`run_token_episode` plays one episode
of one row with a model (:func:`run_token_episodes` plays several in lockstep, one batched ``generate`` per turn,
or, given a :class:`TurnSampler` such as :class:`~shoparena.train.rollout_llamacpp.LlamaCppSampler`, each episode in
its own thread asking the sampler for its turns, so an episode's next turn is sampled as soon as its tool results are
appended):

1. the prompt is the row's ``prompt`` + ``tools`` through the tokenizer's chat template (generation prompt on),
   behind the harness's system turn when the env's ``system`` is ``harness`` (as a ``react`` episode is prompted);
2. each turn samples with ``model.generate`` under ``torch.no_grad()`` with the model in ``eval()`` mode
   (asserted: ``docs/training.md`` §7 bug #2); the sampled ids are appended as they are (env_mask 1);
3. the decoded turn is parsed (:func:`~shoparena.llm.hf_backend.completion_to_message`) and fed to the
   environment's own episode loop (:class:`~shoparena.env.runner.EpisodeLoop`, profile ``upstream4``, native
   protocol) which executes the calls and records the step; its tool messages, compacted with the env's
   ``compact`` (the checkpoint's observation rendering, as its backend serves it), are rendered **once** into the
   template's suffix (the text between the end-of-turn token and the next assistant header) and appended
   (env_mask 0). The history is never re-encoded (bug #6); each turn asserts that the model's input is exactly
   ``prompt_ids + completion_ids``;
4. the episode stops at a ``recommend_product`` or ``terminate`` call, an empty / unparseable turn (the loop's
   rule), the turn limit, a turn cut by ``turn_max_tokens``, or when the next tool result would overflow
   ``max_completion_length`` (then it is not appended);
5. ``outcome`` = strict rule success of the final recommendation (1.0 / 0.0); ``tool_match`` =
   :func:`~shoparena.train.reward.mean_step_match` of the turns' calls against the row's ``reference_steps``
   (``callless``: ``skipped`` scores a turn without a tool call 0 and leaves it out of the alignment, ``aligned``
   compares it by position); ``reward_before_penalty`` = :func:`~shoparena.train.reward.blended_reward`;
   ``reward`` = :func:`~shoparena.train.reward.penalised_reward`: ``stop_penalty`` less when no turn called
   ``recommend_product``. The defaults (``aligned``, penalty 0) leave the blend as it is.

A turn that makes no tool call does not end the episode unless it is completely empty (the loop's ``upstream4``
rule: only an empty reply stops it, as ``empty_output``): a think or text turn is recorded, gets no tool result (only
the next assistant header is appended) and the model takes the next turn, until it calls, runs out of turns
(``max_turns``) or tokens (``length``). Each episode counts its callless turns (no call, none attempted) and, among
them, its think-then-stop turns (the turn's text states a recommendation decision:
:func:`~shoparena.env.turns.states_decision`, the rule evaluation counts them by), whichever sampler played it.

The suffix renderer works for any template that renders an assistant turn the same whether or not tool messages
follow it: it renders a fixed stand-in conversation with and without the tool messages and takes the difference
(a template for which that fails raises :class:`~shoparena.errors.ConfigError`).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from shoparena.env.turns import states_decision, turn_text
from shoparena.errors import ConfigError, DataError
from shoparena.llm.compact import compact_messages
from shoparena.train.format import parse_tools, with_system
from shoparena.train.reward import (
    Callless,
    blended_reward,
    check_callless,
    check_stop_penalty,
    mean_step_match,
    penalised_reward,
)

__all__ = ["RolloutEnv", "TokenEpisode", "TurnSampler", "prompt_key", "render_prompt_ids", "run_token_episode",
           "run_token_episodes", "sample_concurrently", "sample_turns", "tool_suffix_ids", "turn_end_ids"]

_STAND_IN = [{"role": "system", "content": "s"}, {"role": "user", "content": "u"},
             {"role": "assistant", "content": "a", "reasoning_content": "r"}]
STOP_CALLS = ("recommend_product", "terminate")


def prompt_key(prompt: Sequence[dict[str, Any]]) -> str:
    """A row's identity by its prompt messages (null-valued keys dropped: Arrow adds them)."""
    return json.dumps([{k: v for k, v in m.items() if v is not None} for m in prompt], sort_keys=True,
                      ensure_ascii=False)


def render_prompt_ids(tokenizer: Any, messages: Sequence[dict[str, Any]], tools: Any) -> list[int]:
    """The prompt's token ids: chat template with tools and the generation prompt, no extra special tokens."""
    text = tokenizer.apply_chat_template(list(messages), tools=parse_tools(tools), tokenize=False,
                                         add_generation_prompt=True)
    return list(tokenizer(text, add_special_tokens=False)["input_ids"])


def tool_suffix_ids(tokenizer: Any, tool_messages: Sequence[dict[str, Any]]) -> list[int]:
    """The ids that follow a sampled end-of-turn token: the rest of the template's end of turn, the tool messages
    and the next assistant header (module docstring)."""
    render = tokenizer.apply_chat_template
    base = render(_STAND_IN, tokenize=False)
    full = render([*_STAND_IN, *tool_messages], tokenize=False, add_generation_prompt=True)
    eos = tokenizer.eos_token or ""
    if not full.startswith(base) or not eos or eos not in base:
        raise ConfigError("the chat template does not render an assistant turn the same when tool results follow",
                          hint="rollouts append tool results as tokens and need a prefix-stable template")
    tail = base[base.rindex(eos) + len(eos):]
    return list(tokenizer(tail + full[len(base):], add_special_tokens=False)["input_ids"])


@dataclass
class TokenEpisode:
    """One played episode: ids, mask, per-turn calls, rewards and why it stopped."""

    prompt_ids: list[int]
    completion_ids: list[int] = field(default_factory=list)
    env_mask: list[int] = field(default_factory=list)
    """1 = sampled by the model, 0 = rendered tool result (excluded from the loss)."""
    steps: list[list[dict[str, Any]] | None] = field(default_factory=list)
    """Per assistant turn, its calls ``[{"name", "arguments"}]``; None for an unparseable turn."""
    observations: list[list[dict[str, Any]]] = field(default_factory=list)
    """Per appended tool-result span, the environment's tool messages it renders (compacted as the model saw them)."""
    outcome: float = 0.0
    tool_match: float = 0.0
    reward: float = 0.0
    """``reward_before_penalty − penalty``."""
    stop: str = ""
    recommended: str | None = None
    reward_before_penalty: float = 0.0
    """The blended outcome / tool-match reward."""
    penalty: float = 0.0
    """The stop penalty taken off: the run's ``stop_penalty`` when no turn called ``recommend_product``, else 0."""
    called_recommend: bool = False
    """Whether a turn called ``recommend_product`` (whatever the call's result)."""
    callless_turns: int = 0
    """Turns without a tool call that attempted none (a think, text or empty turn: a ``[]`` step)."""
    think_then_stop_turns: int = 0
    """Callless turns whose text states a recommendation decision."""


class RolloutEnv:
    """The environment side of stage 5 for a set of GRPO rows (``grpo.jsonl``) over one catalog."""

    def __init__(self, rows: Sequence[dict[str, Any]], catalog_dir: Path, *, max_turns: int = 25,
                 system: str = "row", compact: Any = None) -> None:
        from shoparena.catalog.directory import index_path
        from shoparena.catalog.index import SearchIndex
        from shoparena.catalog.search import SearchService
        from shoparena.scoring import Scorer
        from shoparena.validator.core import SEARCH_FLAVOR

        index = SearchIndex.open(index_path(catalog_dir))
        self.search = SearchService(index, flavor=SEARCH_FLAVOR)
        self.scorer = Scorer(index, mode="strict")
        self.max_turns = max_turns
        self.system = system
        """``harness``: prompts without a system turn get the harness's native one, as every ``react`` episode."""
        self.compact = compact
        """The model's :class:`~shoparena.llm.compact.CompactConfig`: tool results are shown to it compacted, as
        its backend serves it (the environment keeps them whole)."""
        self.rows: dict[str, dict[str, Any]] = {}
        self.duplicates = 0
        for n, row in enumerate(rows):
            if not isinstance(row, dict) or not {"prompt", "problem", "reference_steps"} <= row.keys():
                raise DataError(f"GRPO row {n} lacks prompt / problem / reference_steps",
                                hint="pass the corpus's grpo.jsonl rows")
            key = prompt_key(row["prompt"])
            if key in self.rows:
                self.duplicates += 1
                continue
            self.rows[key] = row
        if not self.rows:
            raise DataError("no GRPO rows", hint="the corpus's grpo.jsonl is empty")

    def row(self, prompt: Sequence[dict[str, Any]]) -> dict[str, Any]:
        try:
            return self.rows[prompt_key(prompt)]
        except KeyError:
            raise DataError("a GRPO prompt that is not among the rows given to the rollout") from None

    def problem(self, row: dict[str, Any]) -> Any:
        from shoparena.tasks.loader import parse_problem

        try:
            raw = json.loads(row["problem"]) if isinstance(row["problem"], str) else row["problem"]
            return parse_problem(raw, suite=str(raw.get("suite") or "train"))
        except (ValueError, AttributeError) as exc:
            raise DataError(f"GRPO row {row.get('problem_id', '?')}: unreadable problem ({exc})") from None


def sample_turns(model: Any, contexts: list[list[int]], max_new: list[int], eos_ids: list[int], pad_id: int,
                  temperature: float, top_p: float, *, batched: bool | None = None) -> list[list[int]]:
    """One turn for each context, generated together, each cut after its first end-of-turn token and at its own
    token budget: the sampled ids as they are (token in / token out).

    ``batched`` picks how: True — transformers' continuous batching (:func:`~shoparena.llm.hf_batching.decode_once`:
    paged attention, no padding, each turn stops at its own end token or budget); False — one left-padded
    ``model.generate``; None (default) — continuous batching on CUDA, left padding on a CPU. Both are greedy at
    temperature 0 (the same ids on a CPU in float32) and both sample from the caller's torch RNG state, so a seeded
    caller gets the same turns again; the two draw differently, so a seeded sample is not the same across paths."""
    import torch

    assert not model.training, "sampling in train mode (docs/training.md §7 bug #2)"
    device = next(model.parameters()).device
    if batched is None:
        batched = device.type == "cuda"
    if batched:
        from shoparena.llm.hf_batching import decode_once

        turns = decode_once(model, contexts, max_new, eos_ids, temperature=temperature, top_p=top_p)
        return [_cut_turn(turn, budget, eos_ids) for turn, budget in zip(turns, max_new, strict=True)]
    width = max(map(len, contexts))
    ids = torch.full((len(contexts), width), pad_id, dtype=torch.long)
    mask = torch.zeros_like(ids)
    for i, ctx in enumerate(contexts):
        ids[i, width - len(ctx):] = torch.tensor(ctx)
        mask[i, width - len(ctx):] = 1
    kwargs: dict[str, Any] = {"do_sample": True, "temperature": temperature, "top_p": top_p} if temperature > 0 \
        else {"do_sample": False}
    with torch.no_grad():
        out = model.generate(input_ids=ids.to(device), attention_mask=mask.to(device), max_new_tokens=max(max_new),
                             eos_token_id=eos_ids, pad_token_id=pad_id, **kwargs)
    return [_cut_turn(row, budget, eos_ids) for row, budget in zip(out[:, width:].tolist(), max_new, strict=True)]


def _cut_turn(row: list[int], budget: int, eos_ids: list[int]) -> list[int]:
    """A generated row at its budget, up to and including its first end-of-turn token."""
    new = row[:budget]
    cut = next((i + 1 for i, tok in enumerate(new) if tok in eos_ids), len(new))
    return new[:cut]


class _Player:
    """One episode's state between turns: the environment's loop, the token ids so far, the parsed steps."""

    def __init__(self, env: RolloutEnv, tokenizer: Any, row: dict[str, Any], eos_ids: list[int],
                 max_completion_length: int, turn_max_tokens: int) -> None:
        from shoparena.env.runner import EpisodeLoop, resolve_config

        self.env, self.tokenizer, self.row, self.eos_ids = env, tokenizer, row, eos_ids
        self.max_len, self.turn_max = max_completion_length, turn_max_tokens
        self.problem = env.problem(row)
        self.loop = EpisodeLoop(self.problem, env.search, resolve_config(protocol="native", profile="upstream4",
                                                                         max_steps=env.max_turns))
        self.ep = TokenEpisode(prompt_ids=render_prompt_ids(tokenizer, with_system(row["prompt"], env.system),
                                                            row.get("tools")))
        self.done = False
        self._context: list[int] = []

    def request(self) -> tuple[list[int], int] | None:
        """The next turn's context and token budget, or None when the episode is over."""
        ep = self.ep
        if self.loop.next_request() is None:
            return self._stop("max_turns")
        room = self.max_len - len(ep.completion_ids)
        if room <= 0:
            return self._stop("length")
        self._context = ep.prompt_ids + ep.completion_ids
        return self._context, min(self.turn_max, room)

    def _stop(self, why: str) -> None:
        self.ep.stop, self.done = why, True
        return None

    def consume(self, sampled: list[int]) -> None:
        """Append the sampled turn, run its calls in the environment, append the rendered tool results."""
        from shoparena.llm.hf_backend import completion_to_message

        ep = self.ep
        ep.completion_ids += sampled
        ep.env_mask += [1] * len(sampled)
        # token in / token out: the model saw exactly prompt + completion so far (bug #6)
        assert ep.prompt_ids + ep.completion_ids[:len(self._context) - len(ep.prompt_ids)] == self._context
        ended = bool(sampled) and sampled[-1] in self.eos_ids
        text = self.tokenizer.decode(sampled[:-1] if ended else sampled, skip_special_tokens=False)
        message = completion_to_message(text)
        calls = [{"name": c.name, "arguments": c.arguments} for c in message.tool_calls]
        callless = not calls and "<tool_call>" not in text
        ep.steps.append(calls if calls or callless else None)
        if callless:
            ep.callless_turns += 1
            ep.think_then_stop_turns += states_decision(turn_text({"reasoning_content": message.reasoning_content,
                                                                   "content": message.content}))
        before = len(self.loop.native)
        self.loop.submit(message)
        if not ended:
            return self._stop("length")
        if self.loop.stop is not None:
            return self._stop(self.loop.stop)
        stop_call = next((c["name"] for c in calls if c["name"] in STOP_CALLS), None)
        if stop_call is not None:
            return self._stop(stop_call)
        tool_messages = compact_messages([m for m in self.loop.native[before:] if m["role"] == "tool"],
                                         self.env.compact)
        suffix = tool_suffix_ids(self.tokenizer, tool_messages)
        if len(ep.completion_ids) + len(suffix) >= self.max_len:
            return self._stop("length")
        ep.completion_ids += suffix
        ep.env_mask += [0] * len(suffix)
        ep.observations.append(tool_messages)
        return None

    def finish(self, w: float, stop_penalty: float = 0.0, callless: Callless = "aligned") -> TokenEpisode:
        ep = self.ep
        episode = self.loop.finish()
        score = self.env.scorer.score_steps(self.problem, episode.steps)
        ep.recommended = episode.recommendation
        ep.outcome = 1.0 if score.success else 0.0
        ep.tool_match = mean_step_match(ep.steps, self.row["reference_steps"], callless)
        ep.reward_before_penalty = blended_reward(ep.outcome, ep.tool_match, w)
        ep.called_recommend = any(c["name"] == "recommend_product" for step in ep.steps if step for c in step)
        ep.penalty = 0.0 if ep.called_recommend else stop_penalty
        ep.reward = penalised_reward(ep.reward_before_penalty, ep.called_recommend, stop_penalty)
        return ep


class TurnSampler(Protocol):
    """Samples turns for :func:`run_token_episodes` from a copy of ``model`` outside torch (an inference engine).

    :meth:`start` is called once before the first turn with the policy to copy, the number of episodes and the
    longest context a turn may have (prompt + whole-episode budget); :meth:`sample` from one thread per episode at
    once, each call one turn: the sampled ids, cut after the first end-of-turn id and at ``max_new``; :meth:`stop`
    once after the last turn (also when an episode failed)."""

    def start(self, model: Any, episodes: int, context: int) -> None: ...

    def sample(self, context: list[int], max_new: int, eos_ids: list[int], *, episode: int, turn: int,
               temperature: float, top_p: float) -> list[int]: ...

    def stop(self) -> None: ...


def run_token_episodes(model: Any, tokenizer: Any, env: RolloutEnv, rows: Sequence[dict[str, Any]], *,
                       max_completion_length: int, turn_max_tokens: int, temperature: float, top_p: float,
                       w: float = 0.5, sampler: TurnSampler | None = None, stop_penalty: float = 0.0,
                       callless: Callless = "aligned") -> list[TokenEpisode]:
    """Play one episode per row with ``model`` (module docstring). Without ``sampler``: in lockstep, each turn of
    every unfinished episode sampled in one batched ``generate`` call. With one: every episode plays its own turn
    loop in its own thread, each turn sampled by ``sampler`` (the episode's index and turn number say which draw),
    the environment's side of a turn (parsing, tool calls, rendering) one episode at a time. Both paths score the
    same way: ``stop_penalty`` and ``callless`` as in the module docstring (the defaults score with the blend alone)."""
    check_callless(callless)  # before any episode is played
    check_stop_penalty(stop_penalty)
    eos_ids, pad = turn_end_ids(tokenizer, model)
    players = [_Player(env, tokenizer, row, eos_ids, max_completion_length, turn_max_tokens) for row in rows]
    if sampler is not None:
        _play_threaded(players, sampler, model, eos_ids, max_completion_length, temperature, top_p)
        return [p.finish(w, stop_penalty, callless) for p in players]
    while True:
        asks = [(p, req) for p in players if not p.done and (req := p.request()) is not None]
        if not asks:
            break
        turns = sample_turns(model, [req[0] for _, req in asks], [req[1] for _, req in asks], eos_ids, pad,
                              temperature, top_p)
        for (player, _), sampled in zip(asks, turns, strict=True):
            player.consume(sampled)
    return [p.finish(w, stop_penalty, callless) for p in players]


def _play_threaded(players: list[_Player], sampler: TurnSampler, model: Any, eos_ids: list[int],
                   max_completion_length: int, temperature: float, top_p: float) -> None:
    """Each player's turn loop in its own thread; the environment side (tokenizer, search service, episode loop)
    under one lock, so only the sampling runs concurrently."""
    if not players:
        return
    env_lock = threading.Lock()

    def play(index: int, player: _Player) -> None:
        turn = 0
        while True:
            with env_lock:
                req = None if player.done else player.request()
            if req is None:
                return
            sampled = sampler.sample(req[0], req[1], eos_ids, episode=index, turn=turn, temperature=temperature,
                                     top_p=top_p)
            with env_lock:
                player.consume(sampled)
            turn += 1

    longest = max(len(p.ep.prompt_ids) for p in players) + max_completion_length
    sampler.start(model, len(players), longest)
    try:
        with ThreadPoolExecutor(max_workers=len(players), thread_name_prefix="episode") as pool:
            futures = [pool.submit(play, i, p) for i, p in enumerate(players)]
            for future in futures:
                future.result()
    finally:
        sampler.stop()


def sample_concurrently(sampler: TurnSampler, model: Any, contexts: list[list[int]], max_new: list[int],
                        eos_ids: list[int], temperature: float, top_p: float) -> list[list[int]]:
    """One turn for each context through ``sampler``, all submitted at once (one thread each): the single-turn
    counterpart of :func:`sample_turns` (context ``i`` draws as episode ``i``, turn 0)."""
    if not contexts:
        return []
    sampler.start(model, len(contexts), max(len(c) + n for c, n in zip(contexts, max_new, strict=True)))
    try:
        with ThreadPoolExecutor(max_workers=len(contexts), thread_name_prefix="turn") as pool:
            futures = [pool.submit(sampler.sample, ctx, n, eos_ids, episode=i, turn=0, temperature=temperature,
                                   top_p=top_p) for i, (ctx, n) in enumerate(zip(contexts, max_new, strict=True))]
            return [f.result() for f in futures]
    finally:
        sampler.stop()


def run_token_episode(model: Any, tokenizer: Any, env: RolloutEnv, row: dict[str, Any], **settings: Any,
                      ) -> TokenEpisode:
    """Play one episode of ``row`` (:func:`run_token_episodes` with one row)."""
    return run_token_episodes(model, tokenizer, env, [row], **settings)[0]


def turn_end_ids(tokenizer: Any, model: Any) -> tuple[list[int], int]:
    """``(end-of-turn ids, pad id)`` for :func:`sample_turns`: the tokenizer's end token and those of ``model``'s
    generation config; the tokenizer's pad token, else the first end id."""
    config = getattr(model, "generation_config", None)
    eos = getattr(config, "eos_token_id", None)
    configured = list(eos) if isinstance(eos, list) else [eos] if eos is not None else []
    eos_ids = sorted({tokenizer.eos_token_id, *configured} - {None})
    return eos_ids, tokenizer.pad_token_id if tokenizer.pad_token_id is not None else eos_ids[0]
