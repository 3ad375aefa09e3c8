"""``shoparena problems``: generate problems from a catalog and summarise problem files."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer
from rich.table import Table

from shoparena.cli._common import console, err_console, print_json, seed_option

if TYPE_CHECKING:
    from shoparena.catalog import Product

app = typer.Typer(help="Generate and inspect problem sets.", no_args_is_help=True)

MAX_REUSED_GT_FRACTION = 0.5
"""``problems generate`` refuses (without ``--force``) when more than this share of the clusters reuse ground-truth
products of an earlier cluster: the catalog is too small for the number of problems asked, and the "clusters"
would not be independent (a leak across any split)."""


@app.command()
def generate(
    catalog: Annotated[Path, typer.Option("--catalog", help="Catalog directory.")],
    out: Annotated[Path, typer.Option("--out", help="Problem JSONL to write (upstream keys plus ours).")],
    n: Annotated[int, typer.Option("--n", min=1, help="Number of problems (clusters are cut to fit).")] = 30,
    seed: Annotated[int, seed_option("Random seed.")] = 0,
    paraphrases: Annotated[int, typer.Option("--paraphrases", min=0, help="Extra variants per cluster.")] = 2,
    buckets: Annotated[str, typer.Option("--buckets", help="Comma-separated buckets.")] = "product,shop,voucher",
    force: Annotated[bool, typer.Option("--force", help="Write even when most clusters share ground truths "
                                        "(a catalog too small for --n).")] = False,
) -> None:
    """Generate solvable problems (product / shop / voucher) with paraphrase clusters.

    Clusters whose ground-truth products repeat an earlier cluster's are reported on stderr; when more than half
    of them do, nothing is written (exit 3) unless --force."""
    from shoparena.cli._common import output_file
    from shoparena.errors import ConfigError, DataError
    from shoparena.tasks import GenerationReport, dump_problems, generate_problems

    names = [b.strip() for b in buckets.split(",") if b.strip()]
    if not names:
        raise ConfigError(f"--buckets {buckets!r} names no bucket", hint="e.g. --buckets product,shop,voucher")
    output_file(out, inputs=[("--catalog", catalog)])
    products = _catalog_products(catalog)
    report = GenerationReport()
    problems = generate_problems(products, n=n, seed=seed, buckets=names, paraphrases=paraphrases, report=report)
    if not problems:
        raise DataError(f"no problem could be generated from {catalog}",
                        hint="; ".join(f"{b}: {why}" for b, why in report.skipped_buckets.items())
                        or "use a larger catalog")
    if report.reused_gt:
        err_console.print(f"[yellow]{report.reused_gt} of {report.clusters} clusters reuse ground-truth products of "
                          f"an earlier cluster: the catalog ({len(products):,} products) is small for {n} "
                          "problems[/]", soft_wrap=True)
        if report.reused_gt > MAX_REUSED_GT_FRACTION * report.clusters and not force:
            raise DataError(f"{report.reused_gt} of {report.clusters} clusters share ground truths (more than "
                            f"{MAX_REUSED_GT_FRACTION:.0%}); nothing written",
                            hint="ask for fewer problems (--n), use a larger catalog, or pass --force")
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
