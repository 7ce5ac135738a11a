#!/usr/bin/env python3
"""Prefetch for requests waiting behind others (--kv-offload-prefetch, ADR 0013 amendment): TTFT
of requests that each extend a prefix another instance stored in Redis, served one at a time (#19).

Per round and variant: instance A (an `LLM` with a Redis tier on a flushed database) computes
and stores --prompts prompts of --prefix-len random tokens; instance B, a new `LLM` on the same
database with --max-num-seqs 1, gets all of them at once, each followed by --suffix-len new
tokens, so each request loads its prefix and then computes its suffix. With prefetch the requests
waiting behind load while the one ahead computes; with 0 each starts loading at admission. `off`
is B's workload with no tier (recompute). Variants alternate, the order reversed every other
round; ratios are against `off` of the same round. Needs redis-server.

Usage: PYTHONPATH=build/python python3 bench/offload_prefetch.py KVFORGE [--prefetch 4,0]
       [--dim 512] [--layers 8] [--prompts 4] [--prefix-len 2048] [--suffix-len 512]
       [--chunk 256] [--rounds 3] [--json OUT]
"""
import argparse
import os
import random
import statistics
import sys
import tempfile

import kvforge
from bench_support import RedisServer, make_llama, ttft_cells, write_json


def serve(a, model, prompts, **opts):
    """Mean TTFT (ms) and prompt tokens not computed, `prompts` sent at once to a new LLM (the
    prompts share nothing, so those came from the tier)."""
    params = kvforge.SamplingParams(temperature=0, max_tokens=1, ignore_eos=True)
    with kvforge.LLM(model, max_model_len=a.prefix_len + a.suffix_len + 64, threads=2,
                     **opts) as llm:
        outs = llm.generate(prompts, params)
    return (statistics.mean(o.metrics.ttft_ms for o in outs),
            sum(o.metrics.cached_tokens for o in outs))


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kvforge")
    p.add_argument("--prefetch", default="4,0")
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--prefix-len", type=int, default=2048)
    p.add_argument("--suffix-len", type=int, default=512)
    p.add_argument("--chunk", type=int, default=256)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json")
    a = p.parse_args()
    rng = random.Random(1)  # ids below the embedded tokenizer's 512 (make-model copies it)
    prefixes = [[1] + [rng.randrange(3, 500) for _ in range(a.prefix_len - 1)]
                for _ in range(a.prompts)]
    full = [pr + [rng.randrange(3, 500) for _ in range(a.suffix_len)] for pr in prefixes]
    values = a.prefetch.split(",")
    rows = {}
    with tempfile.TemporaryDirectory(prefix="kvf-prefetch-") as tmp:
        model = os.path.join(tmp, "m.gguf")
        make_llama(a.kvforge, a.dim, a.layers, model, ctx=a.prefix_len + a.suffix_len + 64)
        redis = RedisServer(tmp)
        try:
            tier = dict(kv_offload_redis=redis.url(), kv_offload_chunk_tokens=a.chunk)
            for r in range(a.rounds):
                rows.setdefault("off", []).append(serve(a, model, full, max_num_seqs=1))
                for v in (values if r % 2 == 0 else values[::-1]):
                    redis.cli("FLUSHALL")
                    for pr in prefixes:  # A: one at a time, each stored
                        serve(a, model, [pr], max_num_seqs=1, **tier)
                    rows.setdefault(f"B, prefetch {v}", []).append(
                        serve(a, model, full, max_num_seqs=1, kv_offload_prefetch_requests=int(v),
                              **tier))
        finally:
            redis.stop()
    print(f"{a.prompts} requests of {a.prefix_len} stored + {a.suffix_len} new tokens, sent at once, "
          f"one running at a time; chunk {a.chunk}; model dim {a.dim} x {a.layers} layers, f16 KV\n")
    print("| variant | mean TTFT ms per round | TTFT / off (median) | prompt tokens loaded |")
    print("|---|---|---|---|")
    summary = {}
    total = a.prompts * (a.prefix_len + a.suffix_len)
    for v, rs in rows.items():
        t, ratio, t_cell, ratio_cell = ttft_cells(rs, rows["off"], lambda x: x[0])
        summary[v] = dict(ttft_ms=t, ratio=ratio, loaded=[x[1] for x in rs])
        print(f"| {v} | {t_cell} | {ratio_cell} | {100 * statistics.median(x[1] for x in rs) / total:.1f}% |")
    write_json(a.json, a, rows=rows, summary=summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
