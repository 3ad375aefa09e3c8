"""Integrity rules against the real banks: each rule's minimal sample, encodings of real GT ids, near misses."""

from __future__ import annotations

import base64
import zlib

import pytest

from shoparena.arena.gate import GateReport, check_submission
from tests.gate import agent, bank_index, check, problem, rules

GT = problem("product").gt_ids()[0]  # 3350592664 (ORO suite v1, "grey unisex racing t-shirt")
GT2, GT3 = problem("shop").gt_ids()
KNOW = problem("knowledge")


def _integrity(report: GateReport) -> set[str]:
    return {v.rule for v in report.violations if v.severity == "integrity"}


def test_a_gt_id_literal_is_rejected_with_the_full_cooldown() -> None:
    for body in (f"PICK = '{GT}'", f"PICK = {GT}", f"MSG = 'recommend {GT} now'", f"# try {GT} first\nX = 1",
                 f'"""Docstring mentioning {GT}."""'):
        report = check(body, bank=True)
        assert "product_id" in _integrity(report), body
        assert report.cooldown == "full"
    (v,) = [v for v in check(f"X = 1\nPICK = '{GT}'", bank=True).violations if v.rule == "product_id"]
    assert v.line == 2 and GT in v.message and problem("product").problem_id in v.message


def test_product_ids_argument_adds_ids_without_banks() -> None:
    report = check_submission(agent("PICK = '9876543210'"), product_ids={"9876543210"})
    assert rules(report) == {"product_id"}


def test_ids_that_are_not_gt_ids_pass() -> None:
    assert check("TIMEOUT_MS = 1700000000\nPRICE = '3350592665'", bank=True).accepted


ENCODINGS = [
    f"A = '{GT[:4]}'\nB = '{GT[4:]}'\nPICK = A + B",
    f"PICK = '{GT[:5]}' + '{GT[5:]}'",
    f"PICK = ''.join(['{GT[:3]}', '{GT[3:7]}', '{GT[7:]}'])",
    f"PICK = '{GT[::-1]}'[::-1]",
    f"PICK = '{GT[::-1]}'",
    f"PICK = {int(GT[:5]) * 10**5} + {int(GT[5:])}",
    f"DIGITS = [{', '.join(GT)}]",
    f"PICK = '{GT[:3]}-{GT[3:6]}-{GT[6:]}'",
    f"PICK = {hex(int(GT))}",
    f"PICK = '{hex(int(GT))[2:]}'",
    f"PICK = '{base64.b64encode(GT.encode()).decode()}'",
    f"PICK = '{base64.b64encode(zlib.compress(GT.encode())).decode()}'",
    f"PICK = '{base64.b32encode(GT.encode()).decode()}'",
    f"PICK = '{GT.encode().hex()}'",
    f"PICK = bytes.fromhex('{GT.encode().hex()}').decode()",
    f"MASKED = {int(GT) ^ 0x5A5A5A}\nKEY = 0x5A5A5A",
    f"PICK = 'x{GT}9'",
]


@pytest.mark.parametrize("body", ENCODINGS, ids=[e.split("\n")[-1][:40] for e in ENCODINGS])
def test_encoded_ids_are_found(body: str) -> None:
    report = check(body, bank=True)
    assert _integrity(report) & {"encoded_id", "product_id"}, report.violations
    assert any(GT in v.message for v in report.violations)


def test_a_literal_list_of_id_shaped_values_is_an_id_list_even_without_banks() -> None:
    report = check("IDS = ['1234567890', '2345678901', '3456789012']")
    assert rules(report) == {"id_list"} and report.cooldown == "full"
    assert rules(check("IDS = {'a': 1234567890, 'b': 2345678901, 'c': 3456789012}")) == {"id_list"}
    assert rules(check("IDS = '1234567890,2345678901,3456789012'")) == {"id_list"}
    # near misses: two ids, round numbers, small numbers
    assert check("IDS = ['1234567890', '2345678901']\nR = [10000000, 20000000, 30000000]\nP = [1, 2, 3]").accepted


def test_query_to_id_dict_is_an_answer_table() -> None:
    pairs = [(p.query, p.gt_ids()[0]) for p in (problem("product", i) for i in range(3))]
    report = check(f"ANSWERS = {dict(pairs)!r}", bank=True)
    assert {"answer_table", "product_id", "verbatim_phrase"} <= _integrity(report)


def test_tables_of_queries_titles_or_fragments_without_ids() -> None:
    titles = [problem("product", i).reward[0].title[0] for i in range(3)]
    assert "answer_table" in _integrity(check(f"TITLES = {titles!r}", bank=True))
    fragments = ["b20 cast bronze crash cymbals", "heavy-duty rubber wheel for a pushcart",
                 "single-pack bags of chili powder"]
    report = check(f"SEEN = {{k: 'yes' for k in {fragments!r}}}", bank=True)
    assert "answer_table" in _integrity(report)


def test_tables_built_in_a_loop_or_with_zip_are_caught_at_the_literal() -> None:
    queries = [problem("product", i).query for i in range(3)]
    ids = [problem("product", i).gt_ids()[0] for i in range(3)]
    loop = f"TABLE = {{}}\nfor q, pid in {list(zip(queries, ids, strict=True))!r}:\n    TABLE[q] = pid"
    assert "answer_table" in _integrity(check(loop, bank=True))
    zipped = f"TABLE = dict(zip({queries!r}, {[int(i) for i in ids]!r}))"
    assert "answer_table" in _integrity(check(zipped, bank=True))
    split = "KEYS = " + repr("|".join(q[:40] for q in queries)) + ".split('|')"
    assert "answer_table" in _integrity(check(split, bank=True))


def test_hash_keyed_tables_need_no_bank() -> None:
    keys = [f"{i:040x}" for i in (11, 22, 33)]
    assert rules(check(f"H = {{{', '.join(f'{k!r}: {i}' for i, k in enumerate(keys))}}}")) == {"answer_table"}


def test_a_copied_query_phrase_is_a_verbatim_phrase() -> None:
    phrase = " ".join(KNOW.query.split()[:9])
    report = check(f"PROMPT = 'Example: {phrase} ...'", bank=True)
    (v,) = report.violations
    assert v.rule == "verbatim_phrase" and KNOW.problem_id in v.message and v.line == 1


def test_phrases_are_normalised_and_found_in_titles_too() -> None:
    title = problem("product").reward[0].title[0]  # T Shirt Polo Collar TRD Racing Toyota CH-R Motorsport …
    shouted = "  ".join(title.upper().split()[:8]).replace(" ", " ,  ")
    assert "verbatim_phrase" in _integrity(check(f"X = {shouted!r}", bank=True))
    zero_width = "\u200b".join(["Alec Aitken so skilled at playing that", "a professional"])
    assert "verbatim_phrase" in _integrity(check(f"X = {zero_width!r}", bank=True))
    encoded = base64.b64encode(" ".join(KNOW.query.split()[:10]).encode()).decode()
    assert "verbatim_phrase" in _integrity(check(f"X = {encoded!r}", bank=True))


def test_short_or_template_phrases_pass() -> None:
    body = """
    A = "only applies to the products from the same shop"
    B = "Can you help me find a store that sells all of these"
    C = "It is valid only when the total price of the products exceeds"
    D = "Show me a grey unisex t-shirt"
    """
    assert check(body, bank=True).accepted


def test_suite_specific_dictionaries() -> None:
    lifted = "BOOST = {'crash cymbals': 'arborea', 'chili powder': 'hyco', 'pushcart wheel': 'mold-on'}"
    assert "suite_dict" in _integrity(check(lifted, bank=True))
    pairs = "PAIRS = [('alec aitken', 'violin'), ('cadet hat', 'army green'), ('crash cymbals', 'hybrid ghost')]"
    assert "suite_dict" in _integrity(check(pairs, bank=True))
    generic = ("SYN = {'tee': 't-shirt', 'sneakers': 'shoes', 'phone': 'smartphone', 'cheap': 'budget', "
               "'lazmall': 'official', 'free shipping': 'freeShipping', 'cash on delivery': 'COD'}")
    assert check(generic, bank=True).accepted


def test_obfuscation_imports_need_no_bank() -> None:
    for module in ("base64", "binascii", "codecs", "zlib", "lzma", "bz2", "gzip"):
        report = check(f"import {module}")
        assert rules(report) == {"obfuscation_import"} and report.cooldown == "full", module
    assert "obfuscation_import" in rules(check("m = __import__('zlib')"))


def test_allowed_vocabulary_and_regexes_pass() -> None:
    body = r"""
    import re
    SERVICES = {"official": "LazMall", "freeShipping": "free shipping", "COD": "cash on delivery",
                "flashsale": "LazFlash"}
    WORDS = ["voucher", "budget", "discount", "shop"]
    BUDGET = re.compile(r"My budget is only `(\d+(?:\.\d+)?)`")
    PERCENT = re.compile(r"percentage discount of `(\d+)%` with a cap of `(\d+)`")
    STOP = {"a", "an", "the", "for", "with", "me", "show", "looking"}
    """
    assert check(body, bank=True).accepted


def test_a_file_that_does_not_parse_still_gets_text_integrity_checks() -> None:
    report = check_submission(f"PICK = '{GT}'\ndef agent_main(:\n", phrases=bank_index())
    assert {"syntax_error", "product_id"} <= rules(report) and report.cooldown == "full"


def test_many_findings_are_summarised() -> None:
    ids = sorted(bank_index().ids)[:60]
    report = check("\n".join(f"X{i} = '{pid}'" for i, pid in enumerate(ids)), bank=True)
    product = [v for v in report.violations if v.rule == "product_id"]
    assert len(product) == 21 and "40 more product_id findings" in product[-1].message
