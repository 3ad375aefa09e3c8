"""A small synchronous client of the arena API (``arena/api.py``) that signs every request with a hotkey
(``auth.sign_headers``: a fresh nonce per request). Validators in other processes — or on other machines — use
only this to claim, evaluate and complete work; miners use it to submit.

    with ArenaClient(url, keypair, clock=SystemClock()) as api:
        work = api.claim()                      # ClaimWork | None
        code = api.agent_code(work.eval_run_id)["code"]
        problems = api.problems(work.eval_run_id)
        api.heartbeat(work.eval_run_id)
        api.complete(work.eval_run_id, summary)  # EvaluationSummary or CompleteRequest
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import httpx

from shoparena.arena.state.types import (
    AgentPublic,
    ClaimWork,
    CompleteRequest,
    CompleteResult,
    LeaderboardRow,
    ProblemProgress,
    RaceDetail,
    RacePublic,
    Standings,
    SubmitResult,
    SuitePublic,
    TopAgent,
    VersionPublic,
)
from shoparena.clock import Clock, SystemClock
from shoparena.errors import BackendError
from shoparena.tasks.types import Problem

__all__ = ["ArenaAPIError", "ArenaClient"]


class ArenaAPIError(BackendError):
    """A non-2xx answer: ``status``, ``error`` (the API's error name) and the decoded ``body``."""

    def __init__(self, status: int, error: str, detail: str, body: Any) -> None:
        super().__init__(f"arena API {status} {error}: {detail}", status=status)
        self.error = error
        self.body = body


class ArenaClient:
    """Signed HTTP calls to one arena. ``transport`` / ``uds`` for tests and Unix sockets."""

    def __init__(self, base_url: str, keypair: Any, *, clock: Clock | None = None, timeout: float = 30.0,
                 uds: str | None = None, transport: httpx.BaseTransport | None = None) -> None:
        self.keypair = keypair
        self.clock = clock or SystemClock()
        if transport is None and uds is not None:
            transport = httpx.HTTPTransport(uds=uds)
        self._http = httpx.Client(base_url=base_url, timeout=timeout, transport=transport)

    @property
    def hotkey(self) -> str:
        return str(self.keypair.ss58_address)

    def close(self) -> None:
        self._http.close()

    def __enter__(self) -> ArenaClient:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def _headers(self) -> dict[str, str]:
        from shoparena.arena.auth import sign_headers

        return sign_headers(self.keypair, clock=self.clock)

    def _call(self, method: str, path: str, *, signed: bool = True, ok: tuple[int, ...] = (),
              **kw: Any) -> httpx.Response:
        headers = self._headers() if signed else {}
        resp = self._http.request(method, path, headers=headers, **kw)
        if resp.status_code >= 400 and resp.status_code not in ok:
            try:
                body = resp.json()
            except ValueError:
                body = resp.text
            error = body.get("error", "HTTPError") if isinstance(body, dict) else "HTTPError"
            detail = body.get("detail", "") if isinstance(body, dict) else str(body)[:200]
            raise ArenaAPIError(resp.status_code, error, detail, body)
        return resp

    # -- miner -------------------------------------------------------------------------------------------------
    def submit(self, agent_name: str, code: str | bytes, *, filename: str = "agent.py") -> SubmitResult:
        """Refusals the arena decides (cooldown, gate, registration) come back as a REJECTED result."""
        data = code.encode("utf-8") if isinstance(code, str) else code
        resp = self._call("POST", "/v1/miner/submit", ok=(403, 422, 429), data={"agent_name": agent_name},
                          files={"file": (filename, data, "text/x-python")})
        body = resp.json()
        if resp.status_code >= 400 and "admission_status" not in body:
            raise ArenaAPIError(resp.status_code, body.get("error", ""), body.get("detail", ""), body)
        return SubmitResult(**{k: v for k, v in body.items() if k in SubmitResult.model_fields})

    def agents(self) -> list[AgentPublic]:
        return [AgentPublic(**a) for a in self._call("GET", "/v1/miner/agents").json()]

    def versions(self, agent_id: str) -> list[VersionPublic]:
        return [VersionPublic(**v) for v in self._call("GET", f"/v1/miner/agents/{agent_id}/versions").json()]

    def pin(self, agent_version_id: str | None) -> None:
        self._call("PUT", "/v1/miner/race-selection", json={"agent_version_id": agent_version_id})

    # -- validator ---------------------------------------------------------------------------------------------
    def claim(self) -> ClaimWork | None:
        resp = self._call("POST", "/v1/validator/work/claim")
        return None if resp.status_code == 204 else ClaimWork(**resp.json())

    def heartbeat(self, eval_run_id: str) -> float:
        return float(self._call("POST", f"/v1/validator/work/{eval_run_id}/heartbeat").json()["lease_expires_at"])

    def agent_code(self, eval_run_id: str) -> dict[str, Any]:
        return self._call("GET", f"/v1/validator/work/{eval_run_id}/agent").json()

    def problems(self, eval_run_id: str) -> list[Problem]:
        body = self._call("GET", f"/v1/validator/evaluation-runs/{eval_run_id}/problems").json()
        return [Problem(**p) for p in body["problems"]]

    def progress(self, eval_run_id: str, updates: Sequence[ProblemProgress]) -> int:
        body = {"updates": [u.model_dump(mode="json") for u in updates]}
        return int(self._call("POST", f"/v1/validator/evaluation-runs/{eval_run_id}/progress", json=body)
                   .json()["problems_reported"])

    def complete(self, eval_run_id: str, result: CompleteRequest | Any) -> CompleteResult:
        req = result if isinstance(result, CompleteRequest) else CompleteRequest.from_summary(result)
        resp = self._call("POST", f"/v1/validator/evaluation-runs/{eval_run_id}/complete",
                          json=req.model_dump(mode="json"))
        return CompleteResult(**resp.json())

    def standings(self) -> Standings | None:
        s = self._call("GET", "/v1/validator/standings").json()["standings"]
        return None if s is None else Standings(**s)

    def record_weights(self, *, uids: Sequence[int], weights: Sequence[int], ok: bool, reason: str = "",
                       block: int | None = None, race_id: str | None = None) -> None:
        self._call("POST", "/v1/validator/weights", json={"uids": list(uids), "weights": list(weights), "ok": ok,
                                                          "reason": reason, "block": block, "race_id": race_id})

    # -- public ------------------------------------------------------------------------------------------------
    def leaderboard(self) -> list[LeaderboardRow]:
        return [LeaderboardRow(**r) for r in self._call("GET", "/v1/public/leaderboard", signed=False).json()]

    def races(self, limit: int = 50) -> list[RacePublic]:
        resp = self._call("GET", "/v1/public/races", signed=False, params={"limit": limit})
        return [RacePublic(**r) for r in resp.json()]

    def race(self, race_id: str) -> RaceDetail:
        return RaceDetail(**self._call("GET", f"/v1/public/races/{race_id}", signed=False).json())

    def top_agent(self) -> TopAgent | None:
        resp = self._call("GET", "/v1/public/top-agent", signed=False)
        return None if resp.status_code == 204 else TopAgent(**resp.json())

    def suites(self) -> list[SuitePublic]:
        return [SuitePublic(**s) for s in self._call("GET", "/v1/public/suites", signed=False).json()]
