"""Encoded forms of product ids and text hidden in a string: base64/32, hex, base-36, reversed and split digits.

The integrity rules look for GT ids in what a literal *decodes to*, not only in what it says. Every function here
is a generator of ``(decoded text, offset, how)`` with ``offset`` the position in the input where the encoded
token starts (for the line number) and ``how`` a short label for the message. Decoding is bounded (token count,
output size, decompression cap) so a hostile file cannot stall the gate.
"""

from __future__ import annotations

import base64
import binascii
import bz2
import lzma
import re
import zlib
from collections.abc import Iterator

_B64 = re.compile(r"[A-Za-z0-9+/_-]{12,}={0,2}")
_B64_SHAPE = re.compile(r"[A-Z].*[a-z]|[a-z].*[A-Z]")
_HAS_DIGIT = re.compile(r"[0-9]")
_B32 = re.compile(r"[A-Z2-7]{16,}={0,6}")
_HEX = re.compile(r"(?<![0-9A-Za-z])(?:0x)?([0-9a-fA-F]{6,})(?![0-9A-Za-z])")
_B36 = re.compile(r"(?<![0-9A-Za-z])(?=[0-9a-z]*[a-z])(?=[0-9a-z]*[0-9])[0-9a-z]{5,8}(?![0-9A-Za-z])")
_DIGIT_GROUP = re.compile(r"[0-9]+(?:[\s,'\"+\-:;|/\[\]()]{1,6}[0-9]+)+")
_DIGIT_RUN = re.compile(r"(?<![0-9.])[0-9]{8,16}(?![0-9.eE])")
_MAX_TOKENS = 20_000
_CAP = 1 << 20


def _printable(data: bytes) -> str | None:
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text or sum(ch.isprintable() or ch in "\n\t" for ch in text) < 0.9 * len(text):
        return None
    return text


def _inflate(data: bytes) -> bytes | None:
    """Decompress data that starts with a zlib / gzip / bz2 / xz header (capped), else None."""
    if data[:1] == b"\x78" or data[:2] == b"\x1f\x8b":
        d: object = zlib.decompressobj(47)
    elif data[:3] == b"BZh":
        d = bz2.BZ2Decompressor()
    elif data[:6] == b"\xfd7zXZ\x00":
        d = lzma.LZMADecompressor()
    else:
        return None
    try:
        return bytes(d.decompress(data, _CAP))
    except (zlib.error, OSError, lzma.LZMAError, ValueError, EOFError):
        return None


def _payloads(data: bytes, how: str) -> Iterator[tuple[str, str]]:
    text = _printable(data)
    if text is not None:
        yield text, how
        return
    inflated = _inflate(data)
    if inflated is not None and (text := _printable(inflated)) is not None:
        yield text, f"{how}+compressed"


def decoded_forms(text: str) -> Iterator[tuple[str, int, str]]:
    """Texts hidden in ``text`` as base64 / base32 / hex tokens (possibly compressed)."""
    budget = _MAX_TOKENS
    for m in _B64.finditer(text):
        token = m.group()
        if (budget := budget - 1) < 0:
            return
        if not _B64_SHAPE.search(token) or (len(token) < 24 and not _HAS_DIGIT.search(token)):
            continue  # identifiers, words and numbers: not base64 worth decoding
        padded = token.rstrip("=") + "=" * (-len(token.rstrip("=")) % 4)
        for decoder, how in ((base64.b64decode, "base64"), (base64.urlsafe_b64decode, "base64url")):
            try:
                data = decoder(padded)
            except (binascii.Error, ValueError):
                continue
            yield from ((t, m.start(), h) for t, h in _payloads(data, how))
            break
    for m in _B32.finditer(text):
        try:
            data = base64.b32decode(m.group() + "=" * (-len(m.group()) % 8))
        except (binascii.Error, ValueError):
            continue
        yield from ((t, m.start(), h) for t, h in _payloads(data, "base32"))
    for m in _HEX.finditer(text):
        token = m.group(1)
        if len(token) % 2 == 0 and len(token) >= 12:
            yield from ((t, m.start(), h) for t, h in _payloads(bytes.fromhex(token), "hex"))
        if len(token) <= 12 and (not token.isdigit() or m.group().startswith("0x")):
            yield str(int(token, 16)), m.start(), "hex number"


def id_forms(text: str) -> Iterator[tuple[str, int, int, str]]:
    """``(digits, start, end, how)``: digit strings an id may hide in: split runs (``"3350" + "592664"``,
    ``[3, 3, 5, …]``, ``3350-592-664``) joined, every run reversed, ids padded inside a longer run, base-36 tokens
    as numbers. ``start:end`` is the span of ``text`` the digits come from."""
    for m in _DIGIT_GROUP.finditer(text):
        digits = re.sub(r"[^0-9]", "", m.group())
        yield digits, m.start(), m.end(), "split digits"
        yield digits[::-1], m.start(), m.end(), "reversed split digits"
    for m in re.finditer(r"[0-9]{6,}", text):
        yield m.group()[::-1], m.start(), m.end(), "reversed"
    for m in _DIGIT_RUN.finditer(text):
        yield m.group(), m.start(), m.end(), "padded"
    for n, m in enumerate(_B36.finditer(text)):
        if n >= _MAX_TOKENS:
            break
        yield str(int(m.group(), 36)), m.start(), m.end(), "base-36 number"


def windows(digits: str, lengths: frozenset[int]) -> Iterator[str]:
    """Every substring of ``digits`` whose length is one of ``lengths`` (id lengths present in the banks)."""
    for n in lengths:
        for i in range(len(digits) - n + 1):
            yield digits[i:i + n]
