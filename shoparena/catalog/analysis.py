"""Pyserini's default analyzer, reproduced: Anserini ``DefaultEnglishAnalyzer`` (docs/shoppingbench.md §1.3).

The chain is Lucene's ``StandardTokenizer`` (UAX#29 word breaks, max token length 255) →
``EnglishPossessiveFilter`` (drop a trailing ``'s``, ``’s`` or ``＇s``) → ``LowerCaseFilter`` (per code point,
simple case mapping) → ``StopFilter`` (Lucene's 33 English stop words) → ``PorterStemFilter`` (Lucene's Porter,
:mod:`shoparena.catalog.porter`).

The tokenizer follows Lucene's JFlex grammar (``StandardTokenizerImpl.jflex``): a token is the longest match at
the current position of one of *emoji sequence*, *word* (letter runs joined by MidLetter/MidNumLet/Single_Quote,
digit runs joined by MidNum/MidNumLet/Single_Quote, runs glued directly or by ExtendNumLet ``_``), a run of
South-East-Asian (Line_Break=Complex_Context) characters, one Han ideograph, or one Hiragana character;
anything else is skipped one character at a time. So ``"3.5mm"`` is one token, ``"men's"`` one token that the
possessive filter turns into ``men``, ``"u.s.a."`` gives ``u.s.a``, ``"t-shirt"`` gives ``t`` and ``shirt``.
ASCII text takes a compiled fast path that a property test proves equal to the general grammar. Character
properties come from the ``regex`` module's Unicode tables, not Lucene's Unicode 9 tables; the two differ only
on characters assigned or re-classified since (documented divergence).
"""

from __future__ import annotations

import re
from functools import lru_cache

import regex

from shoparena.catalog.porter import stem

__all__ = [
    "ANALYZER_ID", "ENGLISH_STOP_WORDS", "MAX_TOKEN_LENGTH", "analyze", "analyze_token", "candidate_tokens",
    "candidates", "tokenize",
]

#: Recorded in every index; bump when analysis changes (an index built by another analyzer is refused).
ANALYZER_ID = "lucene-standard+possessive+lowercase+stop33+porter/v1"

#: Lucene ``EnglishAnalyzer.ENGLISH_STOP_WORDS_SET``.
ENGLISH_STOP_WORDS: frozenset[str] = frozenset(
    "a an and are as at be but by for if in into is it no not of on or such that the their then there these "
    "they this to was will with".split()
)

#: Lucene ``StandardAnalyzer.DEFAULT_MAX_TOKEN_LENGTH``: longer matches are cut into 255-char pieces.
MAX_TOKEN_LENGTH = 255

# ---- the general grammar (any Unicode text) -------------------------------------------------------------
_E = r"[\p{WB=Format}\p{WB=Extend}\p{WB=ZWJ}]*"  # UAX#29 WB4: X (Extend | Format | ZWJ)* -> X
_E_NO_PRES = r"(?:(?![\uFE0E\uFE0F])[\p{WB=Format}\p{WB=Extend}\p{WB=ZWJ}])*"
_AHL = rf"(?:[\p{{WB=ALetter}}\p{{WB=Hebrew_Letter}}]{_E})"
_NUM = rf"(?:[\p{{WB=Numeric}}[\p{{Blk=HalfAndFullForms}}&&\p{{Nd}}]]{_E})"
_KATA = rf"(?:\p{{WB=Katakana}}{_E})"
_MIDLET = rf"(?:[\p{{WB=MidLetter}}\p{{WB=MidNumLet}}\p{{WB=Single_Quote}}]{_E})"
_MIDNUM = rf"(?:[\p{{WB=MidNum}}\p{{WB=MidNumLet}}\p{{WB=Single_Quote}}]{_E})"
_ENL = rf"(?:\p{{WB=ExtendNumLet}}{_E})"
_HEB = rf"(?:\p{{WB=Hebrew_Letter}}{_E})"
_SQ = rf"(?:\p{{WB=Single_Quote}}{_E})"
_DQ = rf"(?:\p{{WB=Double_Quote}}{_E})"
_UNIT = (
    rf"(?:{_KATA}(?:{_ENL}*{_KATA})*"
    rf"|(?:{_HEB}(?:{_SQ}|{_DQ}{_HEB})|{_NUM}(?:(?:{_ENL}*|{_MIDNUM}){_NUM})*|{_AHL}(?:(?:{_ENL}*|{_MIDLET}){_AHL})*)+)"
)
_WORD = rf"{_ENL}*{_UNIT}(?:{_ENL}+{_UNIT})*{_ENL}*"
_EMOJI_CHAR = (
    r"(?:\p{Extended_Pictographic}|(?![\p{WB=Regional_Indicator}0-9#*©®™\u3030\u303D\p{Emoji_Modifier}])\p{Emoji})"
)
_EMOJI_SEQ = (
    rf"(?:\p{{WB=ZWJ}}*{_EMOJI_CHAR}{_E_NO_PRES}\uFE0F?"
    rf"|(?:\p{{WB=ZWJ}}*\p{{Emoji_Modifier_Base}}{_E_NO_PRES})?\p{{Emoji_Modifier}}{_E_NO_PRES})"
)
_EMOJI = (
    rf"{_EMOJI_SEQ}(?:(?:\p{{WB=ZWJ}}{_EMOJI_SEQ})*|[\U000E0020-\U000E007E]+\U000E007F)"
    rf"|[0-9#*]{_E_NO_PRES}\uFE0F?\u20E3{_E_NO_PRES}"
    rf"|(?:\p{{WB=Regional_Indicator}}{_E}){{2}}"
)
_SEA = rf"(?:\p{{LB=Complex_Context}}{_E})+"
_HAN = rf"(?:\p{{Script=Han}}{_E})"
_HIRA = rf"(?:\p{{Script=Hiragana}}{_E})"
# POSIX (leftmost-longest) matching gives JFlex's longest-match rule across the alternatives.
_GENERAL = regex.compile(rf"(?V1p){_EMOJI}|{_WORD}|{_SEA}|{_HAN}|{_HIRA}")

# ---- the ASCII fast path: the same grammar restricted to ASCII -------------------------------------------
# ALetter [A-Za-z], Numeric [0-9], MidLetter ':', MidNum ',;', MidNumLet '.', Single_Quote "'", ExtendNumLet '_'.
# Tokens never cross a character outside [A-Za-z0-9_,;.':], so the text is first cut into candidate runs; a
# run of letters and digits only is exactly one token (WB5, WB8–WB10), anything else goes through the exact
# ASCII grammar. The stdlib ``re`` engine is used here: it is about twice as fast as ``regex`` on this pattern.
_ARUN = r"(?:[0-9](?:_*[0-9]|[,;.'][0-9])*|[A-Za-z](?:_*[A-Za-z]|[:.'][A-Za-z])*)"
_ASCII = re.compile(rf"_*{_ARUN}(?:_*{_ARUN})*_*")
_CANDIDATE = re.compile(r"[A-Za-z0-9_]+(?:[,;.':][A-Za-z0-9_]+)*")


def candidates(text: str) -> list[str]:
    """The runs of an ASCII text that tokens are made from (see :func:`candidate_tokens`)."""
    return _CANDIDATE.findall(text)


def candidate_tokens(run: str) -> list[str]:
    """Tokenizer tokens of one candidate run of an ASCII text."""
    if len(run) > MAX_TOKEN_LENGTH:
        return _tokenize_general(run)
    if run.isalnum():
        return [run]
    return _ASCII.findall(run)


def tokenize(text: str) -> list[str]:
    """Lucene ``StandardTokenizer`` tokens of ``text`` (before any filter)."""
    if text.isascii():
        out: list[str] = []
        for run in _CANDIDATE.findall(text):
            if run.isalnum() and len(run) <= MAX_TOKEN_LENGTH:
                out.append(run)
            else:
                out.extend(candidate_tokens(run))
        return out
    return _tokenize_general(text)


def _tokenize_general(text: str) -> list[str]:
    out: list[str] = []
    pos = 0
    n = len(text)
    while pos < n:
        m = _GENERAL.search(text, pos)
        if m is None:
            break
        start, end = m.span()
        if end - start > MAX_TOKEN_LENGTH:
            # Lucene's scanner buffer holds 255 chars: emit them and rescan from there.
            out.append(text[start : start + MAX_TOKEN_LENGTH])
            pos = start + MAX_TOKEN_LENGTH
            continue
        out.append(m.group())
        pos = end
    return out


_APOSTROPHES = ("'", "\u2019", "\uff07")


def _lower(token: str) -> str:
    """Java ``Character.toLowerCase`` per code point: simple mappings, no final-sigma context."""
    if token.isascii():
        return token.lower()
    out = []
    for ch in token:
        low = ch.lower()
        out.append(low if len(low) == 1 else ("i" if ch == "\u0130" else ch))
    return "".join(out)


@lru_cache(maxsize=1 << 20)
def analyze_token(token: str) -> str | None:
    """Possessive → lowercase → stop → Porter for one tokenizer token; None when it is a stop word."""
    if len(token) >= 2 and token[-1] in "sS" and token[-2] in _APOSTROPHES:
        token = token[:-2]
    term = _lower(token)
    if term in ENGLISH_STOP_WORDS:
        return None
    return stem(term)


def analyze(text: str) -> list[str]:
    """The indexed (or query) terms of ``text``, in order, duplicates kept."""
    out = []
    for token in tokenize(text):
        term = analyze_token(token)
        if term is not None:
            out.append(term)
    return out
