"""``shoparena search``: run one ``find_product`` query against a catalog's index."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from shoparena.catalog import index_path
from shoparena.cli._common import console, print_json


def search(
    query: Annotated[str, typer.Argument(help="Search text.")],
    catalog: Annotated[Path, typer.Option("--catalog", help="Catalog directory (or index directory).")],
    page: Annotated[int, typer.Option("--page", min=1, max=5, help="Result page 1..5 of 10 items.")] = 1,
    shop_id: Annotated[str | None, typer.Option("--shop-id", help="Only this shop.")] = None,
    price: Annotated[str | None, typer.Option("--price", help='Price range "LO-HI", "LO-" or "-HI".')] = None,
    service: Annotated[str | None, typer.Option("--service", help="Comma list of required service codes.")] = None,
    sort: Annotated[str | None, typer.Option("--sort", help="order | priceasc | pricedesc.")] = None,
    mode: Annotated[str, typer.Option("--mode", help="upstream (silent) or strict (explicit errors).")] = "upstream",
    as_json: Annotated[bool, typer.Option("--json", help="Print the upstream result list as JSON.")] = False,
) -> None:
    """Search like upstream /find_product and print product_id, shop_id, title, price, service, sold_count."""
    from shoparena.catalog import SearchIndex, SearchService

    svc = SearchService(SearchIndex.open(index_path(catalog)), mode=mode)  # type: ignore[arg-type]
    result = svc.find_product(query, page=page, shop_id=shop_id, price=price, sort=sort, service=service)
    if as_json:
        print_json(result)
        return
    if isinstance(result, dict):  # strict mode's explicit error for a bad argument
        from shoparena.errors import ConfigError

        raise ConfigError(f"find_product: {result.get('error')}",
                          hint=f"check --{str(result.get('argument', 'query')).replace('_', '-')}")
    table = Table(title=f"find_product q={query!r} page={page}", show_lines=False)
    cols = ("product_id", "shop_id", "title", "price", "service", "sold_count")
    for col in cols:
        table.add_column(col, overflow="fold", max_width=60 if col == "title" else None)
    for item in result:
        table.add_row(*(",".join(item[c]) if c == "service" else str(item[c]) for c in cols))
    console.print(table)
