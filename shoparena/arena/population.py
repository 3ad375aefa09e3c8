"""The simulated miner population: who submits what, and the single-file agents they submit.

Each :class:`MinerProfile` is one team: an agent strategy (agentic ``react`` / ``oro7``, sub-task ``pipeline``, an
LLM-free ``keyword`` script, or hostile code), the offline policy model it calls, and optionally an improved
version it resubmits on a later day. :func:`agent_source` renders the file a miner submits — ordinary single-file
agents over :mod:`shoparena.sdk`, exactly what a real miner could upload. :func:`default_population` gives a
deterministic mix for ``shoparena arena simulate``: mostly honest teams of varying skill, one LLM-free script
(passes the gate, but the judge coefficient caps it), and one team that pastes ground truth into its file (the
submission gate rejects it).

Teams respond to incentives (paper §9, ``docs/incentives.md``): a team with ``responds_at`` set redesigns once when
the richness term of the score (``shoparena.scoring.richness.fold``) withholds more than that share of what its
successful trajectories would earn — ``W·(1 − R)``, ``R`` the mean richness of the trajectories it saw from its
own evaluations the day before. A sub-task ``pipeline`` or a four-tool ``react`` team then rebuilds on ``oro7``
(the model chooses every call, with verification tools); teams without ``responds_at`` keep their design whatever
the score pays (:func:`respond`, a pure function). At weight 0 the term withholds nothing: nobody moves.
"""

from __future__ import annotations

import random
from collections.abc import Sequence
from typing import Literal

from pydantic import BaseModel, ConfigDict

from shoparena.tasks.types import Problem

Strategy = Literal["react", "oro7", "pipeline", "keyword", "answer_table"]
STRATEGIES: tuple[str, ...] = ("react", "oro7", "pipeline", "keyword", "answer_table")


class MinerProfile(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")

    name: str
    strategy: Strategy
    model: str = "policy:careful"
    style: str = "single"
    """How a ReAct-family miner wraps the episode (``single``, ``retry``, ``tags``): teams write different code."""
    extras: int = 0
    """Bit mask of optional helper pieces in the file (see ``_EXTRAS``)."""
    improve_day: int | None = None
    """Day (0-based) on which the miner resubmits an improved version."""
    improved_model: str | None = None
    improved_strategy: Strategy | None = None
    join_day: int = 0
    """Day (0-based) of the miner's first submission: an entrant that joins a running subnet later."""
    responds_at: float | None = None
    """Share of its score the richness term may withhold before the team redesigns (None: it never does)."""
    redesign_day: int | None = None
    """Day (0-based) from which the team runs ``redesign_strategy`` (set by :func:`respond`)."""
    redesign_strategy: Strategy | None = None

    def version(self, day: int) -> tuple[Strategy, str]:
        """The (strategy, model) this miner runs on ``day``."""
        strategy, model = self.strategy, self.model
        if self.improve_day is not None and day >= self.improve_day:
            strategy, model = self.improved_strategy or self.strategy, self.improved_model or self.model
        if self.redesign_day is not None and self.redesign_strategy is not None and day >= self.redesign_day:
            strategy = self.redesign_strategy
        return strategy, model


_HEADER = '"""{name}: {strategy} agent over {model} (submitted by a simulated miner)."""\n\n'

_REACT = {
    # one ReAct episode
    "single": '''from os import environ

from shoparena.env import run_episode
from shoparena.sdk import GatewayPolicy, GatewaySearch

MODEL = "{model}"
PROFILE = "{profile}"


def agent_main(problem_data):
    seed = environ.get("SHOPARENA_SEED")
    policy = GatewayPolicy(model=MODEL, temperature=float(environ.get("SHOPARENA_TEMPERATURE", "0") or 0),
                           seed=int(seed) if seed else None)
    return run_episode(problem_data, policy, GatewaySearch(), protocol="native", profile=PROFILE).steps
''',
    # a second, warmer attempt when the first one ends without a recommendation
    "retry": '''from os import environ

from shoparena.env import run_episode
from shoparena.env.records import last_recommendation
from shoparena.sdk import GatewayPolicy, GatewaySearch

MODEL = "{model}"
PROFILE = "{profile}"
ATTEMPTS = ((0.0, 0), (0.7, 17))


def agent_main(problem_data):
    base = int(environ.get("SHOPARENA_SEED") or 0)
    steps = []
    for temperature, salt in ATTEMPTS:
        policy = GatewayPolicy(model=MODEL, temperature=temperature, seed=base + salt)
        steps = run_episode(problem_data, policy, GatewaySearch(), protocol="native", profile=PROFILE).steps
        if last_recommendation(steps):
            break
    return steps
''',
    # the upstream tag-text protocol, falling back to native tool calls if the reply format breaks
    "tags": '''import os

from shoparena.env import run_episode
from shoparena.sdk import GatewayPolicy, GatewaySearch

MODEL = "{model}"
PROFILE = "{profile}"


def _policy():
    return GatewayPolicy(model=MODEL, temperature=float(os.environ.get("SHOPARENA_TEMPERATURE") or 0),
                         seed=int(os.environ.get("SHOPARENA_SEED") or 0))


def agent_main(problem_data):
    episode = run_episode(problem_data, _policy(), GatewaySearch(), protocol="tags", profile=PROFILE)
    if episode.recommendation is None:
        episode = run_episode(problem_data, _policy(), GatewaySearch(), protocol="native", profile=PROFILE)
    return episode.steps
''',
}
STYLES: tuple[str, ...] = tuple(_REACT)

_PIPELINE = '''from os import environ

from shoparena.agents import pipeline as _pipeline

MODEL = "{model}"


def agent_main(problem_data):
    environ["SHOPARENA_MODEL"] = MODEL
    return _pipeline.agent_main(problem_data)
'''

_KEYWORD = '''import re
import time

from shoparena.env.protocol_tags import Parsed, make_call, render_content
from shoparena.env.records import make_step
from shoparena.sdk import find_product


def _step(steps, query, pid, think, calls, results):
    made = [make_call(name, params) for name, params in calls]
    parsed = Parsed(think=think, calls=made, content=render_content(think, made, ""))
    steps.append(make_step(parsed, results, step=len(steps) + 1, query=query, timestamp=int(time.time() * 1000),
                           problem_id=pid))


def agent_main(problem_data):
    query, pid = problem_data["query"], problem_data.get("problem_id")
    words = [w for w in re.findall(r"[a-z]+", query.split("My budget")[0].lower()) if len(w) > 3][:5]
    steps = []
    found = find_product(q=" ".join(words), page=1)
    found = found if isinstance(found, list) else []
    _step(steps, query, pid, "I carefully analysed every candidate and compared them thoroughly.",
          [("find_product", {{"q": " ".join(words), "page": 1}})], [found])
    ids = ",".join(p["product_id"] for p in found[:1])
    _step(steps, query, pid, "The first result is clearly the best match.",
          [("recommend_product", {{"product_ids": ids}}), ("terminate", {{"status": "success"}})],
          [f"Having recommended the products to the user: {{ids}}", "success"])
    return steps
'''

_ANSWER_TABLE = '''ANSWERS = {table}


def agent_main(problem_data):
    ids = ANSWERS.get(problem_data["query"], "")
    call = {{"name": "recommend_product", "parameters": {{"product_ids": ids}}}}
    return [{{"completion": {{"content": "", "message": {{"tool_call": [call]}}}}, "extra_info": {{"step": 1}}}}]
'''


#: Optional pieces teams add around the episode; which ones a team uses makes its code its own (the arena's
#: similarity check compares submissions with released agents, ignoring names and literals).
_EXTRAS = (
    ('''

def _public(problem_data):
    """Only what the episode needs from the problem."""
    return {key: problem_data[key] for key in ("problem_id", "query") if key in problem_data}
''', "problem_data = _public(problem_data)"),
    ('''

CALLS = []


def _count(steps):
    CALLS.append(sum(len(s.get("completion", {}).get("message", {}).get("tool_call") or []) for s in steps))
    return steps
''', None),
    ('''

def _check(problem_data):
    if not str(problem_data.get("query", "")).strip():
        raise ValueError("empty query")
''', "_check(problem_data)"),
)


def _with_extras(code: str, mask: int) -> str:
    """Add the optional pieces selected by ``mask`` to a ReAct-family file."""
    helpers = "".join(block for i, (block, _) in enumerate(_EXTRAS) if mask >> i & 1)
    calls = [call for i, (_, call) in enumerate(_EXTRAS) if mask >> i & 1 and call]
    head, sep, body = code.partition("def agent_main(problem_data):\n")
    body = "".join(f"    {c}\n" for c in calls) + body
    if mask >> 1 & 1:  # wrap the final return of agent_main
        lines = body.rstrip("\n").split("\n")
        last = max(i for i, line in enumerate(lines) if line.startswith("    return "))
        lines[last] = "    return _count(" + lines[last][len("    return "):] + ")"
        body = "\n".join(lines) + "\n"
    return head.rstrip("\n") + "\n" + helpers + "\n\n" + sep + body


def agent_source(profile: MinerProfile, day: int, *, leaked: Sequence[Problem] = ()) -> str:
    """The agent file ``profile`` submits on ``day`` (``leaked``: problems an answer-table miner copies)."""
    strategy, model = profile.version(day)
    head = _HEADER.format(name=profile.name, strategy=strategy, model=model)
    if strategy in ("react", "oro7"):
        code = _REACT[profile.style].format(model=model, profile="upstream4" if strategy == "react" else "oro7")
        return head + _with_extras(code, profile.extras)
    if strategy == "pipeline":
        return head + _with_extras(_PIPELINE.format(model=model), profile.extras)
    if strategy == "keyword":
        return head + _KEYWORD.format()
    table = {p.query: ",".join(p.gt_ids()) for p in leaked[:20]}
    return head + _ANSWER_TABLE.format(table=repr(table))


REDESIGNS: dict[str, Strategy] = {"pipeline": "oro7", "react": "oro7"}
"""What a responsive team rebuilds on when richness pays: the agentic design with the most model-chosen calls."""
RESPONSES: tuple[float | None, ...] = (None, None, 0.05, 0.1, 0.2, 0.3)
"""The ``responds_at`` each honest pipeline/react team draws from: a third stay, the rest redesign once the richness
term withholds more than 5 … 30 % of their score."""


def respond(profile: MinerProfile, day: int, *, weight: float, richness: float | None) -> MinerProfile | None:
    """The team's redesign on ``day`` (a copy with ``redesign_day``/``redesign_strategy`` set), or None when it keeps
    its design: it does not respond to incentives, redesigned already, has no richer design to move to, saw no
    trajectory of its own (``richness`` None), or ``weight·(1 − richness)`` ≤ its ``responds_at``."""
    if profile.responds_at is None or profile.redesign_day is not None or richness is None or weight <= 0:
        return None
    target = REDESIGNS.get(profile.version(day)[0])
    if target is None or weight * (1.0 - richness) <= profile.responds_at:
        return None
    return profile.model_copy(update={"redesign_day": day, "redesign_strategy": target})


def default_population(n: int, seed: int = 0) -> list[MinerProfile]:
    """``n`` miners: one answer-table cheat and one LLM-free keyword script (when n ≥ 6), the rest honest teams
    of mixed skill and strategy, some of which resubmit a better version on day 1, and some of which respond to a
    richness incentive (``responds_at`` dealt from :data:`RESPONSES` in an order from its own seeded stream, so the
    rest of the population is what it was before the option existed)."""
    rng = random.Random(seed)
    responses = list(RESPONSES)  # dealt in a seeded order, so a third of the eligible teams stay whatever the size
    random.Random(f"shoparena-responses:{seed}").shuffle(responses)
    dealt = 0
    out: list[MinerProfile] = []
    special = [("answer_table", "policy:novice"), ("keyword", "policy:novice")] if n >= 6 else []
    honest = n - len(special)
    models = ("policy:novice", "policy:careful", "policy:expert")
    for i in range(honest):
        strategy = ("react", "oro7", "pipeline")[i % 3]
        model = models[rng.randrange(3)] if i > 2 else models[i % 3]
        improve = 1 if (model != "policy:expert" and rng.random() < 0.5) else None
        better = models[min(2, models.index(model) + 1)] if improve is not None else None
        responds = None
        if strategy in REDESIGNS:
            responds, dealt = responses[dealt % len(responses)], dealt + 1
        out.append(MinerProfile(name=f"miner-{i:02d}", strategy=strategy, model=model, improve_day=improve,  # type: ignore[arg-type]
                                improved_model=better, style=STYLES[(i + i // 3) % len(STYLES)], extras=(i // 3) % 8,
                                responds_at=responds))
    for j, (strategy, model) in enumerate(special):
        out.append(MinerProfile(name=f"miner-{honest + j:02d}", strategy=strategy, model=model))  # type: ignore[arg-type]
    return out
