"""Web pages benchmark: server time per page over a 100,000-record SQLite store.

    python bench/web.py [--records 100000] [--agents 40] [--requests 200] [--store sqlite:///path.db]

Builds (unless ``--store`` names an existing one) a store from one real simulated arena day (arena tables,
judged records with cited spans and call logs) whose records are replicated — new run ids, agents and versions,
same content otherwise, sealed and appended through the store's own writer in batches of 1,000 — up to
``--records``. Then serves the pages (uvicorn on loopback, the app of ``shoparena web``) and times each request
inside the server (an ASGI wrapper from the first byte of the request to the last byte of the response), so the
figures are server time, not client or network time. Goal: leaderboard and trajectory page p95 < 100 ms.

Pages timed: ``/`` (leaderboard; the first request builds the record aggregates once and is reported
separately), ``/api/leaderboard``, ``/records/<id>`` (random records), ``/api/records/<id>``, ``/records``
(newest page), ``/records?agent=…&outcome=success`` and ``/records?bucket=voucher&axis=A`` (filtered pages), and
a deep page (``before`` near the oldest record).
"""

from __future__ import annotations

import argparse
import os
import random
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from shoparena.cli.pipes import run_script

os.environ.setdefault("OMP_NUM_THREADS", "1")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))


def build(root: Path, n: int, agents: int) -> str:
    from shoparena.arena.simulate import SimulationConfig, simulate
    from shoparena.store import open_store

    t = time.perf_counter()
    result = simulate(SimulationConfig(miners=6, validators=2, days=1, seed=0, catalog_size=800, problems=90,
                                       qualifying_problems=4, race_problems=4, sandbox="process", out=str(root)))
    print(f"simulated day: {result.trajectories['total']} records in {time.perf_counter() - t:.0f} s", flush=True)
    t = time.perf_counter()
    with open_store(result.store) as store:
        templates = [r.model_dump() for r in store.query()]
        have = store.count()
        rng = random.Random(0)
        batch: list[Any] = []
        i = 0
        while have < n:
            body = dict(templates[i % len(templates)])
            a = rng.randrange(agents)
            body.update(eval_run_id=f"bench-{i // 8:06d}", agent_id=f"bench-agent-{a:03d}",
                        agent_version=f"v{1 + (i % 3)}", problem_id=f"{body['problem_id']}#{i % 500}",
                        created_at=0, record_id="")
            for k in ("idempotency_key", "trace_sha256", "call_log_sha256", "pipeline_version"):
                body[k] = ""
            batch.append(type_of(store).model_validate(body))
            i += 1
            if len(batch) == 1000 or have + len(batch) >= n:
                have += store.append_many(batch)
                batch = []
                if have % 10_000 < 1000:
                    print(f"  {have} records ({time.perf_counter() - t:.0f} s)", flush=True)
    print(f"replicated to {n} records in {time.perf_counter() - t:.0f} s", flush=True)
    return result.store


def type_of(_store: Any) -> Any:
    from shoparena.store import TrajectoryRecord

    return TrajectoryRecord


class Timed:
    """ASGI wrapper recording server time per request path."""

    def __init__(self, app: Any) -> None:
        self.app, self.times = app, []

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        t = time.perf_counter()

        async def done(message: Any) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body"):
                self.times.append((time.perf_counter() - t) * 1000)

        await self.app(scope, receive, done)


def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, round(q * (len(xs) - 1)))]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--records", type=int, default=100_000)
    ap.add_argument("--agents", type=int, default=40)
    ap.add_argument("--requests", type=int, default=200)
    ap.add_argument("--store", default=None, help="an existing store to serve instead of building one")
    args = ap.parse_args()

    import httpx

    from shoparena._http import BackgroundServer
    from shoparena.web import Site, create_app

    tmp = None
    url = args.store
    if url is None:
        tmp = tempfile.TemporaryDirectory(prefix="shoparena-bench-web-")
        url = build(Path(tmp.name), args.records, args.agents)
    site = Site(url)
    timed = Timed(create_app(site))
    with BackgroundServer(timed) as srv, httpx.Client(base_url=srv.url, timeout=60) as c:
        with site.connect() as conn:
            from sqlalchemy import func, select

            from shoparena.store.schema import records

            total = conn.execute(select(func.count()).select_from(records)).scalar_one()
            lo, hi = conn.execute(select(func.min(records.c.seq), func.max(records.c.seq))).one()
        rng = random.Random(1)
        ids = []
        with site.connect() as conn:
            for _ in range(args.requests):
                s = rng.randint(lo, hi)
                rid = conn.execute(select(records.c.record_id).where(records.c.seq >= s).limit(1)).scalar()
                ids.append(rid)
        first = c.get("/")
        assert first.status_code == 200
        cold = timed.times[-1]
        agent = c.get("/api/leaderboard").json()["rows"][0]["agent_id"]
        pages = {
            "/ (leaderboard)": lambda i: "/",
            "/api/leaderboard": lambda i: "/api/leaderboard",
            "/records/<id> (trajectory)": lambda i: f"/records/{ids[i % len(ids)]}",
            "/api/records/<id>": lambda i: f"/api/records/{ids[i % len(ids)]}",
            "/records (newest 50)": lambda i: "/records",
            "/records?agent&outcome=success": lambda i: f"/records?agent={agent}&outcome=success",
            "/records?bucket=voucher&axis=A": lambda i: "/records?bucket=voucher&axis=A",
            "/records?before=<oldest+100>": lambda i: f"/records?before={lo + 100}",
        }
        print(f"store {site.url}: {total} records; {args.requests} requests per page; server time in ms")
        print(f"leaderboard, first request (builds the aggregates once): {cold:.1f} ms")
        print(f"{'page':34s} {'p50':>8s} {'p95':>8s} {'max':>8s}")
        worst = {}
        for name, path in pages.items():
            n = args.requests if "records/<id>" in name or "leaderboard" in name else max(20, args.requests // 4)
            timed.times.clear()
            for i in range(n):
                r = c.get(path(i))
                assert r.status_code == 200, (name, r.status_code, r.text[:200])
            xs = list(timed.times)
            worst[name] = _pct(xs, 0.95)
            print(f"{name:34s} {statistics.median(xs):8.1f} {_pct(xs, 0.95):8.1f} {max(xs):8.1f}", flush=True)
    site.close()
    ok = worst["/ (leaderboard)"] < 100 and worst["/records/<id> (trajectory)"] < 100
    print("goal (leaderboard and trajectory p95 < 100 ms):", "met" if ok else "NOT met")
    if tmp is not None:
        tmp.cleanup()
    return 0


if __name__ == "__main__":
    run_script(main)
