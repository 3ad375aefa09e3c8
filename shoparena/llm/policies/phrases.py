"""Reading one requested item: its head noun, price range, services and attribute/option phrases.

An item description is a head noun phrase followed by constraint phrases (``a violin bow made of horsetail, in
size 4/4, and with free shipping``; ``women's jeans in size eu:30 with a baggy fit … priced above 114 PHP``).
Prices need a currency word or a price word nearby (``up to 5kg`` is not a price); services are the four
Lazada codes under their usual names (LazMall, free delivery, COD, LazFlash …); every other phrase becomes a
:class:`Req` whose value is matched later against a product's attribute and SKU values.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import lru_cache

import regex as re

__all__ = ["ItemSpec", "Price", "Req", "find_price", "find_services", "norm_words", "parse_item", "singular"]

_NUM = r"(\d[\d,]*(?:\.\d+)?)"
_CUR = r"(?:₱\s*|php\s*)?"
_UNIT = r"\s*(?:php|pesos?|₱)"
_PRICE_WORD = re.compile(r"\b(?:pric\w*|costs?|costing|budget|worth|php|pesos?)\b|₱", re.I)
_BETWEEN = re.compile(rf"\b(?:between|from|ranging from|range of|in the|within)\s+{_CUR}{_NUM}(?:{_UNIT})?\s*"
                      rf"(?:and|to|-|–)\s*{_CUR}{_NUM}((?:{_UNIT})?)(?:\s+range)?", re.I)
_DASH = re.compile(rf"{_CUR}{_NUM}\s*(?:-|–|to)\s*{_CUR}{_NUM}((?:{_UNIT}))", re.I)
_ABOVE = re.compile(rf"\b(?:above|over|more than|higher than|greater than|at least|exceeding|minimum of|"
                    rf"no less than|not less than|starting (?:at|from))\s+{_CUR}{_NUM}((?:{_UNIT})?)", re.I)
_BELOW = re.compile(rf"\b(?:below|under|less than|at most|up to|no more than|cheaper than|lower than|"
                    rf"maximum of|not exceeding|not more than)\s+{_CUR}{_NUM}((?:{_UNIT})?)", re.I)

SERVICE_PATTERNS: dict[str, re.Pattern[str]] = {
    "official": re.compile(r"\blaz\s?mall\b|\bofficial (?:lazmall )?(?:store|shop|seller|brand store)\b", re.I),
    "freeShipping": re.compile(r"\bfree[- ](?:shipping|delivery)\b|\bshipped (?:for|at no) (?:free|cost)\b|"
                               r"\bcomplimentary (?:shipping|delivery)\b|\bships? (?:for )?free\b", re.I),
    "COD": re.compile(r"\bcash[- ]on[- ]delivery\b|\bCOD\b|\bpay(?:ment)? (?:up)?on delivery\b", re.I),
    "flashsale": re.compile(r"\bflash[- ]?sales?\b|\blaz\s?flash\b", re.I),
}
SERVICE_ORDER: tuple[str, ...] = ("official", "freeShipping", "COD", "flashsale")

_WORD = re.compile(r"[a-z0-9]+(?:[.:/'&+-][a-z0-9]+)*")
_ARTICLE = re.compile(r"^(?:a|an|the|some|one|another|any|also)\s+", re.I)
_HEAD_END = re.compile(
    r",|;|\(|\s(?:in|made|with|without|from|by|featuring|size|model|for model|having|where|priced|costing|costs?|"
    r"available|payable|shipped|on flash|above|over|under|below|sold|that|which|offered|carrying|"
    r"priced|at|suitable|compatible)\b", re.I)
_PHRASE_SPLIT = re.compile(
    r"\s*,\s*(?:and\s+)?|\s*;\s*|\s+and\s+(?=(?:in|made|with|from|by|featuring|size|model|for|having|where|priced|"
    r"costing|available|payable|shipped|on|above|under|sold|costs?)\b)", re.I)
_VALUE_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple((k, re.compile(p, re.I)) for k, p in (
    ("pattern", r"^(?:with|featuring) an? (.+) (?:pattern|design)$"), ("pattern", r"^in an? (.+) (?:design|pattern)$"),
    ("size", r"^in (?:the )?size (.+)$"), ("size", r"^size (.+)$"), ("size", r"^in the (.+) size$"),
    ("material", r"^made (?:of|from) (.+)$"), ("material", r"^with (.+) material$"),
    ("model", r"^(?:in |for )?model (.+)$"),
    ("color", r"^in the colou?r (.+)$"), ("color", r"^in (.+) colou?r$"), ("color", r"^with colou?r option (.+)$"),
    ("brand", r"^from the brand (.+)$"), ("brand", r"^(?:from|by) (.+)$"),
    ("kv", r"^with (.+?): (.+)$"), ("kv", r"^where the (.+?) is (.+)$"),
    ("generic", r"^having (.+)$"), ("generic", r"^with (.+)$"), ("color", r"^in (.+)$"),
))


@dataclass(frozen=True, slots=True)
class Price:
    """A price constraint: ``mode`` ∈ ``less than`` / ``greater than`` / ``between``; open sides are None."""

    mode: str
    lo: float | None
    hi: float | None

    def ok(self, price: float | None) -> bool:
        if price is None:
            return False
        return (self.lo is None or price >= self.lo) and (self.hi is None or price <= self.hi)

    def filter(self) -> str:
        """The ``find_product`` ``price`` argument (``"100-"``, ``"-250"``, ``"100-250"``)."""
        def f(x: float | None) -> str:
            return "" if x is None else (str(int(x)) if float(x).is_integer() else str(x))
        return f"{f(self.lo)}-{f(self.hi)}"

    def text(self) -> str:
        if self.mode == "between":
            return f"between {self.lo:g} and {self.hi:g} PHP"
        return f"above {self.lo:g} PHP" if self.mode == "greater than" else f"below {self.hi:g} PHP"


@dataclass(frozen=True, slots=True)
class Req:
    """One attribute/option phrase. ``kind``: color, size, material, brand, pattern, model (a key family and a
    value), kv (key words and value), generic (key and value words not separable: ``top fit types regular``)."""

    kind: str
    value: str
    key: str = ""

    @property
    def text(self) -> str:
        return f"{self.key} {self.value}".strip() if self.kind in ("kv", "generic") else self.value


@dataclass(frozen=True, slots=True)
class ItemSpec:
    """One requested product as understood from the text."""

    text: str
    noun: str
    price: Price | None = None
    services: tuple[str, ...] = ()
    reqs: tuple[Req, ...] = field(default=())

    def value_words(self) -> list[str]:
        """Search words from the requirement values (typed values first, then generic phrases)."""
        out: list[str] = []
        for r in sorted(self.reqs, key=lambda r: r.kind in ("generic", "kv")):
            out.append(r.value if r.kind != "generic" else r.text)
        return out


def singular(word: str) -> str:
    if word.endswith("ies") and len(word) > 4:
        return word[:-3] + "y"
    if word.endswith(("sses", "xes", "ches", "shes")):
        return word[:-2]
    if word.endswith("s") and not word.endswith(("ss", "us", "is")) and len(word) > 3:
        return word[:-1]
    return word


@lru_cache(maxsize=65536)
def _norm_words(text: str) -> tuple[str, ...]:
    return tuple(singular(w) for w in _WORD.findall(text.lower()))


def norm_words(text: str) -> list[str]:
    """Lowercase word tokens, singularised (cached by text)."""
    return list(_norm_words(text))


def _num(text: str) -> float:
    value = float(text.replace(",", ""))
    return int(value) if value.is_integer() else value  # type: ignore[return-value]


def _priced(text: str, start: int, unit: str) -> bool:
    return bool(unit.strip()) or bool(_PRICE_WORD.search(text[max(0, start - 40):start]))


def find_price(text: str) -> tuple[Price | None, tuple[int, int] | None]:
    """The first price constraint in ``text`` and its span (None when there is none)."""
    found: list[tuple[int, Price, tuple[int, int]]] = []
    for rx in (_BETWEEN, _DASH):
        for m in rx.finditer(text):
            if _priced(text, m.start(), m.group(3)) or "php" in text[m.end():m.end() + 8].lower():
                lo, hi = _num(m.group(1)), _num(m.group(2))
                found.append((m.start(), Price("between", min(lo, hi), max(lo, hi)), m.span()))
                break
    for rx, mode in ((_ABOVE, "greater than"), (_BELOW, "less than")):
        for m in rx.finditer(text):
            if _priced(text, m.start(), m.group(2)):
                v = _num(m.group(1))
                price = Price(mode, v, None) if mode == "greater than" else Price(mode, None, v)
                found.append((m.start(), price, m.span()))
                break
    if not found:
        return None, None
    found.sort(key=lambda f: f[0])
    return found[0][1], found[0][2]


def find_services(text: str) -> tuple[str, ...]:
    """Service codes mentioned in ``text`` (canonical order)."""
    return tuple(code for code in SERVICE_ORDER if SERVICE_PATTERNS[code].search(text))


def _is_service(phrase: str) -> bool:
    return any(rx.search(phrase) for rx in SERVICE_PATTERNS.values()) or phrase.lower().startswith(
        ("available for", "available with", "payable by", "on flash", "with lazflash", "in a flash"))


def classify(phrase: str) -> Req | None:
    """A constraint phrase as a :class:`Req` (None for price/service phrases and empty ones)."""
    p = phrase.strip(" .,;!?").strip()
    if not p or _is_service(p) or find_price(p)[0] is not None:
        return None
    for kind, rx in _VALUE_PATTERNS:
        m = rx.match(p)
        if m:
            if kind == "kv":
                return Req("kv", m.group(2).strip().lower(), m.group(1).strip().lower())
            if kind == "generic":
                return Req("generic", m.group(1).strip().lower())
            return Req(kind, m.group(1).strip().lower())
    return Req("generic", p.lower())


def split_head(desc: str) -> tuple[str, str]:
    """``(head, rest)``: the head noun phrase and the constraint phrases after it."""
    m = _HEAD_END.search(desc)
    if not m:
        return desc.strip(), ""
    return desc[:m.start()].strip(), desc[m.start():].lstrip(",;( ").strip()


def parse_item(text: str) -> ItemSpec:
    """Head noun, price, services and value phrases of one item description."""
    desc = text.strip().strip(".?!").strip()
    price, _ = find_price(desc)
    services = find_services(desc)
    head, rest = split_head(desc)
    if len(_ARTICLE.sub("", head)) <= 2 and rest:  # "3 in 1 coffee": the head stops at "in"
        more, rest = split_head(rest.split(" ", 1)[1] if " " in rest else "")
        head = f"{head} {desc[len(head):].split()[0]} {more}".strip()
    noun = _ARTICLE.sub("", head).strip(" ,.;:'\"") or head
    reqs: list[Req] = []
    phrases: list[str] = []
    for phrase in _PHRASE_SPLIT.split(rest.rstrip(")")) if rest else []:
        if phrases and len(phrase.split()) < 2 and not _is_service(phrase):  # "3 years and above"
            phrases[-1] = f"{phrases[-1]} and {phrase}"
        else:
            phrases.append(phrase)
    for phrase in phrases:
        req = classify(phrase)
        if req is not None and req not in reqs and req.value:
            reqs.append(req)
    return ItemSpec(text=desc, noun=noun.lower(), price=price, services=services, reqs=tuple(reqs))
