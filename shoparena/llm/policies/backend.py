"""``PolicyBackend``: an offline policy as a :class:`~shoparena.llm.types.ChatBackend`.

Each request is answered from the conversation alone. The strategy (``flows.play``) is a generator that is
*replayed*: started from the query with a :class:`~shoparena.llm.policies.decide.Decider` seeded by
``(level, Sampling.seed, query)`` and fed every recorded turn in order, so the reply is a pure function of
``(messages, tools, sampling)``.

Replaying every turn on every step would cost O(steps²), so the live generator is kept in a bounded LRU cache
under the fingerprint of the conversation it has answered (plus the sampling key). The next request of the
same episode carries that conversation plus one new turn: the cached generator is popped, fed the new turn
(only that turn's observations are parsed) and stored again. A miss (another process, an eviction, an edited
history, a different seed) replays from scratch and gives the same answer. The cache is memoisation, not state;
a finished episode (its reply calls ``terminate``) is not kept. ``Sampling.seed = None`` counts as seed 0, so a
harness that wants pass@k passes a different seed per sample; ``max_tokens`` and ``stop`` are ignored, and
``enable_thinking=False`` drops the think from native replies.
"""

from __future__ import annotations

from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

from shoparena.env.types import AssistantMessage, Usage
from shoparena.llm.policies.decide import Decider, stable_seed
from shoparena.llm.policies.engine import Ctx
from shoparena.llm.policies.flows import play
from shoparena.llm.policies.levels import Skill
from shoparena.llm.policies.parse import parse_request
from shoparena.llm.policies.render import Action, render_reply
from shoparena.llm.policies.state import Conversation, all_turns, read_conversation
from shoparena.llm.subtasks import subtask_of
from shoparena.llm.types import Sampling

__all__ = ["PolicyBackend"]


@dataclass(slots=True)
class _Live:
    gen: Any
    expect: list[tuple[str, dict[str, Any]]]


class PolicyBackend:
    """One policy level behind the chat interface (module docstring)."""

    def __init__(self, skill: Skill, *, cache_size: int = 512) -> None:
        self.skill = skill
        self.name = f"policy:{skill.name}"
        self.cache_size = cache_size
        self._live: OrderedDict[int, _Live] = OrderedDict()
        self.replays = 0
        """How many requests had to replay the conversation (cache misses); for benchmarks."""

    async def chat(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                   sampling: Sampling | None = None) -> AssistantMessage:
        return self.complete(messages, tools, sampling)

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> AssistantMessage:
        """The episode runner's ``Policy`` contract, greedy (use ``BackendPolicy`` for other sampling)."""
        return self.complete(messages, tools or None, None)

    def complete(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]] | None = None,
                 sampling: Sampling | None = None) -> AssistantMessage:
        """The synchronous form of :meth:`chat`."""
        sampling = sampling or Sampling()
        seed = 0 if sampling.seed is None else sampling.seed
        task = subtask_of(messages)
        if task is not None:
            from shoparena.llm.policies.subtasks import answer_subtask

            text_key = "\x1e".join(str(m.get("content") or "") for m in messages)
            dec = Decider(stable_seed(self.skill.name, seed, text_key), sampling.temperature, sampling.top_p)
            text = answer_subtask(task, messages, self.skill, dec)
            return AssistantMessage(content=text, usage=Usage(prompt_tokens=len(text_key) // 4 + 1,
                                                              completion_tokens=len(text) // 4 + 1,
                                                              total_tokens=(len(text_key) + len(text)) // 4 + 2))
        conv = read_conversation(messages, tools)
        skey = (seed, sampling.temperature, sampling.top_p)
        action: Action | None = None
        live: _Live | None = None
        if conv.last is not None:
            live = self._live.pop(hash((skey, conv.prefix_key)), None)
            if live is not None and live.expect == conv.last.calls:
                action = live.gen.send(conv.last)
            else:
                live = None
        if live is None or action is None:
            live, action = self._replay(conv, seed, sampling)
        live.expect = action.calls
        if not any(name == "terminate" for name, _ in action.calls):  # a finished episode is not continued
            self._live[hash((skey, conv.key))] = live
            while len(self._live) > self.cache_size:
                self._live.popitem(last=False)
        think = conv.think and not (conv.protocol == "native" and sampling.enable_thinking is False)
        return render_reply(action, protocol=conv.protocol, think=think, native_tools=bool(tools),
                            messages=messages)

    def _replay(self, conv: Conversation, seed: int, sampling: Sampling) -> tuple[_Live, Action]:
        self.replays += 1
        req = parse_request(conv.query)
        dec = Decider(stable_seed(self.skill.name, seed, conv.query), sampling.temperature, sampling.top_p)
        gen = play(Ctx(req, conv.tools, self.skill, dec))
        action: Action = next(gen)
        for turn in all_turns(conv) if conv.n_turns else ():
            action = gen.send(turn)
        return _Live(gen, action.calls), action
