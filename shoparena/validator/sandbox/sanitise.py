"""The problem as an agent may see it: an allowlist, never a denylist.

ORO removes ``reward``, ``voucher`` and ``reward_title_embeddings`` from the problems it hands its sandbox, and its
local runner was reported to leak them anyway (docs/arena.md §4); a denylist misses the next field someone adds. Here
only ``problem_id``, ``query`` and harmless scalar metadata (``bucket`` / ``category``, ``difficulty``,
``title``) survive; a ``title`` that repeats a ground-truth title is dropped too.
"""

from __future__ import annotations

from typing import Any

from shoparena.tasks.types import Problem

__all__ = ["PUBLIC_KEYS", "sanitise"]

#: The only keys a sanitised problem can carry.
PUBLIC_KEYS = ("problem_id", "query", "bucket", "category", "difficulty", "title")
_METADATA = ("bucket", "category", "difficulty", "title")


def _gt_titles(raw: dict[str, Any]) -> list[str]:
    reward = raw.get("reward")
    items = reward if isinstance(reward, list) else [reward]
    titles: list[str] = []
    for item in items:
        if isinstance(item, dict):
            title = item.get("title")
            titles.extend(t for t in (title if isinstance(title, list) else [title]) if isinstance(t, str))
    titles.extend(k for k in (raw.get("reward_title_embeddings") or {}) if isinstance(k, str))
    return titles


def _leaks(value: str, secrets: list[str]) -> bool:
    low = value.strip().lower()
    return any(low and (low in s.lower() or s.lower() in low) for s in secrets if len(s) >= 4)


def sanitise(problem: Problem | dict[str, Any], *, suite: str = "problems") -> dict[str, Any]:
    """``problem`` (a :class:`Problem`, a raw upstream / ORO suite record, or an already sanitised dict) → the
    dict handed to ``agent_main``. A raw record without ``problem_id`` gets the loader's derived id
    (``{suite}:{bucket}:{sha1(query)[:12]}``). Raises ``ValueError`` when there is no non-empty string query."""
    if isinstance(problem, Problem):
        raw: dict[str, Any] = {"problem_id": problem.problem_id, "query": problem.query, "bucket": problem.bucket,
                               "difficulty": problem.difficulty, "title": problem.title}
        secrets = [t for r in problem.reward for t in r.title] + list(problem.reward_title_embeddings or {})
        if problem.knowledge_product is not None:
            secrets.append(problem.knowledge_product.title)
    else:
        raw = problem
        secrets = _gt_titles(problem)
    query = raw.get("query")
    if not isinstance(query, str) or not query.strip():
        raise ValueError("a problem needs a non-empty string 'query'")
    out: dict[str, Any] = {"problem_id": _problem_id(raw, query, suite), "query": query}
    for key in _METADATA:
        value = raw.get(key)
        if isinstance(value, bool) or not isinstance(value, str | int | float):
            continue
        if key == "title" and isinstance(value, str) and _leaks(value, secrets):
            continue
        out[key] = value
    return out


def _problem_id(raw: dict[str, Any], query: str, suite: str) -> str:
    pid = raw.get("problem_id")
    if isinstance(pid, str | int) and not isinstance(pid, bool) and str(pid):
        return str(pid)
    from shoparena.tasks.loader import derive_problem_id

    return derive_problem_id(suite, _bucket(raw), query)


def _bucket(raw: dict[str, Any]) -> str:
    """The bucket as the loader derives it (so a raw record gets the same id as its loaded :class:`Problem`)."""
    named = raw.get("bucket") or raw.get("category")
    if isinstance(named, str) and named:
        low = named.lower()
        return "knowledge" if low in ("web", "web_simpleqa") else low
    if "Knowledge_Attribute" in raw:
        return "knowledge"
    if "voucher" in raw:
        return "voucher"
    return "shop" if isinstance(raw.get("reward"), list) else "product"
