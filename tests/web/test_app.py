"""The pages and ``/api`` over a real simulated arena day, through uvicorn on loopback: data and schemas,
pagination bounds, filters, 404 / 422 answers, escaping, the code embargo, a bare store, the corpus funnel and
reports, and the arena service with the pages mounted."""

from __future__ import annotations

import html
import re
import subprocess
import sys
import time
from itertools import pairwise
from typing import Any

import httpx
import pytest

from shoparena._http import BackgroundServer
from shoparena.clock import ManualClock
from shoparena.scoring.metrics import binary_bootstrap_ci
from shoparena.store import open_store
from shoparena.web import Site, create_app
from shoparena.web.board import asr_interval
from shoparena.web.records import MAX_LIMIT
from tests.web.conftest import END_OF_DAY, XSS


def _all_records(http: httpx.Client, **params: Any) -> list[dict[str, Any]]:
    out, before = [], None
    while True:
        page = http.get("/api/records", params={**params, "limit": 7, **({"before": before} if before else {})})
        assert page.status_code == 200, page.text
        body = page.json()
        assert set(body) == {"items", "limit", "next_before", "filter"} | ({"next_query"} if body["next_before"]
                                                                            else set())
        assert len(body["items"]) <= 7
        out += body["items"]
        before = body["next_before"]
        if before is None:
            return out


def test_leaderboard_has_the_arena_order_scores_and_intervals(http: httpx.Client, world: dict[str, Any]) -> None:
    body = http.get("/api/leaderboard").json()
    assert set(body) == {"rows", "buckets", "top_agent", "has_arena", "sort"} and body["has_arena"]
    rows = body["rows"]
    winner = next(w for w in world["result"].winners)
    assert rows[0]["is_top_agent"] and rows[0]["agent_version_id"] == winner["agent_version_id"]
    assert body["top_agent"]["agent_id"] == rows[0]["agent_id"] and rows[0]["races_won"] == 1
    accepted = [v for v in world["result"].versions]
    assert {r["agent_version_id"] for r in rows} == {v["agent_version_id"] for v in accepted}
    with open_store(world["url"]) as store:
        for r in rows:
            stored = list(store.rows(agent_id=r["agent_id"], agent_version=r["agent_version"]))
            assert r["records"] == len(stored)
            if stored:
                k = sum(s.success for s in stored)
                assert r["asr"] == round(k / len(stored), 4)
                lo, hi = r["asr_ci"]
                assert lo <= r["asr"] <= hi and (lo, hi) == asr_interval(k, len(stored))
                for bucket, b in r["buckets"].items():
                    assert b["records"] == sum(s.bucket == bucket for s in stored)
    for a, b in pairwise(rows):  # "separable" means the two intervals do not overlap
        if a["asr_ci"] and b["asr_ci"]:
            assert a["separable_from_next"] == (a["asr_ci"][0] > b["asr_ci"][1] or b["asr_ci"][0] > a["asr_ci"][1])
    by_asr = http.get("/api/leaderboard", params={"sort": "asr"}).json()["rows"]
    asrs = [r["asr"] for r in by_asr if r["asr"] is not None]
    assert asrs == sorted(asrs, reverse=True)
    assert http.get("/api/leaderboard", params={"sort": "evil"}).status_code == 422


def test_bootstrap_interval_of_a_rate() -> None:
    assert binary_bootstrap_ci(0, 0) is None
    assert binary_bootstrap_ci(10, 10) == (1.0, 1.0)
    lo, hi = binary_bootstrap_ci(50, 100)
    assert 0.38 < lo < 0.45 and 0.55 < hi < 0.62 and binary_bootstrap_ci(50, 100) == (lo, hi)
    assert asr_interval(50, 100) == (round(lo, 4), round(hi, 4))


def test_leaderboard_page_lists_every_agent_with_links(http: httpx.Client) -> None:
    rows = http.get("/api/leaderboard").json()["rows"]
    page = http.get("/")
    assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
    assert "default-src 'none'" in page.headers["content-security-policy"]
    for r in rows:
        assert f'href="/agents/{r["agent_id"]}"' in page.text
    assert "★" in page.text and "95 % CI" in page.text


def test_records_page_through_every_record_once(http: httpx.Client, world: dict[str, Any]) -> None:
    items = _all_records(http)
    assert len(items) == world["records"] == len({i["record_id"] for i in items})
    seqs = [i["seq"] for i in items]
    assert seqs == sorted(seqs, reverse=True)


@pytest.mark.parametrize("query", [{"limit": MAX_LIMIT + 1}, {"limit": 0}, {"limit": "x"}, {"before": "-3"},
                                   {"outcome": "maybe"}, {"axis": "C"}, {"min_judge": "nan"}, {"min_judge": "2"},
                                   {"agent": "a" * 201}, {"nonsense": "1"}])
def test_bad_record_queries_are_422_never_500(http: httpx.Client, query: dict[str, Any]) -> None:
    api = http.get("/api/records", params=query)
    assert api.status_code == 422 and api.json()["error"] == "Invalid" and "Traceback" not in api.text
    page = http.get("/records", params=query)
    assert page.status_code == 422 and "invalid query" in page.text


def test_record_filters_match_what_they_say(http: httpx.Client, world: dict[str, Any]) -> None:
    ok = _all_records(http, outcome="success")
    bad = _all_records(http, outcome="failure")
    assert ok and all(i["success"] for i in ok) and all(not i["success"] for i in bad)
    assert len(ok) + len(bad) == world["records"]
    for axis in ("A", "B"):
        got = _all_records(http, axis=axis)
        assert got and {i["axis"] for i in got} == {axis}
    shop = _all_records(http, bucket="shop", min_judge=0.5)
    assert shop and all(i["bucket"] == "shop" and i["judge_score"] >= 0.5 for i in shop)
    one = ok[0]
    mine = _all_records(http, agent=one["agent_id"], problem=one["problem_id"])
    assert mine and all(i["agent_id"] == one["agent_id"] and i["problem_id"] == one["problem_id"] for i in mine)


def _judged_record(http: httpx.Client) -> dict[str, Any]:
    for item in _all_records(http, min_judge=0.0):
        view = http.get(f"/api/records/{item['record_id']}").json()
        if view["judge"] and any(s["verbatim"] and s["anchor"] for s in view["judge"]["spans"]) \
                and view["check"]["items"] and item["record_id"]:
            return view
    raise AssertionError("no judged record with a located span")


def _shown_text(view: dict[str, Any], span_id: int) -> str:
    """The text of the displayed (in-place) segments covering a span, in page order."""
    secs = []
    for st in view["steps"]:
        secs.append(st["think"])
        for tc in st["tool_calls"]:
            secs += [tc["rendered"], tc["result_rendered"]]
        secs.append(st["response"])
    secs += [view["gateway"]["summary"], *view["gateway"]["warnings"],
             *(c["rendered"] for c in view["gateway"]["calls"])]
    return "".join(seg["text"] for sec in secs if sec for seg in sec["segments"] if span_id in seg["spans"])


def test_trajectory_view_locates_cited_spans_and_checks_each_axis(http: httpx.Client, world: dict[str, Any]) -> None:
    view = _judged_record(http)
    assert set(view) == {"record", "query", "steps", "check", "judge", "gateway", "judge_view"}
    for s in view["judge"]["spans"]:
        if s["verbatim"]:
            assert _shown_text(view, s["id"]) == s["text"]  # highlighted in place, exactly the quoted text
            assert "".join(g["text"] for g in view["judge_view"] if s["id"] in g["spans"]) == s["text"]
    with open_store(world["url"]) as store:
        rec = store.get(view["record"]["record_id"])
    assert len(view["steps"]) == len(rec.steps) and view["query"]
    for item, scored in zip(view["check"]["items"], rec.outcome["items"], strict=True):
        assert item["gt_product_id"] == scored["gt_product_id"]
        assert set(item["axes"]) == {"title", "price", "service", "sku & attrs"}
    searches = [c for c in rec.call_log if c["kind"] == "search"]
    totals = view["gateway"]["totals"]
    assert totals["search"] == len(searches) and totals["calls"] == len(rec.call_log)
    assert totals["axis_A"] + totals["axis_B"] == sum(c["axis"] in ("A", "B") for c in searches)
    page = http.get(f"/records/{view['record']['record_id']}")
    assert page.status_code == 200 and 'class="cite' in page.text and 'id="cite-' in page.text
    assert f'href="/records?problem={view["record"]["problem_id"].replace(":", "%3A")}"' in page.text
    tables = [tc["observation"] for st in view["steps"] for tc in st["tool_calls"] if tc["observation"]]
    assert any(t["kind"] == "table" and "product_id" in t["columns"] for t in tables)


def test_stored_records_re_render_the_trace_their_judge_saw(http: httpx.Client, world: dict[str, Any]) -> None:
    """The store keeps JSON with sorted keys; the judge's renderer sorts keys too, so a stored record re-renders
    the exact trace its verdict cites (hash equal, every span verbatim)."""
    with open_store(world["url"]) as store:
        judged = [r for r in store.query(limit=60) if r.judge and r.judge.get("ok") and r.steps]
    assert judged
    for rec in judged[:12]:
        view = http.get(f"/api/records/{rec.record_id}").json()
        assert view["judge"]["trace_matches"], rec.record_id
        assert all(s["verbatim"] for s in view["judge"]["spans"])


def test_xss_in_reasoning_and_in_a_cited_span_is_escaped(http: httpx.Client, world: dict[str, Any]) -> None:
    rid = world["xss_record"]
    view = http.get(f"/api/records/{rid}").json()
    payload_span = view["judge"]["spans"][0]
    assert payload_span["verbatim"] and payload_span["text"].startswith("<script>")
    assert _shown_text(view, 0) == payload_span["text"]
    page = http.get(f"/records/{rid}").text
    assert "<script>window.__xss" not in page and "<img src=x" not in page and "onerror=\"window" not in page
    assert html.escape("<script>window.__xss=1</script>", quote=True) in page
    marks = re.findall(r'<mark class="cite[^"]*" data-spans="0"[^>]*>(.*?)</mark>', page, flags=re.S)
    assert marks and html.unescape("".join(marks[:1])).startswith("<script>window.__xss=1</script>")
    assert len(re.findall(r"<script\b", page)) == 1  # only the local app.js
    shown = html.unescape(re.sub(r"<[^>]+>", "", page))  # the page's text: the payload is there, as text
    assert XSS.split(" & ")[0] in shown


@pytest.mark.parametrize("path", ["/records/{x}", "/agents/{x}", "/races/{x}"])
def test_unknown_ids_are_404(http: httpx.Client, path: str) -> None:
    for x in ("nope", "0" * 64, "a" * 500, "%3Cscript%3E"):
        page = http.get(path.format(x=x))
        assert page.status_code == 404 and "<script>" not in page.text
        api = http.get("/api" + path.format(x=x))
        assert api.status_code == 404 and api.json()["error"] == "NotFound"
    assert http.get("/no/such/page").status_code == 404
    assert http.get("/reports/7").status_code == 404


def test_race_page_has_the_lifecycle_and_the_weights(http: httpx.Client, world: dict[str, Any]) -> None:
    races = http.get("/api/races").json()
    done = next(r for r in races["items"] if r["status"] == "RACE_COMPLETE")
    race = http.get(f"/api/races/{done['race_id']}").json()
    assert race["race"]["winner_agent_version_id"] == world["result"].winners[0]["agent_version_id"]
    assert race["held_out_draw"]["problems"] == 4 and race["held_out_draw"]["source"] == "held_out"
    assert race["agreement"] and all(a["validators"] >= 1 for a in race["agreement"])
    assert race["weights"]["submissions"] and race["weights"]["series"]
    page = http.get(f"/races/{done['race_id']}")
    assert page.status_code == 200 and "<polyline" in page.text and "Held-out draw" in page.text
    assert "<polyline" in http.get("/races").text
    assert http.get("/api/races", params={"limit": 1000}).status_code == 422
    # emissions over time: the chain's epochs as the arena recorded them add up to what the simulation paid out
    em = races["emissions"]
    paid = world["result"].emissions
    assert em["epochs"] > 0 and em["owner"] == pytest.approx(paid["owner"], abs=1e-3)
    assert sum(em["by_participant"].values()) == pytest.approx(sum(paid["by_participant"].values()), abs=1e-3)
    assert all(pts == sorted(pts) for pts in em["series"].values())  # cumulative: never falls
    assert "Emissions over time" in http.get("/races").text


def test_agent_page_shows_gate_verdicts_and_evaluations(http: httpx.Client, world: dict[str, Any]) -> None:
    rows = http.get("/api/leaderboard").json()["rows"]
    agent = http.get(f"/api/agents/{rows[0]['agent_id']}").json()
    assert agent["versions"] and agent["submissions"] and agent["evaluations"]
    assert all(s["admission_status"] == "ACCEPTED" for s in agent["submissions"])
    subs = http.get("/api/submissions", params={"status": "REJECTED"}).json()["items"]
    cheat = [s for s in subs if s["admission_reason"] == "INVALID_FILE"]
    assert cheat and {"rule", "severity", "line", "message"} <= set(cheat[0]["violations"][0])
    assert "answer_table" in http.get("/submissions", params={"status": "REJECTED"}).text
    assert http.get("/api/submissions", params={"status": "MAYBE"}).status_code == 422


def test_code_is_shown_once_its_embargo_has_passed_never_before(world: dict[str, Any]) -> None:
    winner = world["result"].winners[0]["agent_version_id"]
    for now, released in ((END_OF_DAY - 86_000.0, False), (END_OF_DAY, True)):
        site = Site(world["url"], clock=ManualClock(now))
        with BackgroundServer(create_app(site)) as srv, httpx.Client(base_url=srv.url) as c:
            agent_id = next(r["agent_id"] for r in c.get("/api/leaderboard").json()["rows"]
                            if r["agent_version_id"] == winner)
            v = next(v for v in c.get(f"/api/agents/{agent_id}").json()["versions"]
                     if v["agent_version_id"] == winner)
            page = c.get(f"/agents/{agent_id}").text
        site.close()
        assert (v["code"] is not None) is released and v["code_state"] == ("RELEASED" if released else "EMBARGOED")
        assert ("def agent_main" in html.unescape(page)) is released


def test_a_bare_store_gets_a_leaderboard_from_its_records(world: dict[str, Any], tmp_path: Any) -> None:
    url = f"sqlite:///{tmp_path / 'bare.db'}"
    with open_store(world["url"]) as src, open_store(url) as dst:
        dst.append_many(src.query(limit=30))
    site = Site(url)
    with BackgroundServer(create_app(site)) as srv, httpx.Client(base_url=srv.url) as c:
        body = c.get("/api/leaderboard").json()
        assert not body["has_arena"] and body["rows"] and body["rows"][0]["is_top_agent"]
        assert sum(r["records"] for r in body["rows"]) == 30
        assert c.get("/api/races").status_code == 404 and c.get("/races").status_code == 404
        assert "Races" not in c.get("/").text.split("<main>")[0]
    site.close()


def test_corpus_funnel_and_embedded_report(world: dict[str, Any], tmp_path: Any) -> None:
    from shoparena.corpus import write_manifest
    from shoparena.corpus.types import StageReport

    corpus = tmp_path / "corpus"
    corpus.mkdir()
    stage = StageReport(stage="structural", seen=10, kept=7)
    for reason in ("no_tool_call", "no_tool_call", "<b>bad</b>"):
        stage.reject(reason, "r1")
    stage.seen = 10
    write_manifest(corpus, reports=[stage.to_dict()])
    reports = tmp_path / "eval" / "run1"
    reports.mkdir(parents=True)
    (reports / "report.html").write_text("<html><body><h1>Evaluation</h1><script>parent.x=1</script></body></html>")
    site = Site(world["url"], corpus=corpus, reports=tmp_path / "eval")
    with BackgroundServer(create_app(site)) as srv, httpx.Client(base_url=srv.url) as c:
        body = c.get("/api/corpus").json()
        funnel = body["corpus"]["funnel"]
        assert funnel == [{"stage": "structural", "seen": 10, "kept": 7, "rejected_total": 3,
                           "rejected": {"no_tool_call": 2, "<b>bad</b>": 1}}]
        assert body["reports"][0]["name"] == "run1"
        page = c.get("/corpus").text
        assert "&lt;b&gt;bad&lt;/b&gt;" in page and '<iframe class="report" src="/reports/0" sandbox' in page
        # the funnel chart is the evaluation report's own (one SVG drawing), its labels escaped
        from shoparena.evaluate.report.sections import funnel_chart

        chart = funnel_chart([{"stage": "structural", "kept": 7, "rejected": {"no_tool_call": 2, "<b>bad</b>": 1}}])
        assert chart in page and "<b>bad</b>" not in chart and "rejected: &lt;b&gt;bad&lt;/b&gt;" in chart
        assert "chart" not in body
        report = c.get("/reports/0")
        assert report.status_code == 200 and report.headers["content-security-policy"].startswith("sandbox")
        assert c.get("/reports/1").status_code == 404 and c.get("/reports/x").status_code == 422
    site.close()


def test_the_arena_service_serves_the_pages_beside_its_api(world: dict[str, Any]) -> None:
    from shoparena.arena.service import Arena
    from shoparena.web import arena_app

    class NoOne:
        def verify(self, headers: Any, *, require: Any = None) -> Any:
            raise PermissionError("nobody signs in here")

    with Arena(world["url"], clock=ManualClock(END_OF_DAY), migrate=False) as arena, \
            BackgroundServer(arena_app(arena, NoOne())) as srv, httpx.Client(base_url=srv.url) as c:
        public = c.get("/v1/public/leaderboard").json()
        board = c.get("/api/leaderboard").json()
        assert public[0]["agent_version_id"] == board["rows"][0]["agent_version_id"]
        assert c.get("/").status_code == 200 and c.get("/api/records", params={"limit": 1}).status_code == 200
        assert c.get("/api/records/nope").status_code == 404


def test_shoparena_web_serves_a_store(world: dict[str, Any]) -> None:
    proc = subprocess.Popen([sys.executable, "-m", "shoparena", "web", "--store", world["url"], "--port", "0"],
                            stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stderr.readline()  # type: ignore[union-attr]
        url = re.search(r"http://127\.0\.0\.1:\d+/", line)
        assert url, line
        with httpx.Client(base_url=url.group(0), timeout=30) as c:
            for _ in range(100):
                try:
                    r = c.get("/api/leaderboard")
                    break
                except httpx.TransportError:
                    time.sleep(0.05)
            assert r.status_code == 200 and r.json()["rows"]
    finally:
        proc.terminate()
        proc.wait(timeout=10)
    bad = subprocess.run([sys.executable, "-m", "shoparena", "web", "--store", "sqlite:////nonexistent/x.db"],
                         capture_output=True, text=True)
    assert bad.returncode != 0 and "error:" in bad.stderr and "Traceback" not in bad.stderr
