"""``shoparena problems``: generate problems from a catalog and summarise problem files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from shoparena.cli._common import console, err_console, print_json

if TYPE_CHECKING:
    from shoparena.catalog import Product

app = typer.Typer(help="Generate and inspect problem sets.", no_args_is_help=True)


@app.command()
def generate(
    catalog: Annotated[Path, typer.Option("--catalog", help="Catalog directory.")],
    out: Annotated[Path, typer.Option("--out", help="Problem JSONL to write (upstream keys plus ours).")],
    n: Annotated[int, typer.Option("--n", min=1, help="Number of problems (clusters are cut to fit).")] = 30,
    seed: Annotated[int, typer.Option("--seed", help="Random seed.")] = 0,
    paraphrases: Annotated[int, typer.Option("--paraphrases", min=0, help="Extra variants per cluster.")] = 2,
    buckets: Annotated[str, typer.Option("--buckets", help="Comma-separated buckets.")] = "product,shop,voucher",
) -> None:
    """Generate solvable problems (product / shop / voucher) with paraphrase clusters."""
    from shoparena.tasks import GenerationReport, dump_problems, generate_problems

    products = _catalog_products(catalog)
    report = GenerationReport()
    names = [b.strip() for b in buckets.split(",") if b.strip()]
    problems = generate_problems(products, n=n, seed=seed, buckets=names, paraphrases=paraphrases, report=report)
    dump_problems(problems, out)
    console.print(
        f"[green]wrote[/] {report.problems} problems in {report.clusters} clusters → {out}  {report.by_bucket}"
    )
    for bucket, why in report.skipped_buckets.items():
        err_console.print(f"[yellow]skipped {bucket} problems:[/] {why}")
    if report.problems < n:
        err_console.print(f"[yellow]only {report.problems} of {n} problems could be generated[/]")


def _catalog_products(catalog: Path) -> Sequence[Product]:
    """The catalog's memory-mapped index (a lazy ``Sequence[Product]``) when it has one, else its documents."""
    from shoparena.catalog import index_path, iter_catalog_products
    from shoparena.errors import NotFoundError

    try:
        from shoparena.catalog import SearchIndex

        return SearchIndex.open(index_path(catalog))
    except (ImportError, NotFoundError) as exc:  # no index built (yet): the documents serve as well
        import logging

        logging.getLogger(__name__).info("no search index for %s (%s: %s); reading its documents instead",
                                         catalog, type(exc).__name__, exc)
    # iter_catalog_products may yield loader documents (``.product``) or products.
    return [getattr(doc, "product", doc) for doc in iter_catalog_products(catalog)]


@app.command()
def stats(
    file: Annotated[Path, typer.Argument(help="Upstream JSONL, ORO suite JSON, or our problem JSONL.", exists=True)],
    as_json: Annotated[bool, typer.Option("--json", help="Print the statistics as JSON.")] = False,
) -> None:
    """Counts per bucket, items per problem, constraint keys, vouchers, difficulty and clusters."""
    from shoparena.tasks import ProblemLoadReport, load_problems, problem_stats

    report = ProblemLoadReport(path=str(file))
    result = problem_stats(load_problems(file, report))
    if report.bad_count:
        err_console.print(f"[yellow]{report.summary()}[/]")
    if as_json:
        print_json(result)
        return
    table = Table(title=f"problems in {file.name}")
    for col in ("bucket", "problems", "items", "items/problem", "price", "attributes", "sku", "service"):
        table.add_column(col, justify="left" if col == "bucket" else "right")
    for bucket, count in result["counts"].items():
        keys = result["constraints"][bucket]
        hist = " ".join(f"{k}:{v}" for k, v in result["items_per_problem"].get(bucket, {}).items())
        table.add_row(bucket, str(count), str(result["items"][bucket]), hist, str(keys["price"]),
                      str(keys["attributes"]), str(keys["sku_options"]), str(keys["service"]))
    console.print(table)
    vouchers = result["vouchers"]
    if vouchers["voucher_type"]:
        console.print(f"vouchers: {vouchers['voucher_type']} {vouchers['discount_type']} "
                      f"budget rule {vouchers['budget_rule']}")
    console.print(f"difficulty: {result['difficulty']}  clusters: {result['clusters']} "
                  f"(unclustered {result['unclustered']})")
