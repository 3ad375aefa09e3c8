"""Link keys: canonical query, request text, constraint signature (docs/arena.md §12 design point 2)."""

from __future__ import annotations

from shoparena.tasks.signatures import canonical_query, constraint_signature, gt_title_text, request_text
from shoparena.tasks.types import Problem, RewardItem
from tests.banks import upstream


def _problem(pid: str, *items: RewardItem, bucket: str = "shop") -> Problem:
    return Problem(problem_id=pid, bucket=bucket, query=f"q {pid}", reward=list(items))  # type: ignore[arg-type]


def test_canonical_query_folds_whitespace_case_and_punctuation() -> None:
    a = "I need a 4.5 inch, 20% off  `USB-C` cable!!\n\nThanks."
    b = "i NEED a 4.5 inch 20%   off usb c cable\tthanks"
    assert canonical_query(a) == canonical_query(b) == "i need a 4.5 inch 20% off usb c cable thanks"


def test_canonical_query_keeps_decimal_points_only_between_digits() -> None:
    assert canonical_query("1.8L cooker. Ends.5") == "1.8l cooker ends 5"
    assert canonical_query("Ｆｕｌｌｗｉｄｔｈ　ＴＥＸＴ") == "fullwidth text"  # NFKC


def test_request_text_drops_the_voucher_block_shoppingbench_3_3() -> None:
    voucher = next(p for p in upstream() if p.bucket == "voucher")
    request = request_text(voucher.query)
    assert "budget" not in request and "voucher" not in request
    assert canonical_query(voucher.query).startswith(request)
    assert request_text("my budget is only 500 for a phone") == "my budget is only 500 for a phone"


def test_signature_ignores_attribute_and_item_order_ids_and_titles() -> None:
    a1 = RewardItem(product_id="1", title=["Red shirt"], attributes=[{"material": ["cotton"]}, {"fit": ["slim"]}],
                    sku_options=[{"size": "m", "color": "red"}], price=[{"between": [10, 20]}])
    a2 = RewardItem(product_id="2", title=["Blue mug"], service=["COD", "freeShipping"])
    b1 = RewardItem(product_id="9", title=["Other"], attributes=[{"fit": ["slim"]}, {"material": ["cotton"]}],
                    sku_options=[{"color": "red", "size": "m"}], price=[{"between": [10.0, 20.0]}])
    b2 = RewardItem(product_id="8", title=["Else"], service=["freeShipping", "COD"])
    sa = constraint_signature(_problem("a", a1, a2))
    sb = constraint_signature(_problem("b", b2, b1))
    assert sa is not None and sa == sb and sa.strong


def test_signature_differs_on_values_and_categories() -> None:
    a = RewardItem(product_id="1", title=["x"], service=["COD"], attributes=[{"material": ["cotton"]}])
    b = RewardItem(product_id="2", title=["x"], service=["COD"], attributes=[{"material": ["linen"]}])
    assert constraint_signature(_problem("a", a)) != constraint_signature(_problem("b", b))
    same = RewardItem(product_id="2", title=["x"], service=["COD"], attributes=[{"material": ["cotton"]}])
    cats = {"1": "Home > Bedding", "2": "Men > Shirts"}
    assert constraint_signature(_problem("a", a)) == constraint_signature(_problem("b", same))
    assert constraint_signature(_problem("a", a), categories=cats) != constraint_signature(
        _problem("b", same), categories=cats)


def test_weak_signatures() -> None:
    trivial = RewardItem(product_id="1", title=["x"], price=[{"greater than": [1, None]}], service=["COD"])
    strong = RewardItem(product_id="1", title=["x"], price=[{"greater than": [150, None]}], service=["COD"])
    alone = RewardItem(product_id="1", title=["x"], attributes=[{"material": ["cotton"]}])
    assert not constraint_signature(_problem("t", trivial)).strong  # type: ignore[union-attr]
    assert constraint_signature(_problem("s", strong)).strong  # type: ignore[union-attr]
    assert not constraint_signature(_problem("a", alone, strong)).strong  # type: ignore[union-attr]
    assert constraint_signature(_problem("k", bucket="knowledge")) is None


def test_gt_title_text_sorted_canonical() -> None:
    p = _problem("a", RewardItem(product_id="1", title=["Zebra Mug!"]), RewardItem(product_id="2", title=["Apple"]))
    assert gt_title_text(p) == "apple zebra mug"
