"""The banks' fingerprints: GT ids, ≥ 6-word phrases, exact texts and token statistics of every bank problem.

:class:`PhraseIndex` is built once from all banks (static suites, open bank, held-out bank; docs/arena.md §2.3, our rule)
and answers the integrity rules' questions about a string: which GT ids it contains, which problem-specific
phrases it copies, whether it *is* a query / GT title / Knowledge answer, whether a short fragment or a word pair
points at one problem. Texts are normalised (NFKC, casefold, zero-width characters dropped, punctuation →
word break), so case, spacing and punctuation do not hide a copy.

Template text is not a leak: a 6-word shingle that occurs in ``boilerplate_groups`` or more problem groups (the
voucher rules, "can you help me find a store that sells") is dropped. A group is a leak cluster (``cluster_id``)
or, without one, the canonical query, so one problem repeated across suites counts once.
"""

from __future__ import annotations

import re
import unicodedata
from collections import defaultdict
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from shoparena.tasks.types import Problem

PHRASE_WORDS = 6
PHRASE_CHARS = 30
_WORD = re.compile(r"[^\W_]+(?:[\u00ad\u200b-\u200f\u2060\ufeff]+[^\W_]+)*")
_INVISIBLE = dict.fromkeys(map(ord, "\u00ad\u200b\u200c\u200d\u200e\u200f\u2060\ufeff"))
_DIGITS = re.compile(r"(?<![0-9])[0-9]{6,12}(?![0-9])")
#: Words that never make a suite-specific entry (docs/arena.md §2.3 "allowed"): stopwords, service filter strings,
#: category words and the request template's vocabulary.
ALLOWED_WORDS: frozenset[str] = frozenset("""
a an the and or but if of to in on at by for with from as is are was were be been being it its this that these
those there here what which who whom whose when where why how i me my we our you your he she they them their not
no yes do does did can could should would will shall may might must than then so such very more most less least
any all each every some other another only also just about above below over under between into onto out up down
off again once same both few many much own per via please find show looking look want need like get buy one two
three four five six seven eight nine ten first second third new best good high low top item items product products
official freeshipping free shipping cod cash delivery flashsale flash sale lazmall lazflash voucher vouchers budget
discount discounts shop shops store stores seller sellers price prices priced pesos peso php cost costs costing
total threshold fixed percent percentage cap rules rule valid exceeds applies available offering offers sells
sell sold selling provides provide following have has having purchase lastly additionally comes come deals deal
authenticity guaranteed returns return quick easy perks benefits options option respective categories category
help complimentary interested preferably would like prefer preferred
""".split())
#: Distinct content words (not in :data:`ALLOWED_WORDS`, not numbers) a copied phrase must contain: template
#: sentences with a number filled in ("my budget is only 425 but i have a voucher") are not a problem's text.
MIN_CONTENT_WORDS = 2
#: Words a table entry's fragment must run to count as bank data (see :meth:`PhraseIndex.fragment`).
FRAGMENT_WORDS = 5


class PhraseHit(NamedTuple):
    """A copied phrase: normalised ``phrase``, the ``problem_id`` it comes from, and its span in the text."""

    phrase: str
    problem_id: str
    start: int
    end: int


def normalise(text: str) -> str:
    return unicodedata.normalize("NFKC", text).translate(_INVISIBLE).casefold()


def words(text: str) -> list[tuple[str, int, int]]:
    """``(normalised word, start, end)`` for every word of ``text`` (offsets into the original text)."""
    if text.isascii():
        return [(m.group().lower(), m.start(), m.end()) for m in _WORD.finditer(text)]
    out = []
    for m in _WORD.finditer(text):
        token = m.group()
        if token.isascii():
            out.append((token.lower(), m.start(), m.end()))
            continue
        for w in _WORD.findall(normalise(token)):
            out.append((w, m.start(), m.end()))
    return out


def canonical(text: str) -> str:
    return " ".join(w for w, _, _ in words(text))


def content_tokens(text: str) -> frozenset[str]:
    """Words that can carry a problem's identity: ≥ 3 characters, not all digits, not allowed vocabulary."""
    return frozenset(w for w, _, _ in words(text) if len(w) >= 3 and not w.isdigit() and w not in ALLOWED_WORDS)


def _context(problem: Problem) -> Iterator[tuple[str, str]]:
    """``(kind, text)`` of one problem: its query, GT titles, SKU / attribute values and Knowledge answer."""
    yield "query", problem.query
    for item in problem.reward:
        for title in item.title:
            yield "title", title
        for _, value in item.sku_attr_pairs():
            yield "attribute", value
    if problem.knowledge_product is not None:
        yield "title", problem.knowledge_product.title
    if problem.knowledge_attribute:
        yield "answer", problem.knowledge_attribute


class PhraseIndex:
    """Fingerprints of a set of problems; build with :meth:`from_problems`, query with the ``*_in`` methods."""

    def __init__(self) -> None:
        self.ids: dict[str, str] = {}
        """GT product id → the first problem that has it."""
        self.phrases: dict[str, str] = {}
        """Non-boilerplate 6-word shingle → problem id."""
        self.vocab: frozenset[str] = frozenset()
        self.exact: dict[str, str] = {}
        """Canonical query / GT title / multi-word answer → problem id."""
        self.trigram_df: dict[str, int] = {}
        self.trigram_pid: dict[str, str] = {}
        self.postings: dict[str, frozenset[int]] = {}
        """Content token → groups whose context (query, titles, attributes, answer) contains it."""
        self.title_postings: dict[str, frozenset[int]] = {}
        """Content token → groups whose GT titles contain it."""
        self.query_vocab: frozenset[str] = frozenset()
        self.group_pid: list[str] = []
        self.n_problems = 0

    @classmethod
    def from_problems(cls, problems: Iterable[Problem], *, boilerplate_groups: int = 3) -> PhraseIndex:
        """Index every problem (any bucket). Linear in the total text size."""
        index = cls()
        groups: dict[str, int] = {}
        shingle_groups: dict[str, set[int]] = defaultdict(set)
        shingle_pid: dict[str, str] = {}
        trigram_groups: dict[str, set[int]] = defaultdict(set)
        postings: dict[str, set[int]] = defaultdict(set)
        title_groups: dict[str, set[int]] = defaultdict(set)
        query_vocab: set[str] = set()
        vocab: set[str] = set()
        seen: set[tuple[int, str, str]] = set()
        for problem in problems:
            index.n_problems += 1
            pid = problem.problem_id
            key = problem.cluster_id or canonical(problem.query)
            g = groups.setdefault(key, len(groups))
            if g == len(index.group_pid):
                index.group_pid.append(pid)
            for gt in problem.gt_ids():
                index.ids.setdefault(gt, pid)
            for kind, text in _context(problem):
                if (g, kind, text) in seen:
                    continue
                seen.add((g, kind, text))
                ws = _WORD.findall(normalise(text))
                vocab.update(ws)
                if kind == "query":
                    query_vocab.update(ws)
                if len(ws) >= 2 and kind != "attribute":
                    index.exact.setdefault(" ".join(ws), pid)
                for n, table in ((PHRASE_WORDS, shingle_groups), (3, trigram_groups)):
                    for j in range(len(ws) - n + 1):
                        shingle = " ".join(ws[j:j + n])
                        table[shingle].add(g)
                        (shingle_pid if n == PHRASE_WORDS else index.trigram_pid).setdefault(shingle, pid)
                for t in {w for w in ws if len(w) >= 3 and not w.isdigit() and w not in ALLOWED_WORDS}:
                    postings[t].add(g)
                    if kind == "title":
                        title_groups[t].add(g)
        index.phrases = {s: shingle_pid[s] for s, gs in shingle_groups.items() if len(gs) < boilerplate_groups}
        index.trigram_df = {s: len(gs) for s, gs in trigram_groups.items()}
        index.postings = {t: frozenset(gs) for t, gs in postings.items()}
        index.title_postings = {t: frozenset(gs) for t, gs in title_groups.items()}
        index.query_vocab = frozenset(query_vocab)
        index.vocab = frozenset(vocab)
        return index

    # -- questions about a text -----------------------------------------------------------------------------
    def ids_in(self, text: str, extra: frozenset[str] = frozenset()) -> Iterator[tuple[str, int]]:
        """``(GT id, offset)`` for every digit run of ``text`` that is a GT id (or one of ``extra``)."""
        for m in _DIGITS.finditer(text):
            if m.group() in self.ids or m.group() in extra:
                yield m.group(), m.start()

    def phrases_in(self, text: str) -> list[PhraseHit]:
        """Maximal runs of copied non-boilerplate shingles that span ≥ 6 words and ≥ 30 characters."""
        ws = words(text)
        hits: list[PhraseHit] = []
        n, i = len(ws), 0
        known = [w in self.vocab for w, _, _ in ws]
        while i <= n - PHRASE_WORDS:
            if not all(known[i:i + PHRASE_WORDS]):
                i += 1
                continue
            pid = self.phrases.get(" ".join(w for w, _, _ in ws[i:i + PHRASE_WORDS]))
            if pid is None:
                i += 1
                continue
            j = i
            while j + 1 <= n - PHRASE_WORDS and " ".join(w for w, _, _ in ws[j + 1:j + 1 + PHRASE_WORDS]) \
                    in self.phrases:
                j += 1
            phrase = " ".join(w for w, _, _ in ws[i:j + PHRASE_WORDS])
            if len(phrase) >= PHRASE_CHARS and len(content_tokens(phrase)) >= MIN_CONTENT_WORDS:
                hits.append(PhraseHit(phrase, pid, ws[i][1], ws[j + PHRASE_WORDS - 1][2]))
            i = j + 1
        return hits

    def exact_text(self, text: str) -> str | None:
        """The problem whose query, GT title or (multi-word) answer ``text`` is, after normalisation."""
        return self.exact.get(canonical(text))

    def fragment(self, text: str) -> str | None:
        """The problem a short fragment points at: a run of ≥ 5 words covering most (60 %) of ``text`` whose
        word trigrams all occur in the banks, one of them in at most 2 groups (so it is specific, not template
        text). A truncated last word (``"…cost mor"``) does not hide the rest. Shorter runs are not evidence: on
        a bank of a few thousand problems most 4-word product phrases ("stainless steel water bottle") are
        rare."""
        ws = [w for w, _, _ in words(text)]
        if len(ws) < FRAGMENT_WORDS or len(" ".join(ws)) < 12:
            return None
        grams = [" ".join(ws[j:j + 3]) for j in range(len(ws) - 2)]
        best: tuple[int, str] | None = None
        run: list[str] = []
        for gram in [*grams, None]:
            if gram is not None and gram in self.trigram_df:
                run.append(gram)
                continue
            if run and len(run) + 2 >= max(FRAGMENT_WORDS, 0.6 * len(ws)):
                rarest = min(run, key=lambda g: self.trigram_df[g])
                if self.trigram_df[rarest] <= 2 and (best is None or len(run) > best[0]):
                    best = (len(run), self.trigram_pid[rarest])
            run = []
        return best[1] if best else None

    def title_fragment(self, text: str) -> str | None:
        """The problem whose GT title ``text`` is lifted from: ≥ 2 content words that occur together in the
        titles of ≤ 2 groups, or one model-like token (letters and digits, ``b20``, ``mp5``) found in the titles
        of ≤ 2 groups and in no query. A single plain word never counts: on a bank of a few thousand problems
        most ordinary words are rare, so rarity alone says nothing."""
        tokens = content_tokens(text)
        if len(tokens) >= 2:
            groups = self.groups_of(tokens, self.title_postings)
        elif len(tokens) == 1:
            (token,) = tokens
            model_like = any(c.isdigit() for c in token) and any(c.isalpha() for c in token)
            groups = self.title_postings.get(token, frozenset()) if model_like and token not in self.query_vocab \
                else frozenset()
        else:
            return None
        return self.group_pid[min(groups)] if 0 < len(groups) <= 2 else None

    def groups_of(self, tokens: frozenset[str], postings: dict[str, frozenset[int]] | None = None
                  ) -> frozenset[int]:
        """Groups whose context (or ``postings``) contains every token (empty for none or an unknown token)."""
        postings = self.postings if postings is None else postings
        found: frozenset[int] | None = None
        for t in sorted(tokens, key=lambda t: len(postings.get(t, ()))):
            posting = postings.get(t)
            if not posting:
                return frozenset()
            found = posting if found is None else found & posting
            if not found:
                return frozenset()
        return found or frozenset()

    def pair_problem(self, key: str, value: str) -> str | None:
        """The problem a (key, value) entry is lifted from: both sides' words occur together in the context of
        at most 2 groups, and one side on its own already points at ≤ 2 groups."""
        k, v = content_tokens(key), content_tokens(value)
        if not k or not v or k == v:
            return None
        both = self.groups_of(k | v)
        if not both or len(both) > 2:
            return None
        if len(self.groups_of(k)) > 2 and len(self.groups_of(v)) > 2:
            return None
        return self.group_pid[min(both)]

    def link(self, text: str) -> tuple[str, str] | None:
        """``(problem_id, why)`` when ``text`` carries bank data: a GT id, a whole query / title / answer, a
        copied phrase or a problem-specific fragment; else None."""
        for m in _DIGITS.finditer(text):
            if m.group() in self.ids:
                return self.ids[m.group()], f"contains GT id {m.group()}"
        canon = canonical(text)
        if canon in self.exact:
            return self.exact[canon], "is a bank query / GT title / answer"
        hits = self.phrases_in(text)
        if hits:
            return hits[0].problem_id, f"copies {hits[0].phrase!r}"
        pid = self.fragment(text)
        if pid is not None:
            return pid, "is a fragment specific to one problem"
        return None
