#!/usr/bin/env python3
"""What storing costs the instance that computes (#19): mean TTFT of --prompts distinct prompts
(--input-len tokens, `bench throughput --workload fixed`, one at a time, 1 output token) with no
tier, then with each tier under write-through and write-back, alternating in every round, each
against `off` from the same round. The Redis database is emptied before each variant. With a
--kv-cache-memory that holds all the prompts, write-back writes nothing while it serves (it
writes when the engine closes, after the measurement); with a pool that holds one prompt, every
chunk is evicted and written either way. Needs redis-server. Usage:
  bench/offload_write_policy.py KVFORGE [--kv-cache-memory 160MiB] [--rounds 3] [--json OUT]
"""
import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import json

from bench_support import RedisServer, make_llama, write_json


def mean_ttft(a, model, extra):
    cmd = [a.kvforge, "bench", "throughput", "--model", model, "--workload", "fixed",
           "--num-prompts", str(a.prompts), "--input-len", str(a.input_len), "--output-len", "1",
           "--max-num-seqs", "1", "--threads", "2", "--no-progress", "--json",
           "--max-model-len", str(a.input_len + 64)] + a.pool + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["ttft_ms"]["mean"]


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kvforge")
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--input-len", type=int, default=2048)
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--kv-cache-memory", default="")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json")
    a = p.parse_args()
    a.pool = ["--kv-cache-memory", a.kv_cache_memory] if a.kv_cache_memory else []
    rows = {}
    with tempfile.TemporaryDirectory(prefix="kvf-write-policy-") as tmp:
        model = os.path.join(tmp, "m.gguf")
        make_llama(a.kvforge, a.dim, a.layers, model, ctx=a.input_len + 64)
        redis = RedisServer(tmp)
        try:
            variants = {}
            for write in ("through", "back"):
                variants[f"redis, write-{write}"] = ["--kv-offload-redis", redis.url(),
                                                     "--kv-offload-write", write]
                variants[f"ram, write-{write}"] = ["--kv-offload-ram", "1GiB",
                                                   "--kv-offload-write", write]
            for _ in range(a.rounds):
                rows.setdefault("off", []).append(mean_ttft(a, model, []))
                for name, extra in variants.items():
                    redis.cli("FLUSHALL")
                    rows.setdefault(name, []).append(mean_ttft(a, model, extra))
        finally:
            redis.stop()
    print(f"{a.prompts} prompts x {a.input_len} tokens, one at a time; pool "
          f"{a.kv_cache_memory or 'default'}; model dim {a.dim} x {a.layers} layers, f16 KV\n")
    print("| variant | mean TTFT ms per round | TTFT / off (median) |")
    print("|---|---|---|")
    summary = {}
    for v, ts in rows.items():
        ratio = statistics.median(t / o for t, o in zip(ts, rows["off"]))
        summary[v] = dict(ttft_ms=ts, ratio=ratio)
        print(f"| {v} | {' / '.join('%.0f' % t for t in ts)} | {ratio:.2f}x |")
    write_json(a.json, a, rows=rows, summary=summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
