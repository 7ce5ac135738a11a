#!/usr/bin/env python3
"""A/B of two kvforge binaries on `kvforge run` (decode, TTFT, prefill), alternated, medians.
Usage: bench/engine_front_ab.py OLD_KVFORGE NEW_KVFORGE MODEL.gguf   (#43 before/after)."""
import json, subprocess, statistics, sys
OLD, NEW, M = sys.argv[1:4]
def run(b, extra=()):
    a = [b, "run", "--model", M, "--prompt", "Once upon a time there was a little girl named Lily who loved to play in the park with her friends every day",
         "--max-tokens", "400", "--temperature", "0", "--ignore-eos", "--json", "--threads", "2", *extra]
    j = json.loads(subprocess.run(a, capture_output=True, text=True, check=True, env={"KVF_LOG": "warn"}).stdout.strip().splitlines()[-1])
    return j["decode_tokens_per_s"], j["ttft_ms"], j["prefill_tokens_per_s"]
res = {"old": [], "new": []}
for r in range(8):
    for name, b in ([("old", OLD), ("new", NEW)] if r % 2 == 0 else [("new", NEW), ("old", OLD)]):
        res[name].append(run(b))
for i, what in enumerate(["decode tok/s", "ttft ms", "prefill tok/s"]):
    o = [x[i] for x in res["old"]]; n = [x[i] for x in res["new"]]
    print(f"| {what} | {statistics.median(o):.1f} | {statistics.median(n):.1f} | {statistics.median(n)/statistics.median(o):.3f} | {min(n)/max(o):.2f}-{max(n)/min(o):.2f} |")
