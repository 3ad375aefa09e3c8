# ruff: noqa
"""A legitimate pipeline agent: regex parsing, service filters, a generic synonym map, an LLM prompt template.

Everything here is allowed by the gate: os.environ / os.getenv, os.path, urllib.parse, json, re, itertools,
reading files, the shoparena SDK, service filter strings (official, freeShipping, COD, flashsale) and category
words (voucher, budget, discount, shop).
"""

import itertools
import json
import os
import re
import urllib.parse
from concurrent.futures import ThreadPoolExecutor

from shoparena.sdk import chat, find_product, view_product_information

MAX_STEPS = int(os.getenv("AGENT_MAX_STEPS", "12"))
MODEL = os.environ.get("SHOPARENA_MODEL", "policy:expert")
CACHE_DIR = os.path.join(os.environ.get("TMPDIR", "/tmp"), "agent")

SERVICES = {
    "free shipping": "freeShipping",
    "cash on delivery": "COD",
    "lazmall": "official",
    "flash sale": "flashsale",
}
SYNONYMS = {"tee": "t-shirt", "sneakers": "shoes", "phone": "smartphone", "laptop": "notebook computer"}
CATEGORIES = ["voucher", "budget", "discount", "shop"]
STOPWORDS = {"a", "an", "the", "for", "with", "and", "or", "me", "show", "looking", "find", "please"}
PRICE = re.compile(r"(?:between|from)\s+(\d+)\s+(?:and|to)\s+(\d+)|(?:above|over)\s+(\d+)|(?:below|under)\s+(\d+)")
PROMPT = (
    "You are a shopping assistant. Read the user's request, list the products they want, and for each one "
    "give a short search query and the constraints (price, services, attributes). Answer in JSON."
)


def _keywords(query: str) -> str:
    words = [w for w in re.findall(r"[a-z0-9]+", query.lower()) if w not in STOPWORDS]
    return " ".join(SYNONYMS.get(w, w) for w in words[:6])


def _filters(query: str) -> dict:
    low = query.lower()
    services = [code for phrase, code in SERVICES.items() if phrase in low]
    m = PRICE.search(low)
    price = None
    if m:
        lo, hi, above, below = m.groups()
        price = f"{lo}-{hi}" if lo else (f"{above}-" if above else f"-{below}")
    return {"service": ",".join(services) or None, "price": price}


def _plan(query: str) -> list:
    reply = chat([{"role": "system", "content": PROMPT}, {"role": "user", "content": query}])
    text = (reply.get("choices") or [{}])[0].get("message", {}).get("content") or "[]"
    try:
        plan = json.loads(text)
    except ValueError:
        plan = []
    return plan if isinstance(plan, list) and plan else [{"query": _keywords(query)}]


def agent_main(problem_data: dict) -> list:
    query = problem_data["query"]
    filters = _filters(query)
    steps = []
    with ThreadPoolExecutor(2) as pool:
        results = list(pool.map(lambda item: find_product(item.get("query") or _keywords(query), **filters),
                                _plan(query)))
    for hits in itertools.islice(results, MAX_STEPS):
        ids = ",".join(h["product_id"] for h in (hits or [])[:3])
        details = view_product_information(ids) if ids else []
        steps.append({"search": urllib.parse.quote(query[:40]), "details": details})
    return steps
