"""Sampling throughput of an ``hf:`` model on this machine: tokens/s for one conversation at a time vs batched.

    python bench/hf_sampling.py --model /work/models/smollm2-135m [--batches 1,4,8] [--new 64] [--threads 2]

Renders a shopping prompt with the react agent's four tools (the same chat template the agents use), then for
each batch size runs :meth:`HFBackend.generate_batch` on that many copies at temperature 0.7 with
``max_tokens=--new`` and reports prompt tokens, generated tokens, seconds and generated tokens/s. Run it alone on
the machine (other processes on the cores halve the numbers).
"""

from __future__ import annotations

import argparse
import os
import time

from shoparena.cli.pipes import run_script

os.environ.setdefault("OMP_NUM_THREADS", "2")

TOOLS = [
    {"type": "function", "function": {"name": "find_product", "description": "Search the product catalog.",
                                      "parameters": {"type": "object", "properties": {
                                          "q": {"type": "string"}, "page": {"type": "integer"},
                                          "price": {"type": "string"}}, "required": ["q"]}}},
    {"type": "function", "function": {"name": "view_product_information", "description": "Product details.",
                                      "parameters": {"type": "object", "properties": {
                                          "product_ids": {"type": "string"}}, "required": ["product_ids"]}}},
    {"type": "function", "function": {"name": "recommend_product", "description": "Recommend products.",
                                      "parameters": {"type": "object", "properties": {
                                          "product_ids": {"type": "string"}}, "required": ["product_ids"]}}},
    {"type": "function", "function": {"name": "terminate", "description": "End the session.",
                                      "parameters": {"type": "object", "properties": {
                                          "status": {"type": "string"}}, "required": ["status"]}}},
]
MESSAGES = [{"role": "system", "content": "You are a shopping assistant. Call the tools to find the product."},
            {"role": "user", "content": "I want a red floral summer dress under 700 pesos with free shipping."}]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--batches", default="1,4,8")
    ap.add_argument("--new", type=int, default=64)
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()

    import torch

    from shoparena.llm.hf_backend import HFBackend
    from shoparena.llm.types import Sampling

    torch.set_num_threads(args.threads)
    backend = HFBackend(args.model, device="cpu")
    sampling = Sampling(temperature=0.7, top_p=0.95, seed=0, max_tokens=args.new)
    backend.generate(MESSAGES, TOOLS, Sampling(max_tokens=4))  # warm-up
    print(f"{'batch':>5} {'prompt':>6} {'generated':>9} {'seconds':>8} {'tok/s':>7}")
    for batch in (int(b) for b in args.batches.split(",")):
        start = time.perf_counter()
        rows = backend.generate_batch([MESSAGES] * batch, TOOLS, sampling)
        seconds = time.perf_counter() - start
        generated = sum(n for _, _, n in rows)
        print(f"{batch:>5} {rows[0][1]:>6} {generated:>9} {seconds:>8.1f} {generated / seconds:>7.1f}")


if __name__ == "__main__":
    run_script(main)
