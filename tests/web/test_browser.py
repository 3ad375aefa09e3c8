"""The pages in a real Chromium (Debian's ``chromium`` driven by Playwright, no browser download): click through
leaderboard → agent → records → record, cited spans highlighted at the right text, an XSS payload in a
trajectory inert, one screenshot per page into the test artifacts."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
try:
    from playwright.sync_api import sync_playwright
except ImportError:  # pragma: no cover - depends on the environment
    sync_playwright = None  # type: ignore[assignment]

pytestmark = [
    pytest.mark.skipif(sync_playwright is None, reason="playwright is not installed (pip install -e '.[dev]')"),
    pytest.mark.skipif(CHROMIUM is None, reason="no chromium executable (scripts/sysdeps.sh installs Debian's)"),
]


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with sync_playwright() as p:  # type: ignore[misc]
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"], headless=True)
        yield b
        b.close()


@pytest.fixture()
def page(browser: Any) -> Iterator[Any]:
    context = browser.new_context(viewport={"width": 1400, "height": 1000})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.errors = errors
    yield pg
    context.close()


def _shot(page: Any, artifacts: Path, name: str) -> Path:
    path = artifacts / f"{name}.png"
    page.screenshot(path=str(path), full_page=True)
    assert path.stat().st_size > 1000
    return path


def test_click_through_leaderboard_agent_record(page: Any, server: str, artifacts: Path) -> None:
    page.goto(server + "/")
    assert page.locator("h1").inner_text() == "Leaderboard"
    first = page.locator("#leaderboard tbody tr").first
    assert "★" in first.inner_text()
    _shot(page, artifacts, "leaderboard")
    name = first.locator("a.agent-link").inner_text()
    first.locator("a.agent-link").click()
    page.wait_for_url("**/agents/**")
    assert page.locator("#agent-name").inner_text() == name
    _shot(page, artifacts, "agent")
    page.locator("#agent-records").click()
    page.wait_for_url("**/records?**")
    rows = page.locator("#records tbody tr")
    assert rows.count() > 0
    _shot(page, artifacts, "records")
    rows.first.locator("a.record-link").click()
    page.wait_for_url("**/records/**")
    assert page.locator("#conversation .step").count() > 0 and page.locator("#axes").is_visible()
    _shot(page, artifacts, "record")
    page.locator("#link-problem").click()
    page.wait_for_url("**/records?problem=**")
    assert page.locator("#records tbody tr").count() >= 1
    assert not page.errors


def test_sorting_a_column_in_the_browser(page: Any, server: str) -> None:
    page.goto(server + "/")
    head = page.locator("#leaderboard thead th", has_text="records")
    head.click()
    values = [int(v) for v in page.locator("#leaderboard tbody tr td:nth-child(8)").all_inner_texts()]
    assert values == sorted(values)
    head.click()
    values = [int(v) for v in page.locator("#leaderboard tbody tr td:nth-child(8)").all_inner_texts()]
    assert values == sorted(values, reverse=True)


def test_cited_spans_are_highlighted_at_the_right_text(page: Any, server: str, http: httpx.Client) -> None:
    view = None
    before = None
    while view is None:
        body = http.get("/api/records", params={"limit": 100, "min_judge": 0.0,
                                                **({"before": before} if before else {})}).json()
        for item in body["items"]:
            v = http.get(f"/api/records/{item['record_id']}").json()
            if sum(1 for s in v["judge"]["spans"] if s["verbatim"] and s["anchor"]) >= 2:
                view = v
                break
        before = body["next_before"]
        assert view is not None or before is not None, "no record with two located spans"
    page.goto(f"{server}/records/{view['record']['record_id']}")
    for s in view["judge"]["spans"]:
        if not (s["verbatim"] and s["anchor"]):
            continue
        marks = page.locator(f'.inplace mark[data-spans~="{s["id"]}"]')
        assert "".join(marks.all_text_contents()) == s["text"]
        color = marks.first.evaluate("m => getComputedStyle(m).backgroundColor")
        assert color not in ("rgba(0, 0, 0, 0)", "transparent")
        assert page.locator(f"#{s['anchor']}").count() == 1
    page.locator("#judge ol.spans li a").first.click()  # the span list jumps to the highlight
    assert page.evaluate("location.hash").startswith("#cite-")


def test_xss_payload_in_a_trajectory_stays_inert(page: Any, server: str, world: dict[str, Any],
                                                 artifacts: Path) -> None:
    dialogs: list[str] = []
    page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
    page.goto(f"{server}/records/{world['xss_record']}")
    page.wait_for_load_state("load")
    assert page.evaluate("typeof window.__xss") == "undefined" and not dialogs
    text = page.locator("#step-1 .think").inner_text()
    assert "<script>window.__xss=1</script>" in text and 'onerror="window.__xss=2"' in text
    mark = page.locator('#step-1 .think mark[data-spans~="0"]')
    assert mark.inner_text().startswith("<script>window.__xss=1</script>")
    assert page.locator("main script").count() == 0 and page.locator("main img").count() == 0
    _shot(page, artifacts, "record-xss")


@pytest.mark.parametrize("path", ["/races", "/submissions", "/corpus", "/records/nope"])
def test_every_page_renders_and_is_captured(page: Any, server: str, http: httpx.Client, artifacts: Path,
                                            path: str) -> None:
    response = page.goto(server + path)
    assert response.status == (404 if path.endswith("nope") else 200)
    assert page.locator("h1").count() == 1 and not page.errors
    _shot(page, artifacts, path.strip("/").replace("/", "-"))
    if path == "/races":
        race = http.get("/api/races").json()["items"][-1]["race_id"]
        page.locator(f'a[href="/races/{race}"]').click()
        page.wait_for_url(f"**/races/{race}")
        assert page.locator("svg polyline").count() >= 1
        _shot(page, artifacts, "race")
