"""``shoparena demo``: the main job on the embedded default, end to end, with readable output.

It builds a synthetic catalog and a problem set, runs a few searches, scores hand-made recommendations (played
through the real episode runner and tools, scored from the written rollout file in both scorer modes), runs
built-in agents with offline policy models through the logging gateway, and finally evaluates two of them like a
validator (sandbox → rule score → judge → append-only trajectory records). Every artefact lands in ``--out`` so
each step can be repeated with its own command. The console shows each step's tables; library warnings, the
trainers' per-step logs and whatever the libraries print go to ``OUT/demo.log`` (``--verbose``: on the console
instead). The demo trains a model, so it needs the ``train`` extra and says so before it starts.
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.panel import Panel
from rich.table import Table

from shoparena.cli._common import console, progress_bar, seed_option


class HandMadeShopper:
    """A scripted policy (tag protocol): search the query once, recommend the given ids, terminate."""

    def __init__(self, query: str, ids: list[str], why: str) -> None:
        self.turns = [
            ("Search the catalog for what the user asks.", [{"name": "find_product",
                                                            "parameters": {"q": query, "page": 1}}]),
            (why, [{"name": "recommend_product", "parameters": {"product_ids": ",".join(ids)}}]),
            ("Done.", [{"name": "terminate", "parameters": {"status": "success"}}]),
        ]
        self.step = 0

    def respond(self, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> Any:
        from shoparena.env import AssistantMessage

        think, calls = self.turns[min(self.step, len(self.turns) - 1)]
        self.step += 1
        return AssistantMessage(content=f"<think>{think}</think>\n<tool_call>{json.dumps(calls)}</tool_call>")


def _search_table(title: str, items: list[dict[str, Any]] | dict[str, Any], limit: int = 5) -> Table:
    table = Table(title=title, title_justify="left", show_lines=False)
    for col in ("product_id", "shop_id", "title", "price", "service", "sold"):
        table.add_column(col, overflow="ellipsis", no_wrap=True, max_width=52 if col == "title" else None)
    if isinstance(items, dict):
        table.add_row("error", items.get("argument", ""), items.get("error", ""), "", "", "")
        return table
    for item in items[:limit]:
        table.add_row(item["product_id"], item["shop_id"], item["title"], f"{item['price']:,.2f}",
                      ",".join(item["service"]), str(item["sold_count"]))
    return table


def _recommendations(problem: Any, svc: Any) -> list[tuple[str, list[str]]]:
    """Three hand-made answers per problem: the ground truth, the naive first hits, and a deliberate miss."""
    gt = problem.gt_ids()
    hits = svc.find_product(problem.query.split("\n")[0])
    first = [h["product_id"] for h in hits[: len(gt)]] if isinstance(hits, list) else []
    if problem.bucket == "product":
        miss = [next(h["product_id"] for h in hits if h["product_id"] != gt[0])] if len(hits) > 1 else ["0"]
        miss_why = "another result"
    elif problem.bucket == "shop":
        miss, miss_why = list(reversed(gt)), "GT, wrong order"
    else:
        miss, miss_why = gt[:-1], "GT minus one item"
    return [("ground truth", gt), ("first hits", first), (miss_why, miss)]


#: (agent, model) pairs the demo runs: one agentic ReAct agent, one sub-task pipeline, one weak baseline.
DEMO_AGENTS: tuple[tuple[str, str], ...] = (
    ("react", "policy:expert"), ("pipeline", "policy:expert"), ("react", "policy:novice"),
)


def _agents(out: Path, problems: list[Any], seed: int) -> None:
    from shoparena.validator import RunConfig, run_agents

    table = Table(title="5. agents through the logging gateway (sandbox-ready single files, strict scorer)",
                  title_justify="left")
    for col in ("agent", "model", "ASR", "product", "shop", "voucher", "search calls A / B", "LLM calls", "time"):
        table.add_column(col, justify="left" if col in ("agent", "model") else "right")
    for agent, model in DEMO_AGENTS:
        summary = run_agents(out / "catalog", problems, RunConfig(agent=agent, model=model, seed=seed),
                             out / "runs" / f"{agent}-{model.split(':')[-1]}")
        by = summary.asr_by_bucket
        table.add_row(agent, model, f"{summary.asr:.2f}", *(f"{by.get(b, 0):.2f}" for b in ("product", "shop", "voucher")),
                      f"{summary.calls.get('search_axis_A', 0)} / {summary.calls.get('search_axis_B', 0)}",
                      str(summary.calls.get("inference", 0)), f"{summary.seconds:.1f} s")
    console.print(table)
    console.print("[dim]axis A: the model emitted the tool call; axis B: Python issued it (gateway attribution). "
                  f"Trajectories and call logs: {out / 'runs'}/*/rollouts.jsonl, calls.jsonl[/]")


def _validate(out: Path, problems: list[Any], seed: int) -> None:
    import shutil

    from shoparena.agents import agent_path
    from shoparena.store import open_store
    from shoparena.validator import AgentSpec, ValidatorConfig, evaluate

    hermetic = shutil.which("bwrap") is not None
    config = ValidatorConfig(sandbox="bubblewrap" if hermetic else "process", allow_non_hermetic=not hermetic,
                             validator_hotkey="demo-validator", seed=seed)
    url = f"sqlite:///{(out / 'trajectories.db').resolve()}"
    table = Table(title=f"6. validator: {config.sandbox} sandbox → strict scorer → rubric judge → {url}",
                  title_justify="left")
    for col in ("agent", "success", "reasoning q", "coeff", "final", "records", "axis", "judge gates failed"):
        table.add_column(col, justify="left" if col == "agent" else "right")
    with open_store(url) as store:
        for name in ("react", "pipeline"):
            spec = AgentSpec(path=str(agent_path(name)), agent_id=name, miner_hotkey=f"demo-miner-{name}")
            summary = evaluate(spec, problems, out / "catalog", store, config)
            records = list(store.query(eval_run_id=summary.eval_run_id))
            gates = sorted({r.judge["gate"] for r in records if r.judge and r.judge.get("gate")})
            fmt = lambda v: "–" if v is None else f"{v:.3f}"  # noqa: E731
            table.add_row(name, fmt(summary.success_rate), fmt(summary.reasoning_quality),
                          fmt(summary.reasoning_coefficient), fmt(summary.final_score),
                          f"{len(records)} ({summary.records_written} new)",
                          "/".join(sorted({r.axis for r in records})), ",".join(f"G{g}" for g in gates) or "none")
        console.print(table)
        sample = next(iter(store.query(limit=1)), None)
    if not hermetic:
        console.print("[yellow]bubblewrap is missing: the demo used the non-hermetic process sandbox[/]")
    if sample is not None:
        console.print(f"[dim]a record: {sample.record_id[:16]}… {sample.problem_id} {sample.status} "
                      f"success={sample.success} judge={sample.judge_score} "
                      f"({len(sample.judge['spans']) if sample.judge else 0} cited spans), "
                      f"{len(sample.call_log)} gateway calls, pipeline {sample.pipeline_version}; "
                      f"export: shoparena store export --store {url} --out records.jsonl[/]")


def _arena(out: Path, seed: int) -> None:
    from shoparena.arena.simulate import SimulationConfig, simulate
    from shoparena.cli.arena import render

    cfg = SimulationConfig(miners=6, validators=3, days=2, seed=seed, out=str(out / "arena"), catalog_size=1500,
                           problems=120, qualifying_problems=8, race_problems=8)
    console.print(f"[bold cyan]7. arena[/] {cfg.miners} miners, {cfg.validators} validators, {cfg.days} simulated "
                  f"days (full size: shoparena arena simulate --miners 12 --validators 3 --days 2)")
    result = simulate(cfg, progress=lambda m: None if " step " in m else console.print(f"   [dim]{m}[/]"))
    render(result)


def _corpus(out: Path) -> None:
    from shoparena.cli.corpus import render
    from shoparena.corpus import build_corpus

    arena = out / "arena"
    console.print("[bold cyan]8. corpus[/] of the simulated days: normalise → judge / format / axis / dedup+rank "
                  "filter → axis-B rewrite → leak-cluster split → SFT / KTO / GRPO export")
    report = build_corpus(out / "corpus", store=f"sqlite:///{(arena / 'subnet.db').resolve()}",
                          catalog=arena / "catalog", banks=arena / "banks")
    render(report)
    console.print(f"[dim]rebuild: shoparena corpus build --from sqlite:///{arena / 'subnet.db'} --catalog "
                  f"{arena / 'catalog'} --banks {arena / 'banks'} --out {out / 'corpus'}[/]")


def _train(out: Path, seed: int) -> None:
    from shoparena.train.recipe import load_recipe, run_recipe

    arena, corpus = out / "arena", out / "corpus"
    console.print("[bold cyan]9. train[/] the tiny recipe on the corpus: SFT → rejection-sampled re-SFT → teacher "
                  "SFT → KTO → Dr. GRPO (a from-scratch tiny Qwen3: plumbing, not quality; the real base is "
                  "SmolLM2-135M, recipe cpu-mini)")
    recipe, text = load_recipe("tiny")
    manifest = run_recipe(recipe, corpus, out / "train", catalog_dir=arena / "catalog", recipe_text=text,
                          progress=progress_bar)  # a bar per phase of each stage (on a terminal)
    table = Table(title=f"9. train tiny → {out / 'train'}", title_justify="left")
    for col in ("stage", "steps", "loss first → last", "seconds", "checkpoint"):
        table.add_column(col, justify="left" if col in ("stage", "checkpoint") else "right")
    for r in manifest.stages:
        first, last = r.metrics.get("loss_first"), r.metrics.get("loss_last")
        table.add_row(r.stage, str(r.steps), "–" if first is None or last is None else f"{first:.3f} → {last:.3f}",
                      f"{r.seconds:.1f}", r.checkpoint_sha256[:12])
    console.print(table)
    console.print(f"[dim]retrain: shoparena train tiny --corpus {corpus} --catalog {arena / 'catalog'} --out "
                  f"{out / 'train'}[/]")


def _loop(out: Path, seed: int) -> None:
    from shoparena.evaluate.loop import LoopConfig, render_loop, run_loop

    console.print("[bold cyan]10. the loop closes[/]: the trained model evaluated on held-out problems beside its "
                  "base (bootstrap CIs, paired test, report), then served over the OpenAI API and entered into the "
                  "arena as a new miner for one more simulated day")
    cfg = LoopConfig(out=str(out), days=2, race_days=1, recipe="tiny", seed=seed, reuse=True, eval_per_bucket=1,
                     eval_samples=2, timeout_s=30)
    body = run_loop(cfg, progress=lambda m: console.print(f"   [dim]{m}[/]"), bars=progress_bar)
    console.print(render_loop(body))
    console.print(f"[dim]report: {out / 'eval' / 'report.html'}; the whole loop from scratch: shoparena loop --days 2 "
                  f"--recipe tiny --out DIR[/]")
    store = f"sqlite:///{(out / 'arena-loop' / 'subnet.db').resolve()}"
    console.print("[bold cyan]11. the web pages[/] over this run (leaderboard, races, agents, trajectory viewer, "
                  "corpus funnel, evaluation report):")
    console.print(f"   shoparena web --store {store} --corpus {out / 'corpus'} --reports {out / 'eval'} --port 8080")
    console.print("   then open http://127.0.0.1:8080/")


def demo(
    out: Annotated[Path, typer.Option("--out", help="Directory for every artefact of the run.")] = Path("demo-out"),
    size: Annotated[int, typer.Option("--size", min=200, help="Synthetic catalog size.")] = 5000,
    n_problems: Annotated[int, typer.Option("--problems", min=3, help="Problems to generate.")] = 30,
    seed: Annotated[int, seed_option("Seed for catalog and problems.")] = 0,
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Show library warnings and trainer logs on the "
                                                                  "console as they come instead of in OUT/demo.log.")]
    = False,
) -> None:
    """Run the embedded-default pipeline: catalog → problems → search → agents → validator → arena → corpus →
    training → evaluation, and the trained model raced in the arena."""
    from shoparena.cli._extras import require_extra
    from shoparena.cli._output import library_output

    require_extra("train", "demo")  # steps 9-10 train and evaluate a model: say so before step 1
    from shoparena.artefact import claim_new
    from shoparena.seal import write_json

    claim_new(out, "demo", replace_own=True)  # an earlier demo there is replaced; anything else is refused
    out.mkdir(parents=True, exist_ok=True)
    write_json(out / "demo.json", {"format": "shoparena-demo/1",
                                   "config": {"size": size, "problems": n_problems, "seed": seed}})
    t_start = time.perf_counter()
    console.print(Panel.fit("[bold]shoparena demo[/] — embedded default: synthetic catalog, offline, no keys",
                            border_style="cyan"))
    log = out / "demo.log"
    with library_output(None if verbose else log, verbose=verbose):
        _demo(out, size, n_problems, seed)
    console.print(f"[green]done[/] in {time.perf_counter() - t_start:.1f} s"
                  + ("" if verbose else f"  [dim](library warnings and trainer logs: {log})[/]"))


def _demo(out: Path, size: int, n_problems: int, seed: int) -> None:
    from shoparena._io import write_jsonl
    from shoparena.catalog import SearchService, create_catalog, generate_catalog
    from shoparena.env import run_episode
    from shoparena.scoring.run import ScoreConfig, score_run
    from shoparena.tasks import dump_problems, generate_problems, problem_stats

    # 1. catalog
    t0 = time.perf_counter()
    index = create_catalog(generate_catalog(size, seed), out / "catalog")
    console.print(f"[bold cyan]1. catalog[/]  {len(index):,} products · {index.meta['n_shops']:,} shops · "
                  f"{index.meta['n_terms']:,} index terms · {time.perf_counter() - t0:.1f} s  → {out / 'catalog'}")

    # 2. problems
    problems = generate_problems(index, n=n_problems, seed=seed)
    problems_file = out / "problems.jsonl"
    dump_problems(problems, problems_file)
    stats = problem_stats(problems)
    console.print(f"[bold cyan]2. problems[/] {stats['total']} problems in {stats['clusters']} leak clusters "
                  f"{dict(stats['counts'])} → {problems_file}")
    picked = {b: next(p for p in problems if p.bucket == b) for b in ("product", "shop", "voucher")
              if any(p.bucket == b for p in problems)}
    for bucket, problem in picked.items():
        console.print(f"   [dim]{bucket:>8}[/] {problem.query.splitlines()[0]}")

    # 3. searches
    svc = SearchService(index)
    strict = SearchService(index, mode="strict")
    product = picked.get("product") or problems[0]
    q = product.query.splitlines()[0]
    gt = index.get(product.gt_ids()[0])
    console.print("[bold cyan]3. search[/] (BM25 k1=0.9 b=0.4, Lucene analyzer, top-50 then page of 10)")
    console.print(_search_table(f"find_product q={q!r}", svc.find_product(q)))
    if gt is not None:
        lo, hi = int(gt.price * 0.8), int(gt.price * 1.2) + 1
        console.print(_search_table(f"… price={lo}-{hi} sort=priceasc", svc.find_product(q, price=f"{lo}-{hi}",
                                                                                        sort="priceasc")))
        console.print(_search_table(f"… shop_id={gt.shop_id}", svc.find_product(q, shop_id=gt.shop_id)))
    console.print(_search_table("strict mode, price='above:10' (a real SFT-model output)",
                                strict.find_product(q, price="above:10")))

    # 4. hand-made recommendations, played through the runner and scored from the rollout file
    rollouts, labels = [], []
    for problem in picked.values():
        for label, ids in _recommendations(problem, svc):
            episode = run_episode(problem, HandMadeShopper(problem.query, ids, f"Recommend: {label}."), svc)
            rollouts.append(episode.steps)
            labels.append((problem, label))
    rollouts_file = out / "rollouts.jsonl"
    write_jsonl(rollouts_file, rollouts)
    picked_problems = list(picked.values())
    runs = {mode: score_run(index, picked_problems, rollouts_file, ScoreConfig(mode=mode))
            for mode in ("upstream", "strict")}
    table = Table(title="4. hand-made recommendations, played through the runner and scored", title_justify="left")
    for col in ("bucket", "answer", "mode", "ok", "rule", "title", "price", "service", "sku&attr", "gt", "shop/budget"):
        table.add_column(col, justify="left" if col in ("bucket", "answer", "mode") else "right")
    by_key = {mode: {(s.problem_id, s.sample): s for s in run.problems} for mode, run in runs.items()}
    sample_of: dict[str, int] = {}
    fmt = lambda v: "–" if v is None else f"{v:.2f}"  # noqa: E731
    for problem, label in labels:
        sample = sample_of.get(problem.problem_id, 0)
        sample_of[problem.problem_id] = sample + 1
        for mode in ("upstream", "strict"):
            sc = by_key[mode][(problem.problem_id, sample)]
            extra = sc.shop if problem.bucket == "shop" else sc.budget
            table.add_row(problem.bucket if mode == "upstream" else "", label if mode == "upstream" else "", mode,
                          "[green]✓[/]" if sc.success else "[red]✗[/]", fmt(sc.rule),
                          *(fmt(sc.fields.get(k)) for k in ("title", "price", "service", "sku & attrs")),
                          fmt(sc.gt), fmt(extra), end_section=mode == "strict")
    console.print(table)
    for mode, run in runs.items():
        agg = run.aggregate
        buckets = "  ".join(f"{b} {v:.2f}" for b, v in agg.asr_by_bucket.items())
        console.print(f"   {mode:>8}: ASR {agg.asr:.3f} ({buckets})  gt rate {agg.gt_rate:.3f}  "
                      f"mean rule {agg.rule_mean:.3f}")
    console.print(f"[dim]re-score: shoparena score --catalog {out / 'catalog'} --problems {problems_file} "
                  f"--rollouts {rollouts_file} --mode strict[/]")

    # 5. agents through the logging gateway
    _agents(out, problems, seed)

    # 6. the validator: sandbox → score → judge → append-only records
    _validate(out, [p for b in ("product", "shop", "voucher") for p in [q for q in problems if q.bucket == b][:3]],
              seed)

    # 7. the whole subnet, demo-sized: miners submit, validators evaluate in the sandbox, races, weights, emissions
    _arena(out, seed)

    # 8. the corpus of the simulated days: normalise → filter → rewrite axis B → split by leak cluster → export
    _corpus(out)

    # 9. a tiny training pass over that corpus (all five stages)
    _train(out, seed)

    # 10. the loop closes: held-out evaluation + report, then the trained model served and raced as a new miner
    _loop(out, seed)
