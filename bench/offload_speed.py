#!/usr/bin/env python3
"""KV offload tiers against recomputation, in one run (#19).

Serves the same seeded multi-turn workload (`kvforge bench throughput --workload multi-turn`)
into a hot KV pool much smaller than the conversations' working set, with:
  off        no tier: what the pool evicts is recomputed
  ram        --kv-offload-ram
  disk       --kv-offload-disk on a fresh directory (cold)
  disk-warm  --kv-offload-disk on a directory a previous engine filled with the same workload
             (a restarted server)
  redis      --kv-offload-redis on an empty database of a redis-server this script starts
  redis-warm --kv-offload-redis on a database another engine process filled with the same
             workload (instance B reusing what instance A computed)
The Redis variants need redis-server (Debian's package); without it they are left out.
Variants alternate within each round, in an order that flips each round, and every round is
repeated --rounds times. Prints each variant's mean TTFT and output tokens/s per round, the ratio
against `off` from the same round, the median ratio, and the share of prompt tokens the tiers
served. The model is a random-weight llama made by `kvforge make-model` (--dim/--layers), so that
prefill costs something. Usage:
  bench/offload_speed.py KVFORGE [--dim 512] [--layers 8] [--conversations 16] [--turns 4]
      [--input-len 256] [--output-len 32] [--pool 40MiB] [--chunk 64] [--rounds 3] [--json OUT]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import shutil
import tempfile

from bench_support import RedisServer, make_llama, write_json


VARIANTS = ["off", "ram", "disk", "disk-warm", "redis", "redis-warm"]
REDIS_COLD_DB, REDIS_WARM_DB = 0, 1


def throughput(kvf, model, a, extra):
    cmd = [kvf, "bench", "throughput", "--model", model, "--workload", "multi-turn",
           "--num-prompts", str(a.conversations), "--turns", str(a.turns),
           "--input-len", str(a.input_len), "--output-len", str(a.output_len),
           "--kv-cache-memory", a.pool, "--threads", "2", "--no-progress", "--json"] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def tier_args(variant, a, tmp, redis=None):
    chunk = ["--kv-offload-chunk", str(a.chunk)]
    if variant == "redis":
        redis.cli("FLUSHDB", db=REDIS_COLD_DB)
        return ["--kv-offload-redis", redis.url(REDIS_COLD_DB)] + chunk
    if variant == "redis-warm":
        return ["--kv-offload-redis", redis.url(REDIS_WARM_DB)] + chunk
    if variant == "off":
        return []
    if variant == "ram":
        return ["--kv-offload-ram", "1GiB"] + chunk
    if variant == "disk":
        fresh = tempfile.mkdtemp(dir=tmp)
        return ["--kv-offload-disk", fresh + ":4GiB"] + chunk
    return ["--kv-offload-disk", os.path.join(tmp, "warm") + ":4GiB"] + chunk


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kvforge")
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--conversations", type=int, default=16)
    p.add_argument("--turns", type=int, default=4)
    p.add_argument("--input-len", type=int, default=256)
    p.add_argument("--output-len", type=int, default=32)
    p.add_argument("--pool", default="40MiB")  # ~2 contexts of the default workload; working set ~7x
    p.add_argument("--chunk", type=int, default=64)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json")
    a = p.parse_args()
    with tempfile.TemporaryDirectory(prefix="kvf-offload-bench-") as tmp:
        model = os.path.join(tmp, "m.gguf")
        make_llama(a.kvforge, a.dim, a.layers, model)
        variants = list(VARIANTS)
        redis = None
        if shutil.which("redis-server") and shutil.which("redis-cli"):
            redis = RedisServer(tmp)
        else:
            variants = [v for v in variants if not v.startswith("redis")]
            print("offload_speed: redis-server not found; Redis variants left out", file=sys.stderr)
        try:
            # Fill the warm directory (and the warm Redis database) once, as a previous server
            # process, or another instance, would have.
            throughput(a.kvforge, model, a, tier_args("disk-warm", a, tmp))
            if redis:
                throughput(a.kvforge, model, a, tier_args("redis-warm", a, tmp, redis))
            rows = {v: [] for v in variants}
            for r in range(a.rounds):
                order = variants if r % 2 == 0 else list(reversed(variants))
                for v in order:
                    rows[v].append(throughput(a.kvforge, model, a, tier_args(v, a, tmp, redis)))
        finally:
            if redis:
                redis.stop()
    print(f"multi-turn: {a.conversations} conversations x {a.turns} turns, input {a.input_len}, "
          f"output {a.output_len}, pool {a.pool}, chunk {a.chunk}; model dim {a.dim} x {a.layers} layers\n")
    print("| variant | mean TTFT ms per round | TTFT / off per round | median | output tok/s per round | "
          "tok/s / off median | prompt tokens from tiers |")
    print("|---|---|---|---|---|---|---|")
    summary = {}
    for v in rows:
        ttft = [x["ttft_ms"]["mean"] for x in rows[v]]
        tps = [x["output_tokens_per_s"] for x in rows[v]]
        r_ttft = [t / o["ttft_ms"]["mean"] for t, o in zip(ttft, rows["off"])]
        r_tps = [t / o["output_tokens_per_s"] for t, o in zip(tps, rows["off"])]
        loaded = [x["kv_offload_loaded_tokens"] / max(1, x["prompt_tokens"]) for x in rows[v]]
        summary[v] = dict(ttft_ms=ttft, ttft_ratio=r_ttft, tps=tps, tps_ratio=r_tps, loaded_share=loaded)
        print(f"| {v} | {' / '.join(f'{t:.1f}' for t in ttft)} | {' / '.join(f'{x:.2f}' for x in r_ttft)} | "
              f"{statistics.median(r_ttft):.2f}x | {' / '.join(f'{t:.0f}' for t in tps)} | "
              f"{statistics.median(r_tps):.2f}x | {100 * statistics.median(loaded):.1f}% |")
    write_json(a.json, a, rows=rows, summary=summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
