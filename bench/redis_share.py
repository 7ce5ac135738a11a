#!/usr/bin/env python3
"""Two engine instances sharing Redis: instance B's TTFT on long prompts instance A computed (#19).

For each round: `off` serves --prompts long prompts (--input-len tokens, `bench throughput
--workload fixed`, one at a time, 1 output token) with no tier; then instance A serves the same
prompts with --kv-offload-redis on an empty database (it computes and stores); then instance B,
a new process, serves them again from the same database. With --cluster the same A/B pair runs
against a three-master Redis Cluster the script builds (redis-cli --cluster create), so a single
node and a cluster are compared in the same round. Prints mean TTFT per variant and round and the
ratio against `off` from the same round. --prefetch 4,0 runs B once per value of
--kv-offload-prefetch (waiting requests that fetch their chunks while the one ahead computes; 0:
a fetch starts at admission), alternating. Needs redis-server and redis-cli. Usage:
  bench/redis_share.py KVFORGE [--dim 512] [--layers 8] [--input-len 2048] [--prompts 4]
      [--chunk 256] [--rounds 3] [--cluster] [--prefetch 4] [--json OUT]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile

from bench_support import RedisServer, make_llama, start_cluster, ttft_cells, write_json


def ttft(a, model, extra):
    cmd = [a.kvforge, "bench", "throughput", "--model", model, "--workload", "fixed",
           "--num-prompts", str(a.prompts), "--input-len", str(a.input_len), "--output-len", "1",
           "--max-num-seqs", "1", "--threads", "2", "--no-progress", "--json"] + extra
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kvforge")
    p.add_argument("--dim", type=int, default=512)
    p.add_argument("--layers", type=int, default=8)
    p.add_argument("--input-len", type=int, default=2048)
    p.add_argument("--prompts", type=int, default=4)
    p.add_argument("--chunk", type=int, default=256)
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--cluster", action="store_true")
    p.add_argument("--prefetch", default="4")
    p.add_argument("--json")
    a = p.parse_args()
    rows = {}
    procs = []
    with tempfile.TemporaryDirectory(prefix="kvf-redis-share-") as tmp:
        model = os.path.join(tmp, "m.gguf")
        make_llama(a.kvforge, a.dim, a.layers, model, ctx=a.input_len + 64)
        try:
            single = RedisServer(tmp)
            procs.append(single)
            targets = {"redis": (single.url(), lambda: single.cli("FLUSHALL"))}
            if a.cluster:
                nodes = start_cluster(tmp)
                procs += nodes
                targets["cluster"] = (
                    "redis://" + ",".join(f"127.0.0.1:{n.port}" for n in nodes),
                    lambda: [n.cli("FLUSHALL") for n in nodes])
            chunk = ["--kv-offload-chunk", str(a.chunk), "--max-model-len", str(a.input_len + 64)]
            for r in range(a.rounds):
                rows.setdefault("off", []).append(ttft(a, model, ["--max-model-len", str(a.input_len + 64)]))
                for name, (url, flush) in targets.items():
                    flush()
                    rows.setdefault(f"{name} A (computes, stores)", []).append(
                        ttft(a, model, ["--kv-offload-redis", url] + chunk))
                    values = a.prefetch.split(",")
                    for v in (values if r % 2 == 0 else values[::-1]):
                        label = f"{name} B (loads A's)" + (f", prefetch {v}" if len(values) > 1 else "")
                        rows.setdefault(label, []).append(
                            ttft(a, model, ["--kv-offload-redis", url, "--kv-offload-prefetch", v] + chunk))
        finally:
            for server in procs:
                server.stop()
    print(f"{a.prompts} prompts x {a.input_len} tokens, one at a time; chunk {a.chunk}; model dim "
          f"{a.dim} x {a.layers} layers, f16 KV\n")
    print("| variant | mean TTFT ms per round | TTFT / off (median) | prompt tokens loaded |")
    print("|---|---|---|---|")
    summary = {}
    for v, rs in rows.items():
        t, ratio, t_cell, ratio_cell = ttft_cells(rs, rows["off"], lambda x: x["ttft_ms"]["mean"])
        loaded = statistics.median(x["kv_offload_loaded_tokens"] / max(1, x["prompt_tokens"]) for x in rs)
        summary[v] = dict(ttft_ms=t, ratio=ratio, loaded=loaded)
        print(f"| {v} | {t_cell} | {ratio_cell} | {100 * loaded:.1f}% |")
    write_json(a.json, a, rows=rows, summary=summary)
    return 0


if __name__ == "__main__":
    sys.exit(main())
