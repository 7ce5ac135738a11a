#!/usr/bin/env python3
"""Decode speed per KV policy and budget: `kvforge bench throughput --compare-kv-policy` (full KV
and the policy alternated on one seeded workload, twice each) with a pool large enough that no
mode is memory-bound, so the ratio is the per-step cost of attending over fewer slots plus the
policy's own work (observer, compaction). Prints a markdown table of the output tokens/s ratios.
Usage: bench/kv_policy_speed.py KVFORGE [--model M] [--input-len 400] [--output-len 256]
"""
import argparse
import re
import subprocess
import sys

POLICIES = ["streaming", "h2o", "tova", "knorm", "snapkv", "pyramidkv", "random"]
BUDGETS = [0.05, 0.1, 0.2, 0.5]


def ratio(kvf, model, policy, budget, a):
    cmd = [kvf, "bench", "throughput", "--workload", "fixed", "--num-prompts", "16",
           "--input-len", str(a.input_len), "--output-len", str(a.output_len),
           "--max-model-len", str(a.max_model_len), "--kv-policy", policy, "--kv-budget",
           str(budget), "--compare-kv-policy", "--no-progress"]
    if model:
        cmd += ["--model", model]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    m = re.search(r"output tokens/s ([0-9.]+)x", out)
    return float(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kvforge")
    ap.add_argument("--model", default="")
    ap.add_argument("--input-len", type=int, default=400)
    ap.add_argument("--output-len", type=int, default=256)
    ap.add_argument("--max-model-len", type=int, default=1024)
    a = ap.parse_args()
    print("| policy | " + " | ".join(f"{b:g}" for b in BUDGETS) + " |")
    print("|---|" + "---|" * len(BUDGETS))
    for p in POLICIES:
        cells = [f"{ratio(a.kvforge, a.model, p, b, a):.2f}x" for b in BUDGETS]
        print(f"| {p} | " + " | ".join(cells) + " |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
