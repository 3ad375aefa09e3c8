"""``shoparena catalog``: generate a synthetic catalog, import an upstream one, describe it, serve its search API."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Annotated

import typer

from shoparena.cli._common import console, err_console, print_json, progress_bar, seed_option

app = typer.Typer(help="Build, import, describe and serve product catalogs.", no_args_is_help=True)


@app.command()
def generate(
    out: Annotated[Path, typer.Option("--out", help="Catalog directory to write.")],
    size: Annotated[int, typer.Option("--size", min=1, help="Number of products.")] = 5000,
    seed: Annotated[int, seed_option("Random seed (same seed, same bytes).")] = 0,
    min_count: Annotated[int | None, typer.Option(
        "--min-count", min=1, help="Long-tail filter: drop SKU/attribute keys and values rarer than this "
        "(default: min(20, size // 500), at least 2; upstream uses 20).")] = None,
    force: Annotated[bool, typer.Option("--force", help="Replace a catalog already in --out.")] = False,
) -> None:
    """Write DIR/documents.jsonl.gz (upstream {id, contents, product} lines) and DIR/index in one pass."""
    import shutil

    from shoparena.artefact import claim_new
    from shoparena.catalog import DOCUMENTS_FILE, INDEX_DIR, create_catalog, generate_catalog

    if claim_new(out, "catalog", force=force) is not None:
        shutil.rmtree(out)

    t0 = time.perf_counter()
    with progress_bar(f"generating and indexing {size:,} products", size) as advance:
        index = create_catalog(generate_catalog(size, seed, min_count=min_count), out, progress=advance)
    console.print(
        f"[green]catalog[/] {len(index):,} products in {index.meta['n_shops']:,} shops → {out / DOCUMENTS_FILE}; "
        f"index {index.meta['n_terms']:,} terms → {out / INDEX_DIR} ({time.perf_counter() - t0:.1f} s)"
    )


@app.command("import")
def import_(
    file: Annotated[Path, typer.Argument(help="Upstream documents.jsonl or .jsonl.gz.", exists=True, dir_okay=False)],
    out: Annotated[Path, typer.Option("--out", help="Catalog directory to write the index into.")],
    force: Annotated[bool, typer.Option("--force", help="Replace a catalog already in --out.")] = False,
    allow_empty: Annotated[bool, typer.Option("--allow-empty", help="Index a file with no valid line.")] = False,
) -> None:
    """Index an upstream documents file; bad lines are skipped, counted and reported with line numbers.

    The index is built beside --out and swapped in when complete: a failed or empty import leaves an existing
    catalog untouched."""
    from shoparena.artefact import claim_out
    from shoparena.catalog import INDEX_DIR, import_catalog

    claim_out(out, "catalog", inputs=[("FILE", file)])  # a catalog there is replaced by --force, atomically
    t0 = time.perf_counter()
    with progress_bar(f"indexing {file.name}", None) as advance:
        index, report = import_catalog(file, out, progress=advance, allow_empty=allow_empty, overwrite=force)
    console.print(f"[green]indexed[/] {len(index):,} products → {out / INDEX_DIR} ({time.perf_counter() - t0:.1f} s)")
    if report.n_bad:
        err_console.print(f"[yellow]{report.summary()}[/]")


@app.command()
def info(
    catalog: Annotated[Path, typer.Option("--catalog", help="Catalog directory (or index directory).")],
    as_json: Annotated[bool, typer.Option("--json", help="Print the index metadata as JSON.")] = False,
) -> None:
    """Size, collection statistics and provenance of a catalog's index."""
    from shoparena.catalog import SearchIndex, index_path

    meta = SearchIndex.open(index_path(catalog)).meta
    if as_json:
        print_json(meta)
        return
    for key, value in meta.items():
        console.print(f"[bold]{key:>20}[/] {value}")


@app.command()
def serve(
    catalog: Annotated[Path, typer.Option("--catalog", help="Catalog directory (or index directory).")],
    host: Annotated[str, typer.Option(help="Interface to bind.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="TCP port (upstream 5631, ORO 5632).")] = 5632,
    uds: Annotated[str | None, typer.Option(help="Listen on this Unix socket instead of TCP.")] = None,
    raw: Annotated[bool, typer.Option("--raw/--no-raw", help="Expose /get_product_raw (scorer only).")] = True,
    mode: Annotated[str, typer.Option(help="Input mode: upstream (silent) or strict (explicit errors).")] = "upstream",
    flavor: Annotated[str, typer.Option(help="upstream (CAPACITY 100000) or oro (10000, special chars).")] = "upstream",
    workers: Annotated[int, typer.Option(min=1, help="Worker processes sharing the memory-mapped index.")] = 1,
) -> None:
    """Serve /find_product, /view_product_information, /get_product_raw and /health over HTTP."""
    from shoparena.catalog import FLAVORS, MODES, index_path, serve_index
    from shoparena.errors import ConfigError

    if mode not in MODES or flavor not in FLAVORS:
        raise ConfigError(f"bad --mode {mode!r} or --flavor {flavor!r}",
                          hint=f"modes: {', '.join(MODES)}; flavours: {', '.join(FLAVORS)}")
    path = index_path(catalog)
    if uds is None:  # a port in use is one clear error here, before "serving" is printed
        from shoparena._http import bind_socket

        bind_socket(host, port).close()
    err_console.print(f"serving {path} on {uds or f'http://{host}:{port}'} (mode {mode}, flavour {flavor})")
    serve_index(path, host=host, port=port, uds=uds, enable_raw=raw, mode=mode,  # type: ignore[arg-type]
                flavor=flavor, workers=workers)  # type: ignore[arg-type]
