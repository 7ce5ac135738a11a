#!/usr/bin/env python3
"""Offloaded chunks in a smaller KV dtype (--kv-offload-dtype, ADR 0015): bytes and TTFT (#19).

Per round: `off` serves --prompts long prompts (--input-len tokens, `bench throughput --workload
fixed`, one at a time, 1 output token) with no tier. Then, for each stored dtype (auto = the
pool's own f16 bytes, q8_0, q4_0): instance A serves the same prompts on an empty Redis (it
computes and stores), and instance B, a new process, serves them again from the same database.
The variants alternate within a round, their order reversed every other round. Prints per
variant the mean TTFT per round, the median ratio against `off` of the same round, the bytes A
wrote to Redis and the prompt tokens B loaded. --tier disk uses a fresh disk directory instead of
Redis (B: a restarted server on a warm directory). Needs redis-server for the Redis tier. Usage:
  bench/offload_transcode.py KVFORGE [--tier redis|disk] [--dtypes auto,q8_0,q4_0] [--dim 512]
      [--layers 8] [--input-len 2048] [--prompts 4] [--chunk 256] [--compression lz4]
      [--rounds 3] [--json OUT]
"""
import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

from bench_support import RedisServer, make_llama, ttft_cells, write_json


def run(a, model, extra):
    cmd = [a.kvforge, "bench", "throughput", "--model", model, "--workload", "fixed",
           "--num-prompts", str(a.prompts), "--input-len", str(a.input_len), "--output-len", "1",
           "--max-num-seqs", "1", "--threads", "2", "--max-model-len", str(a.input_len + 64),
           "--no-progress", "--json"] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kvforge")
    p.add_argument("--tier", choices=["redis", "disk"], default="redis")
    p.add_argument("--dtypes", default="auto,q8_0,q4_0")
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--input-len", type=int, default=2048)
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--chunk", type=int, default=256)
    p.add_argument("--compression", default="lz4")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--json")
    a = p.parse_args()
    dtypes = a.dtypes.split(",")
    rows = {}
    with tempfile.TemporaryDirectory(prefix="kvf-transcode-") as tmp:
        model = os.path.join(tmp, "m.gguf")
        make_llama(a.kvforge, a.dim, a.layers, model, ctx=a.input_len + 64)
        redis = RedisServer(tmp) if a.tier == "redis" else None
        try:
            for r in range(a.rounds):
                rows.setdefault("off", []).append(run(a, model, []))
                for d in (dtypes if r % 2 == 0 else dtypes[::-1]):
                    common = ["--kv-offload-chunk", str(a.chunk), "--kv-offload-dtype", d,
                              "--kv-offload-compression", a.compression]
                    if redis:
                        redis.cli("FLUSHALL")
                        tier = ["--kv-offload-redis", redis.url()]
                    else:
                        disk = os.path.join(tmp, "disk")
                        shutil.rmtree(disk, ignore_errors=True)
                        tier = ["--kv-offload-disk", disk + ":16GiB"]
                    rows.setdefault(f"{d} A (computes, stores)", []).append(run(a, model, tier + common))
                    rows.setdefault(f"{d} B (loads A's)", []).append(run(a, model, tier + common))
        finally:
            if redis:
                redis.stop()
    print(f"{a.prompts} prompts x {a.input_len} tokens, one at a time; chunk {a.chunk}, "
          f"{a.compression}; {a.tier} tier; model dim {a.dim} x {a.layers} layers, f16 KV pool\n")
    print("| variant | mean TTFT ms per round | TTFT / off (median) | MiB written to the tier | "
          "prompt tokens loaded |")
    print("|---|---|---|---|---|")
    summary = {}
    for v, rs in rows.items():
        t, ratio, t_cell, ratio_cell = ttft_cells(rs, rows["off"], lambda x: x["ttft_ms"]["mean"])
        loaded = statistics.median(x["kv_offload_loaded_tokens"] / max(1, x["prompt_tokens"]) for x in rs)
        written = statistics.median(sum(tt["bytes_in"] for tt in x.get("kv_tiers", [])) for x in rs)
        summary[v] = dict(ttft_ms=t, ratio=ratio, loaded=loaded, bytes_in=written)
        print(f"| {v} | {t_cell} | {ratio_cell} | {written / 1048576:.1f} | {100 * loaded:.1f}% |")
    write_json(a.json, a, rows=rows, summary=summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
