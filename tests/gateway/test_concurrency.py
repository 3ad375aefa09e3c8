"""Many runs at once: each run's log holds exactly its own calls, attributed within the run only."""

from __future__ import annotations

import threading

from shoparena.sdk import Gateway as Client
from tests.gateway import DIRECTIVE, directive, make_gateway, make_service

QUERIES = ["violin", "cotton", "drum", "coffee", "shoes", "cable", "knife", "dress", "earbuds", "rice"]


def test_twenty_concurrent_runs_get_only_their_own_log(tiny_products, tmp_path) -> None:
    gateway = make_gateway(make_service(tiny_products, tmp_path))
    handles = [gateway.open_run(f"conc-{i}", problem_id=f"p{i}", models=[DIRECTIVE]) for i in range(20)]
    barrier = threading.Barrier(20)
    errors: list[BaseException] = []

    def agent(i: int, srv_address: str) -> None:
        try:
            with Client(srv_address, handles[i].token) as c:
                barrier.wait()
                q = QUERIES[i % len(QUERIES)]
                # the LLM of run i asks for the query of run i; every run also searches run (i+1)'s query itself
                c.chat(directive(tool_calls=[{"name": "find_product", "arguments": {"q": q, "page": 1}}]))
                for _ in range(i % 3 + 1):
                    c.find_product(QUERIES[(i + 1) % len(QUERIES)])
                c.find_product(q)
                c.view_product_information(f"{i}")
        except BaseException as exc:  # surfaced by the assertion below
            errors.append(exc)

    with gateway.serve(uds=str(tmp_path / "g.sock") if len(str(tmp_path)) < 90 else None) as srv:
        threads = [threading.Thread(target=agent, args=(i, srv.address)) for i in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(30)
    assert not errors, errors
    for i, handle in enumerate(handles):
        log = gateway.close_run(handle.token)
        n_python = i % 3 + 1
        assert len(log) == 1 + n_python + 2
        assert {r.run_id for r in log} == {f"conc-{i}"} and {r.problem_id for r in log} == {f"p{i}"}
        assert [r.seq for r in log] == list(range(len(log)))
        searches = [r for r in log if r.kind == "search"]
        own = QUERIES[i % len(QUERIES)]
        assert [(r.params["q"], r.axis) for r in searches if "q" in r.params] == \
            [(QUERIES[(i + 1) % len(QUERIES)], "B")] * n_python + [(own, "A")]
        assert searches[-1].params == {"product_ids": f"{i}"} and searches[-1].axis == "B"
    assert gateway.orphan_calls() == []
