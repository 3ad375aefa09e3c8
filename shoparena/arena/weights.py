"""ORO's top-50 % weight rule (docs/arena.md §9) as a pure function of (finishers, metagraph hotkeys, t_top, t_burn).

1. Finishers whose hotkey is not in the metagraph are dropped first, and so is one at uid 0 (the burn sink:
   weight there is indistinguishable from burn); a hotkey listed twice keeps its best entry.
2. Rank by ``race_score`` desc, then ``agent_version_id`` asc (ints before strings), then hotkey asc (a total
   order, so any input order gives the same vector). N finishers, K = ⌊N/2⌋.
3. K = 0 → everything to uid 0. Otherwise ranks 2..K get K+1−rank (K−1 … 1), the bottom half 0; the burn is
   pinned at 65535 on uid 0; ``total = (65535 + tail)/t_burn``; rank 1 gets ``top = round(t_top·total)``, so the
   top share is t_top and the tail is carved out of the burn.

Worked example (§9), N = 6: K = 3, tail = 2 + 1 = 3, total = 65538/0.75 = 87384, top = 21846 → uid 0 65535,
rank 1 21846, rank 2 → 2, rank 3 → 1 (shares 0.749966 / 0.250000 / 0.000034).

Beyond ORO's defaults: if ``top`` would not fit in a u16 (t_top close to or above t_burn with a long tail), the
top is pinned at 65535 instead and the burn becomes ``round(t_burn·65535/t_top) − tail``; a split that cannot
be expressed in u16 at all raises :class:`~shoparena.errors.ConfigError`.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence

from pydantic import BaseModel, ConfigDict

from shoparena.errors import ConfigError

__all__ = ["BURN_UID", "U16_MAX", "Finisher", "build_weights", "rank_finishers", "weight_shares"]

U16_MAX = 65535
BURN_UID = 0


class Finisher(BaseModel):
    """A qualifier with a race score in the newest completed race."""

    model_config = ConfigDict(frozen=True, extra="forbid", allow_inf_nan=False)

    hotkey: str
    race_score: float
    agent_version_id: int | str


def _order(f: Finisher) -> tuple[float, int, int | str, str]:
    vid = f.agent_version_id
    return (-f.race_score, 0 if isinstance(vid, int) else 1, vid, f.hotkey)


def rank_finishers(finishers: Iterable[Finisher] | None, metagraph_hotkeys: Sequence[str]) -> list[Finisher]:
    """The finishers that count, best first (steps 1–2 above)."""
    uid_of: dict[str, int] = {}
    for uid, hk in enumerate(metagraph_hotkeys):
        uid_of.setdefault(hk, uid)
    ranked, seen = [], set()
    for f in sorted(finishers or (), key=_order):
        if uid_of.get(f.hotkey, BURN_UID) == BURN_UID or f.hotkey in seen:
            continue
        seen.add(f.hotkey)
        ranked.append(f)
    return ranked


def _check_split(t_top: float, t_burn: float) -> None:
    if not (math.isfinite(t_top) and math.isfinite(t_burn)) or t_top < 0 or t_burn <= 0:
        raise ConfigError(f"t_top={t_top} and t_burn={t_burn}: need t_top ≥ 0 and t_burn > 0")
    if abs(t_top + t_burn - 1.0) > 1e-9:
        raise ConfigError(f"t_top + t_burn must be 1, got {t_top} + {t_burn}", hint="ORO uses 0.25 / 0.75")


def build_weights(
    finishers: Iterable[Finisher] | None,
    metagraph_hotkeys: Sequence[str],
    *,
    t_top: float = 0.25,
    t_burn: float = 0.75,
) -> list[int]:
    """The u16 weight of every uid (index = uid, length = ``len(metagraph_hotkeys)``); see the module docstring."""
    _check_split(t_top, t_burn)
    n = len(metagraph_hotkeys)
    if n == 0:
        return []
    vector = [0] * n
    ranked = rank_finishers(finishers, metagraph_hotkeys)
    k = len(ranked) // 2
    if k == 0:
        vector[BURN_UID] = U16_MAX
        return vector
    tail_sum = k * (k - 1) // 2
    burn, top = U16_MAX, round(t_top * ((U16_MAX + tail_sum) / t_burn))
    if top > U16_MAX:
        top, burn = U16_MAX, round(t_burn * U16_MAX / t_top) - tail_sum
        if burn < 0:
            raise ConfigError(f"t_top={t_top} with {len(ranked)} finishers does not fit in u16 weights")
    uid_of = {hk: uid for uid, hk in reversed(list(enumerate(metagraph_hotkeys)))}
    vector[BURN_UID] = burn
    vector[uid_of[ranked[0].hotkey]] = top
    for rank in range(2, k + 1):
        vector[uid_of[ranked[rank - 1].hotkey]] = k + 1 - rank
    return vector


def weight_shares(vector: Sequence[int]) -> list[float]:
    """Each uid's share of the vector's total (all zero for an all-zero vector)."""
    total = sum(vector)
    return [w / total if total else 0.0 for w in vector]
