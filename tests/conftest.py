"""Shared fixtures: a hand-made 20-product catalog, the real upstream data folder, thread limits."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

os.environ.setdefault("OMP_NUM_THREADS", "1")

from shoparena.catalog.index import SearchIndex
from shoparena.catalog.search import SearchService
from shoparena.catalog.types import Product
from shoparena.store.pg import TempPostgres, unavailable_reason

DATA = Path(__file__).parent / "data"


def _p(pid: str, shop: str, title: str, price: float, **kw: object) -> dict[str, object]:
    return {"product_id": pid, "shop_id": shop, "title": title, "price": price, **kw}


#: Four shops with several products each (so shop and voucher problems are solvable), SKU variants,
#: attributes and every service code. Ids are digit strings of mixed length, as upstream.
TINY_CATALOG: list[dict[str, object]] = [
    # shop 3450032: music
    _p("3706669986", "3450032", "Heart String Violin Bows Full Size Handmade Horsetail Hair Violin Bow", 256.0,
       brand="heart string", category="Media, Music & Books > Musical Instruments > Musical Accessories",
       sold_count=2, service=["COD"],
       sku_options={"1": {"size": "1/4 violin bow"}, "2": {"size": "4/4 violin bow"}},
       attributes={"brand": ["heart string"], "material": ["horsetail"]}),
    _p("591486855", "3450032", "Arborea Hybrid ghost crash cymbals cymbal B20 cast bronze", 4350.0,
       brand="arborea", category="Media, Music & Books > Musical Instruments > Drums & Percussion",
       sold_count=5, service=["official", "freeShipping"],
       sku_options={"1": {"size": "16 inch"}, "2": {"size": "18 inch"}},
       attributes={"material": ["b20 bronze"]}),
    _p("1203344556", "3450032", "Violin 4/4 Solid Spruce Top Beginner Violin Set with Case and Bow", 2499.0,
       category="Media, Music & Books > Musical Instruments > String Instruments",
       sold_count=31, service=["COD", "freeShipping"],
       sku_options={"1": {"color_family": "natural"}, "2": {"color_family": "black"}},
       attributes={"material": ["spruce"], "model": ["v-44"]}),
    _p("1203344557", "3450032", "Guitar Strings Phosphor Bronze Acoustic Light Gauge 3-Pack", 199.0,
       category="Media, Music & Books > Musical Instruments > Musical Accessories",
       sold_count=410, service=["COD", "flashsale"],
       attributes={"pack_type": ["3 pcs"], "material": ["phosphor bronze"]}),
    _p("1203344558", "3450032", "Maple Drum Sticks 5A Wood Tip Pair", 150.0,
       category="Media, Music & Books > Musical Instruments > Drums & Percussion",
       sold_count=88, service=["COD"], attributes={"material": ["maple"]}),
    # shop 3242082: fashion
    _p("4428034196", "3242082", "Men's Running Shoes Breathable Mesh Sneakers Lightweight", 899.0,
       brand="stride", category="Men's Shoes > Sneakers", sold_count=1200, service=["COD", "freeShipping"],
       sku_options={"1": {"shoe size": "eu:42", "color_family": "black"},
                    "2": {"shoe size": "eu:43", "color_family": "white"},
                    "3": {"shoe size": "eu:42", "color_family": "white"}},
       attributes={"clothing_material": ["mesh"], "fa_pattern": ["plain"]}),
    _p("5113553158", "3242082", "American Retro Baggy Jeans For Women High Waist Straight Denim", 450.0,
       category="Women's Clothing > Pants & Jeans > Jeans", sold_count=75, service=["COD"],
       sku_options={"1": {"size": "eu:30"}, "2": {"size": "eu:32"}},
       attributes={"jeans_fit_type": ["baggy fit"], "waist_type": ["high"], "clothing_material": ["denim"]}),
    _p("5113553159", "3242082", "Women's Floral Summer Dress Sleeveless Midi", 620.0,
       category="Women's Clothing > Dresses", sold_count=340, service=["freeShipping", "flashsale"],
       sku_options={"1": {"size": "m", "color_family": "red"}, "2": {"size": "l", "color_family": "blue"}},
       attributes={"fa_pattern": ["floral"], "clothing_material": ["cotton"]}),
    _p("5113553160", "3242082", "Men's Cotton T-Shirt Crew Neck Plain Tee", 199.0,
       category="Men's Clothing > Tops > T-Shirts", sold_count=2500, service=["COD", "freeShipping"],
       sku_options={"1": {"size": "m", "color_family": "white"}, "2": {"size": "xl", "color_family": "black"}},
       attributes={"clothing_material": ["cotton"], "fa_pattern": ["plain"]}),
    # shop 5374042: electronics
    _p("5122886302", "5374042", "Wireless Bluetooth Earbuds TWS Noise Cancelling Earphones", 1299.0,
       brand="soundpeak", category="Electronics Parts & Accessories > Audio > Earphones",
       sold_count=980, service=["official", "freeShipping", "COD"],
       sku_options={"1": {"color_family": "black"}, "2": {"color_family": "white"}},
       attributes={"connectivity": ["bluetooth 5.3"], "brand": ["soundpeak"]}),
    _p("5122886303", "5374042", "3.5mm AUX Audio Cable Male to Male 1m Gold Plated", 89.0,
       category="Electronics Parts & Accessories > Cables", sold_count=3100, service=["COD"],
       sku_options={"1": {"length": "1m"}, "2": {"length": "2m"}}, attributes={"connector": ["3.5mm"]}),
    _p("5122886304", "5374042", "20000mAh Power Bank Fast Charging USB-C PD", 1150.0,
       category="Electronics Parts & Accessories > Power Banks", sold_count=640, service=["official", "COD"],
       attributes={"capacity": ["20000mah"], "port": ["usb-c"]}),
    _p("5122886305", "5374042", "Phone Case Shockproof Silicone Cover for iPhone 15", 149.0,
       category="Electronics Parts & Accessories > Phone Cases", sold_count=5200, service=["COD", "flashsale"],
       sku_options={"1": {"color_family": "clear"}, "2": {"color_family": "black"}},
       attributes={"material": ["silicone"], "compatible_devices": ["iphone 15"]}),
    # shop 4648081: home
    _p("4410867766", "4648081", "Heavy Duty Pushcart Solid Rubber Wheel Steel Body 6/8/10/12 Inches", 320.0,
       category="Tools & Home Improvement > Hardware", sold_count=56, service=["COD"],
       sku_options={"1": {"size": "8 inch"}, "2": {"size": "12 inch"}}, attributes={"material": ["rubber"]}),
    _p("4410867767", "4648081", "Non-Stick Rice Cooker 1.8L Electric with Steamer", 1590.0,
       category="Home Appliances > Kitchen Appliances", sold_count=420, service=["official", "freeShipping"],
       attributes={"capacity": ["1.8l"], "brand": ["kusina"]}),
    _p("4410867768", "4648081", "Stainless Steel Kitchen Knife Set 6 Pieces with Block", 780.0,
       category="Kitchenware & Tableware > Knives", sold_count=95, service=["COD", "freeShipping"],
       attributes={"material": ["stainless steel"], "pack_type": ["6 pcs"]}),
    _p("4410867769", "4648081", "Cotton Bed Sheet Set Queen Size 4 in 1", 540.0,
       category="Household Supplies > Bedding", sold_count=230, service=["flashsale"],
       sku_options={"1": {"size": "queen", "color_family": "grey"}, "2": {"size": "king", "color_family": "grey"}},
       attributes={"material": ["cotton"]}),
    # shop 230820: groceries (one shop with only two items)
    _p("2155232803", "230820", "Hyco Chili Powder 1 kilo", 399.0,
       category="Groceries > Spices", sold_count=12, service=["COD"],
       attributes={"packaging_type": ["bag"], "pack_type": ["single"]}),
    _p("2155232804", "230820", "Barako Coffee Ground 500g Strong Roast", 280.0,
       category="Groceries > Coffee", sold_count=800, service=["COD", "freeShipping"],
       sku_options={"1": {"type of coffee": "ground"}, "2": {"type of coffee": "whole bean"}},
       attributes={"dietary_needs": ["sugar free"]}),
    _p("282932628", "5497691", "Sakura Craypas Junior Artist 50 Colors Oil Pastel", 415.0,
       category="Stationery, Craft & Gift Cards > Art Supplies", sold_count=150, service=["official"],
       attributes={"type_of_inks": ["oil-based"]}),
]


@pytest.fixture(scope="session", autouse=True)
def _gguf_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The GGUF cache the ``llamacpp:`` backend exports into, a session temp dir: tests never write to the home
    directory (subprocesses the tests start inherit it)."""
    cache = tmp_path_factory.mktemp("cache")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("SHOPARENA_CACHE_DIR", str(cache))
        yield cache


@pytest.fixture(scope="session")
def tiny_products() -> list[Product]:
    """The 20 hand-made products, validated."""
    return [Product.model_validate(p) for p in TINY_CATALOG]


@pytest.fixture(scope="session")
def backend(tiny_products: list[Product], tmp_path_factory: pytest.TempPathFactory) -> SearchService:
    """The real in-process search service (upstream mode) over the 20 hand-made products."""
    return SearchService(SearchIndex.build(tiny_products, tmp_path_factory.mktemp("env") / "idx"))


@pytest.fixture(scope="session")
def data_dir() -> Path:
    """``tests/data``: real upstream problems, suites and samples with their licenses."""
    return DATA


@pytest.fixture(scope="session")
def web_products() -> list[Product]:
    """The 150 real upstream products carried by the Knowledge test problems (full records)."""
    import json

    out = []
    with open(DATA / "shoppingbench" / "synthesize_web_simpleqa_test.jsonl", encoding="utf-8") as fh:
        for line in fh:
            out.append(Product.model_validate(json.loads(line)["reward"]))
    return out


@pytest.fixture(scope="session")
def pg_server() -> Iterator[TempPostgres]:
    """One real temporary PostgreSQL server for the whole session (each user creates its own schema); skips with
    the reason where none can be started (install the Debian package ``postgresql``)."""
    reason = unavailable_reason()
    if reason:
        pytest.skip(f"PostgreSQL tests skipped: {reason}")
    try:
        server = TempPostgres(fsync=False).start()
    except RuntimeError as exc:
        pytest.skip(f"PostgreSQL tests skipped: could not start a temporary server: {exc}")
    yield server
    server.stop()
