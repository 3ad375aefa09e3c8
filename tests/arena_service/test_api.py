"""The arena API over real loopback HTTP with real sr25519 signatures (LocalChain metagraph, RequestVerifier)."""

from __future__ import annotations

import multiprocessing as mp
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from shoparena._http import BackgroundServer
from shoparena.arena.api import create_app
from shoparena.arena.auth import RequestVerifier, sign_headers
from shoparena.arena.chain import LocalChain
from shoparena.arena.client import ArenaAPIError, ArenaClient
from shoparena.arena.identity import Identity, new_identity
from shoparena.arena.service import Arena
from shoparena.arena.state.types import ProblemProgress
from shoparena.clock import Clock, ManualClock, SystemClock
from tests.arena_service import GOOD, T0, config, make_arena, ok

NAMES = ("owner", "miner-1", "miner-2", "val-1", "val-2")
IDS = {n: new_identity(n, seed=5) for n in (*NAMES, "stranger")}


def _chain() -> LocalChain:
    chain = LocalChain(seed=5)
    for n in NAMES:
        chain.register(IDS[n].hotkey_ss58, IDS[n].coldkey_ss58)
    for n in ("val-1", "val-2"):
        chain.add_stake(IDS[n].hotkey_ss58, 10_000.0)
    return chain


@dataclass
class Service:
    arena: Arena
    clock: ManualClock
    url: str

    def client(self, name: str, clock: Clock | None = None) -> ArenaClient:
        return ArenaClient(self.url, IDS[name].hotkey, clock=clock or self.clock)


@pytest.fixture
def service(tmp_path: Path) -> Iterator[Service]:
    clock = ManualClock(T0)
    chain = _chain()
    arena = make_arena(f"sqlite:///{tmp_path / 'arena.db'}", clock=clock, chain=chain,
                       cfg=config(qualifying_close_utc_s=18 * 3600.0))
    with BackgroundServer(create_app(arena, RequestVerifier(chain.metagraph, clock=clock))) as srv:
        yield Service(arena, clock, srv.url)
    arena.close()


def _raw_submit(svc: Service, who: Identity, code: bytes, name: str = "agent") -> httpx.Response:
    return httpx.post(f"{svc.url}/v1/miner/submit", headers=sign_headers(who.hotkey, clock=svc.clock),
                      data={"agent_name": name}, files={"file": ("agent.py", code, "text/x-python")})


def test_submit_then_cooldown_then_violations(service: Service) -> None:
    service.arena.tick()
    m1 = service.client("miner-1")
    first = m1.submit("alpha", GOOD)
    assert first.admission_status == "ACCEPTED" and first.hotkey == IDS["miner-1"].hotkey_ss58
    resp = _raw_submit(service, IDS["miner-1"], GOOD.encode() + b"# 2\n")
    body = resp.json()
    assert resp.status_code == 429 and body["error"] == "CooldownActive"
    assert body["remaining_seconds"] == 12 * 3600 and resp.headers["Retry-After"] == str(12 * 3600)
    again = m1.submit("alpha", GOOD + "# 3\n")
    assert (again.admission_status, again.admission_reason) == ("REJECTED", "COOLDOWN")

    resp = _raw_submit(service, IDS["miner-2"], b"import os\nx = eval('1')\nPRODUCT_ID = 1\n")
    body = resp.json()
    assert resp.status_code == 422 and body["error"] == "CodeAnalysisError"
    assert body["violations"] == [
        {"rule": "banned_call", "severity": "security", "message": "banned_call on line 2", "line": 2},
        {"rule": "product_id", "severity": "integrity", "message": "product_id on line 3", "line": 3}]
    assert body["remaining_seconds"] == 12 * 3600  # integrity: the full cooldown

    agents = m1.agents()
    assert [a.agent_name for a in agents] == ["alpha"] and agents[0].latest is not None
    assert agents[0].latest.state == "QUEUED"
    assert [v.version_number for v in m1.versions(agents[0].agent_id)] == [1]
    with pytest.raises(ArenaAPIError) as err:  # another miner's agent is not found
        service.client("miner-2").versions(agents[0].agent_id)
    assert err.value.status == 404


def test_upload_limits_and_names(service: Service) -> None:
    big = b"#" * (1_000_001)
    resp = _raw_submit(service, IDS["miner-1"], big)
    assert resp.status_code == 413 and resp.json()["error"] == "FileTooLarge"
    resp = _raw_submit(service, IDS["miner-1"], GOOD.encode(), name="../etc")
    assert resp.status_code == 422 and resp.json()["error"] == "InvalidAgentName"
    assert service.client("miner-1").submit("ok", GOOD).admission_status == "ACCEPTED"  # neither cost a cooldown


def test_auth_is_required_and_checked(service: Service) -> None:
    url = service.url
    assert httpx.post(f"{url}/v1/validator/work/claim").status_code == 401
    assert httpx.get(f"{url}/v1/miner/agents").status_code == 401
    h = sign_headers(IDS["val-1"].hotkey, clock=service.clock)
    assert httpx.post(f"{url}/v1/validator/work/claim", headers=h).status_code == 204
    replay = httpx.post(f"{url}/v1/validator/work/claim", headers=h)
    assert replay.status_code == 401 and "replayed" in replay.json()["detail"]
    tampered = {**sign_headers(IDS["val-1"].hotkey, clock=service.clock), "X-Hotkey": IDS["val-2"].hotkey_ss58}
    assert httpx.post(f"{url}/v1/validator/work/claim", headers=tampered).status_code == 401
    miner = httpx.post(f"{url}/v1/validator/work/claim", headers=sign_headers(IDS["miner-1"].hotkey,
                                                                              clock=service.clock))
    assert miner.status_code == 403 and miner.json()["error"] == "Forbidden"
    stranger = _raw_submit(service, IDS["stranger"], GOOD.encode())
    assert stranger.status_code == 403
    old = sign_headers(IDS["val-1"].hotkey, clock=ManualClock(T0 - 120))
    assert httpx.post(f"{url}/v1/validator/work/claim", headers=old).status_code == 401
    for path in ("/v1/public/leaderboard", "/v1/public/races", "/v1/public/suites"):
        assert httpx.get(url + path).status_code == 200  # public routes need no signature
    assert httpx.get(f"{url}/v1/public/top-agent").status_code == 204


def test_validators_lease_work_over_http(service: Service) -> None:
    service.arena.tick()
    service.client("miner-1").submit("alpha", GOOD + "# m1\n")
    service.client("miner-2").submit("beta", GOOD + "# m2\n")
    v1, v2 = service.client("val-1"), service.client("val-2")
    a, b = v1.claim(), v2.claim()
    assert a is not None and b is not None and a.work_item_id != b.work_item_id
    assert v1.agent_code(a.eval_run_id)["code"].startswith(GOOD)
    with pytest.raises(ArenaAPIError) as err:
        v2.agent_code(a.eval_run_id)  # only the lease holder gets the code
    assert err.value.status == 403
    probs = v1.problems(a.eval_run_id)
    assert [p.problem_id for p in probs] == a.problem_ids
    assert v1.progress(a.eval_run_id, [ProblemProgress(problem_id=a.problem_ids[0], status="SUCCESS")]) == 1
    service.clock.advance(30)
    assert v1.heartbeat(a.eval_run_id) == service.clock.now() + 60
    service.clock.advance(31)  # val-2 missed its lease (expired at +60); val-1's runs to +90
    with pytest.raises(ArenaAPIError) as err:
        v2.heartbeat(b.eval_run_id)
    assert (err.value.status, err.value.error) == (409, "LeaseExpired")
    b2 = v1.claim()  # the requeued item goes to the next validator that asks
    assert b2 is not None and b2.work_item_id == b.work_item_id
    r = v1.complete(a.eval_run_id, ok(0.5))
    assert not r.work_item.is_closed and r.work_item.included_success_count == 1
    v1.complete(b2.eval_run_id, ok(0.6))
    a3, b3 = v2.claim(), v2.claim()  # val-2 may take b again: its expired run does not count
    assert a3 is not None and b3 is not None and {a3.work_item_id, b3.work_item_id} == {a.work_item_id,
                                                                                      b.work_item_id}
    results = {w.work_item_id: v2.complete(w.eval_run_id, ok(0.8)) for w in (a3, b3)}
    assert all(x.work_item.is_closed and x.agent_version_became_eligible for x in results.values())
    assert results[a.work_item_id].final_score == pytest.approx(0.65)
    assert results[b.work_item_id].final_score == pytest.approx(0.7)
    board = service.client("val-1").leaderboard()
    assert sorted(r.qualifying_score for r in board) == [pytest.approx(0.65), pytest.approx(0.7)]


def test_race_views_over_http(service: Service) -> None:
    arena, clock = service.arena, service.clock
    arena.tick()
    service.client("miner-1").submit("alpha", GOOD + "# m1\n")
    v1, v2 = service.client("val-1"), service.client("val-2")
    for v in (v1, v2):
        w = v.claim()
        assert w is not None
        v.complete(w.eval_run_id, ok(0.5))
    public = service.client("owner")
    seed = httpx.get(f"{service.url}/v1/public/races/race-000001/seed-commitment").json()
    assert seed["revealed"] is False and seed["secret"] is None and len(seed["commitment"]) == 64
    clock.set(T0 + 18 * 3600)
    arena.tick()
    w = v1.claim()
    assert w is not None and w.kind == "RACE"
    v1.complete(w.eval_run_id, ok(0.9, 6))
    w = v2.claim()
    assert w is not None
    res = v2.complete(w.eval_run_id, ok(0.7, 6))
    assert res.work_item.is_closed and res.final_score is None
    detail = public.race("race-000001")
    assert detail.race.status == "RACE_RUNNING" and detail.qualifiers[0].race_score is None
    assert v1.standings() is None
    clock.advance(60)
    arena.tick()
    detail = public.race("race-000001")
    assert detail.race.status == "RACE_COMPLETE" and detail.qualifiers[0].race_score == pytest.approx(0.8)
    assert detail.seed.revealed and detail.seed.secret
    top = public.top_agent()
    assert top is not None and top.release_state == "HIDDEN" and top.code is None
    standings = v2.standings()
    assert standings is not None and standings.top_hotkey == IDS["miner-1"].hotkey_ss58
    v2.record_weights(uids=[0, 1], weights=[65535, 21845], ok=True, block=12, race_id="race-000001")
    assert [r.race_id for r in public.races()] == ["race-000002", "race-000001"]
    assert {s.kind for s in public.suites()} == {"QUALIFYING", "RACE"}


def _validator_process(url: str, name: str, queue: object) -> None:
    """A validator in its own process: claim → fetch code and problems → complete, until there is no work."""
    from shoparena.arena.client import ArenaClient as Client
    from shoparena.arena.identity import new_identity as ident
    from tests.arena_service import ok as result

    done = 0
    with Client(url, ident(name, seed=5).hotkey) as api:
        while (w := api.claim()) is not None:
            api.agent_code(w.eval_run_id)
            problems = api.problems(w.eval_run_id)
            api.heartbeat(w.eval_run_id)
            api.complete(w.eval_run_id, result(0.5, len(problems)))
            done += 1
    queue.put((name, done))  # type: ignore[attr-defined]


def test_two_validator_processes_share_the_queue(tmp_path: Path) -> None:
    arena = make_arena(f"sqlite:///{tmp_path / 'arena.db'}", clock=ManualClock(T0), chain=_chain())
    arena.tick()
    for i, n in enumerate(("miner-1", "miner-2")):
        assert arena.submit(IDS[n].hotkey_ss58, "agent", GOOD + f"# {i}\n").admission_status == "ACCEPTED"
    app = create_app(arena, RequestVerifier(arena.chain.metagraph, clock=SystemClock()))  # real-time auth
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    with BackgroundServer(app) as srv:
        procs = [ctx.Process(target=_validator_process, args=(srv.url, n, queue)) for n in ("val-1", "val-2")]
        for p in procs:
            p.start()
        got = dict(queue.get(timeout=60) for _ in procs)
        for p in procs:
            p.join(timeout=60)
            assert p.exitcode == 0
    assert got == {"val-1": 2, "val-2": 2}  # X = 2 distinct validators per item, 2 items
    assert all(r.state == "ELIGIBLE" for r in arena.leaderboard()) and len(arena.leaderboard()) == 2
    arena.close()
