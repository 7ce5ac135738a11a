#!/usr/bin/env python3
"""What the Python binding costs: `llm.generate` from Python vs `kvforge bench throughput`, the
same workload shape (N prompts of IN random tokens, OUT greedy tokens each with ignore_eos, all
submitted at once, prefix caching off, the same engine options), alternating, R rounds, in one
run. Prints both output-token rates per round, the ratio per round and the median ratio.

Usage: PYTHONPATH=build/python python3 bench/python_throughput.py [--cli build/apps/cli/kvforge]
       [--model M.gguf] [--num-prompts 256] [--input-len 128] [--output-len 256] [--rounds 5]
"""
import argparse
import json
import random
import statistics
import subprocess
import time

import kvforge


def cli_round(a):
    cmd = [a.cli, "bench", "throughput", "--workload", "fixed", "--num-prompts", str(a.num_prompts),
           "--input-len", str(a.input_len), "--output-len", str(a.output_len),
           "--prefix-cache", "off", "--max-num-seqs", str(a.max_num_seqs), "--threads",
           str(a.threads), "--json", "--no-progress"]
    if a.model:
        cmd += ["--model", a.model]
    r = json.loads(subprocess.run(cmd, capture_output=True, text=True, check=True).stdout)
    return r["output_tokens_per_s"]


def python_round(a, llm, vocab):
    rng = random.Random(1)
    prompts = [[rng.randrange(3, vocab) for _ in range(a.input_len)] for _ in range(a.num_prompts)]
    params = kvforge.SamplingParams(temperature=0, max_tokens=a.output_len, ignore_eos=True)
    t0 = time.perf_counter()
    outs = llm.generate(prompts, params)
    dt = time.perf_counter() - t0
    # What the binding adds around the engine: Python's wall time beyond the engine's own
    # arrival-to-finish time of the last request (submission, waiting, building the outputs).
    engine_s = max(o.metrics.e2e_ms for o in outs) / 1000
    return sum(len(o.outputs[0].token_ids) for o in outs) / dt, (dt - engine_s) / dt


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--cli", default="build/apps/cli/kvforge")
    p.add_argument("--model", default=None)
    p.add_argument("--num-prompts", type=int, default=256)
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=256)
    p.add_argument("--max-num-seqs", type=int, default=64)
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--rounds", type=int, default=5)
    a = p.parse_args()
    # Both use the engine's default KV pool for these options.
    probe = kvforge.LLM(a.model, enable_prefix_caching=False)
    ctx, vocab = probe.max_model_len, len(probe.get_tokenizer())
    probe.close()
    llm = kvforge.LLM(a.model, enable_prefix_caching=False, max_num_seqs=a.max_num_seqs,
                      threads=a.threads)
    ratios, overheads = [], []
    print(f"workload: {a.num_prompts} prompts x {a.input_len} tokens in, {a.output_len} out; "
          f"context {ctx}")
    print("round  cli tok/s  python tok/s  python/cli  binding share of python wall")
    for r in range(a.rounds):
        # Alternate which goes first, so a drifting machine favours neither.
        if r % 2 == 0:
            c = cli_round(a)
            py, over = python_round(a, llm, vocab)
        else:
            py, over = python_round(a, llm, vocab)
            c = cli_round(a)
        ratios.append(py / c)
        overheads.append(over)
        print(f"{r + 1:5d}  {c:9.0f}  {py:12.0f}  {py / c:10.3f}  {100 * over:6.2f}%")
    print(f"median python/cli: {statistics.median(ratios):.3f}; median binding share: "
          f"{100 * statistics.median(overheads):.2f}%")
    llm.close()


if __name__ == "__main__":
    main()
