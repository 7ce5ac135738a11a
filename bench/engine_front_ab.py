#!/usr/bin/env python3
"""A/B of two kvforge binaries, alternated (the order flips every round), medians and per-round
ratios: `kvforge run` on one prompt (decode tokens/s, time to first token, prefill tokens/s) and
`kvforge bench latency` (pp128, tg64). Written for #43 (one engine) before/after.

Usage: bench/engine_front_ab.py OLD_KVFORGE NEW_KVFORGE MODEL.gguf [--rounds 8] [--latency-rounds 3]
Prints markdown rows: figure | old median | new median | new/old of the medians | per-round
new/old, lowest to highest.
"""
import argparse
import json
import statistics
import subprocess

PROMPT = ("Once upon a time there was a little girl named Lily who loved to play in the park with "
          "her friends every day")
ENV = {"KVF_LOG": "warn"}


def run_once(binary, model):
    args = [binary, "run", "--model", model, "--prompt", PROMPT, "--max-tokens", "400",
            "--temperature", "0", "--ignore-eos", "--json", "--threads", "2"]
    out = subprocess.run(args, capture_output=True, text=True, check=True, env=ENV).stdout
    j = json.loads(out.strip().splitlines()[-1])
    return {"run decode tok/s": j["decode_tokens_per_s"], "run ttft ms": j["ttft_ms"],
            "run prefill tok/s": j["prefill_tokens_per_s"]}


def latency_once(binary, model):
    args = [binary, "bench", "latency", "--model", model, "--n-prompt", "128", "--n-gen", "64",
            "--repetitions", "3", "--no-bandwidth", "--no-peak", "--json", "--threads", "2"]
    out = subprocess.run(args, capture_output=True, text=True, check=True, env=ENV).stdout
    return {"bench latency " + t["name"] + " tok/s": t["tokens_per_s"]
            for t in json.loads(out)["tests"]}


def alternate(measure, binaries, model, rounds, figures):
    for r in range(rounds):
        order = binaries if r % 2 == 0 else binaries[::-1]
        for name, binary in order:
            for what, value in measure(binary, model).items():
                figures.setdefault(what, {"old": [], "new": []})[name].append(value)


def main():
    p = argparse.ArgumentParser()
    p.add_argument("old")
    p.add_argument("new")
    p.add_argument("model")
    p.add_argument("--rounds", type=int, default=8)
    p.add_argument("--latency-rounds", type=int, default=3)
    a = p.parse_args()
    binaries = [("old", a.old), ("new", a.new)]
    figures = {}
    alternate(run_once, binaries, a.model, a.rounds, figures)
    alternate(latency_once, binaries, a.model, a.latency_rounds, figures)
    for what, d in figures.items():
        o, n = statistics.median(d["old"]), statistics.median(d["new"])
        per_round = sorted(x / y for x, y in zip(d["new"], d["old"]))
        print(f"| {what} | {o:.1f} | {n:.1f} | {n / o:.3f} | "
              f"{per_round[0]:.2f}-{per_round[-1]:.2f} |")


if __name__ == "__main__":
    main()
