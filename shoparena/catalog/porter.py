"""Lucene's ``PorterStemmer``, ported step for step (docs/shoppingbench.md §1.3: the index uses classic Porter).

Lucene's stemmer is Martin Porter's C "release 3" with its known departures from the 1980 paper, all kept here:
words of one or two characters are never stemmed, ``-bli`` → ``-ble`` replaces ``-abli`` → ``-able``, and
``-logi`` → ``-log`` is added. Snowball's ``porter`` (PyStemmer) implements the paper and so differs on
exactly those words (``as`` → ``a``, ``probabli``, ``analogi``…); the tests pin both the agreement and the
differences. Characters other than ``aeiou`` (and ``y`` after a consonant) count as consonants, digits included,
so ``1990s`` → ``1990`` as in Lucene.
"""

from __future__ import annotations

from functools import lru_cache
from typing import ClassVar

__all__ = ["stem"]


class _Stemmer:
    """One word's stemming state (``b`` the buffer, ``k`` its last index, ``j`` a general offset)."""

    __slots__ = ("b", "j", "k")

    def __init__(self, word: str) -> None:
        self.b = list(word)
        self.k = len(word) - 1
        self.j = 0

    def cons(self, i: int) -> bool:
        ch = self.b[i]
        if ch in "aeiou":
            return False
        if ch == "y":
            return True if i == 0 else not self.cons(i - 1)
        return True

    def m(self) -> int:
        """The number of consonant–vowel sequences between 0 and j."""
        n = 0
        i = 0
        j = self.j
        while True:
            if i > j:
                return n
            if not self.cons(i):
                break
            i += 1
        i += 1
        while True:
            while True:
                if i > j:
                    return n
                if self.cons(i):
                    break
                i += 1
            i += 1
            n += 1
            while True:
                if i > j:
                    return n
                if not self.cons(i):
                    break
                i += 1
            i += 1

    def vowelinstem(self) -> bool:
        return any(not self.cons(i) for i in range(self.j + 1))

    def doublec(self, j: int) -> bool:
        if j < 1 or self.b[j] != self.b[j - 1]:
            return False
        return self.cons(j)

    def cvc(self, i: int) -> bool:
        if i < 2 or not self.cons(i) or self.cons(i - 1) or not self.cons(i - 2):
            return False
        return self.b[i] not in "wxy"

    def ends(self, s: str) -> bool:
        n = len(s)
        o = self.k - n + 1
        if o < 0:
            return False
        if "".join(self.b[o : self.k + 1]) != s:
            return False
        self.j = self.k - n
        return True

    def setto(self, s: str) -> None:
        o = self.j + 1
        self.b[o:] = list(s)
        self.k = self.j + len(s)

    def r(self, s: str) -> None:
        if self.m() > 0:
            self.setto(s)

    def truncate(self) -> None:
        del self.b[self.k + 1 :]

    # Lucene's step1..step6 (Porter's 1a/1b, 1c, 2, 3, 4, 5).
    def step1(self) -> None:
        b = self.b
        if b[self.k] == "s":
            if self.ends("sses"):
                self.k -= 2
            elif self.ends("ies"):
                self.setto("i")
            elif b[self.k - 1] != "s":
                self.k -= 1
            self.truncate()
        if self.ends("eed"):
            if self.m() > 0:
                self.k -= 1
        elif (self.ends("ed") or self.ends("ing")) and self.vowelinstem():
            self.k = self.j
            self.truncate()
            if self.ends("at"):
                self.setto("ate")
            elif self.ends("bl"):
                self.setto("ble")
            elif self.ends("iz"):
                self.setto("ize")
            elif self.doublec(self.k):
                ch = self.b[self.k]
                self.k -= 1
                if ch in "lsz":
                    self.k += 1
            elif self.m() == 1 and self.cvc(self.k):
                self.setto("e")
        self.truncate()

    def step2(self) -> None:
        if self.ends("y") and self.vowelinstem():
            self.b[self.k] = "i"

    _STEP3: ClassVar[dict[str, tuple[tuple[str, str], ...]]] = {
        "a": (("ational", "ate"), ("tional", "tion")),
        "c": (("enci", "ence"), ("anci", "ance")),
        "e": (("izer", "ize"),),
        "l": (("bli", "ble"), ("alli", "al"), ("entli", "ent"), ("eli", "e"), ("ousli", "ous")),
        "o": (("ization", "ize"), ("ation", "ate"), ("ator", "ate")),
        "s": (("alism", "al"), ("iveness", "ive"), ("fulness", "ful"), ("ousness", "ous")),
        "t": (("aliti", "al"), ("iviti", "ive"), ("biliti", "ble")),
        "g": (("logi", "log"),),
    }

    def step3(self) -> None:
        if self.k == 0:
            return
        for suffix, repl in self._STEP3.get(self.b[self.k - 1], ()):
            if self.ends(suffix):
                self.r(repl)
                break
        self.truncate()

    _STEP4: ClassVar[dict[str, tuple[tuple[str, str], ...]]] = {
        "e": (("icate", "ic"), ("ative", ""), ("alize", "al")),
        "i": (("iciti", "ic"),),
        "l": (("ical", "ic"), ("ful", "")),
        "s": (("ness", ""),),
    }

    def step4(self) -> None:
        for suffix, repl in self._STEP4.get(self.b[self.k], ()):
            if self.ends(suffix):
                self.r(repl)
                break
        self.truncate()

    _STEP5: ClassVar[dict[str, tuple[str, ...]]] = {
        "a": ("al",),
        "c": ("ance", "ence"),
        "e": ("er",),
        "i": ("ic",),
        "l": ("able", "ible"),
        "n": ("ant", "ement", "ment", "ent"),
        "s": ("ism",),
        "t": ("ate", "iti"),
        "u": ("ous",),
        "v": ("ive",),
        "z": ("ize",),
    }

    def step5(self) -> None:
        if self.k == 0:
            return
        ch = self.b[self.k - 1]
        if ch == "o":
            found = (self.ends("ion") and self.j >= 0 and self.b[self.j] in "st") or self.ends("ou")
        else:
            found = any(self.ends(s) for s in self._STEP5.get(ch, ()))
        if found and self.m() > 1:
            self.k = self.j
        self.truncate()

    def step6(self) -> None:
        self.j = self.k
        if self.b[self.k] == "e":
            a = self.m()
            if a > 1 or (a == 1 and not self.cvc(self.k - 1)):
                self.k -= 1
        if self.b[self.k] == "l" and self.doublec(self.k) and self.m() > 1:
            self.k -= 1
        self.truncate()

    def run(self) -> str:
        if self.k > 1:
            self.step1()
            self.step2()
            self.step3()
            self.step4()
            self.step5()
            self.step6()
        return "".join(self.b[: self.k + 1])


@lru_cache(maxsize=1 << 18)
def stem(word: str) -> str:
    """Lucene ``PorterStemmer.stem`` of an already lowercased token (cached; stemming is pure)."""
    if len(word) <= 2:
        return word
    return _Stemmer(word).run()
