"""Temperature-driven choices of the offline policies, seeded from the sampling seed and the conversation.

A :class:`Decider` is the only source of randomness a policy has. It is built per episode from
``(policy name, Sampling.seed, the query text)`` and advanced through the recorded turns in order, so every
draw is a function of the seed and the conversation up to that point: replaying a conversation reproduces
every choice (no global state, nothing carried across calls).

- :meth:`Decider.pick` samples an index from ``softmax(scores / T)`` restricted to the ``top_p`` nucleus;
  ``T = 0`` is greedy (first maximum).
- :meth:`Decider.chance` turns a base probability ``p`` (the rate at ``T = 1``) into ``sigmoid(logit(p) / T)``;
  ``T = 0`` is the greedy decision ``p > 0.5``.
- :meth:`Decider.phrase` picks a wording; ``T = 0`` always takes the first one.

``Sampling.seed = None`` is treated as seed 0 (the backends promise a pure function of the request).
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Sequence
from typing import TypeVar

T = TypeVar("T")

__all__ = ["Decider", "stable_seed"]


def stable_seed(*parts: object) -> int:
    """A 64-bit seed from the parts' text (BLAKE2b; stable across processes, unlike ``hash``)."""
    h = hashlib.blake2b(digest_size=8)
    for part in parts:
        h.update(str(part).encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return int.from_bytes(h.digest(), "big")


class Decider:
    """Seeded sampler with a temperature and a nucleus (``top_p``)."""

    __slots__ = ("rng", "temperature", "top_p")

    def __init__(self, seed: int, temperature: float = 0.0, top_p: float = 1.0) -> None:
        self.rng = random.Random(seed)
        self.temperature = max(0.0, float(temperature))
        self.top_p = min(1.0, max(0.0, float(top_p))) or 1.0

    @property
    def greedy(self) -> bool:
        return self.temperature <= 1e-6

    def pick(self, scores: Sequence[float]) -> int:
        """An index drawn from ``softmax(scores / T)`` within the ``top_p`` nucleus (greedy at ``T = 0``)."""
        n = len(scores)
        if n == 0:
            raise ValueError("pick() needs at least one score")
        best = max(range(n), key=lambda i: (scores[i], -i))
        if n == 1 or self.greedy:
            return best
        top = scores[best]
        weights = [math.exp(max(-60.0, (s - top) / self.temperature)) for s in scores]
        if self.top_p < 1.0:
            order = sorted(range(n), key=lambda i: -weights[i])
            total, kept, mass = sum(weights), [], 0.0
            for i in order:
                kept.append(i)
                mass += weights[i] / total
                if mass >= self.top_p:
                    break
            keep = set(kept)
            weights = [w if i in keep else 0.0 for i, w in enumerate(weights)]
        r = self.rng.random() * sum(weights)
        for i, w in enumerate(weights):
            r -= w
            if r < 0:
                return i
        return best

    def choose(self, options: Sequence[T], scores: Sequence[float]) -> T:
        return options[self.pick(scores)]

    def chance(self, p: float) -> bool:
        """True with probability ``p`` at ``T = 1``, sharpened (``T < 1``) or flattened (``T > 1``)."""
        if p <= 0.0:
            return False
        if p >= 1.0:
            return True
        if self.greedy:
            return p > 0.5
        logit = math.log(p / (1 - p)) / self.temperature
        q = 1.0 / (1.0 + math.exp(-max(-60.0, min(60.0, logit))))
        return self.rng.random() < q

    def phrase(self, options: Sequence[str]) -> str:
        """A wording: the first at ``T = 0``, else uniform."""
        if self.greedy or len(options) == 1:
            return options[0]
        return options[self.rng.randrange(len(options))]

    def noise(self, scale: float) -> float:
        """Gaussian noise of standard deviation ``scale · T`` (0 when greedy): a weaker reader's judgement."""
        if self.greedy or scale <= 0:
            return 0.0
        return self.rng.gauss(0.0, scale * self.temperature)
