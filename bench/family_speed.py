#!/usr/bin/env python3
"""pp512 / tg128 per model family, kvforge against the llama.cpp peer build, in the same run.

For each family it writes a ~1B-parameter random-weight f16 GGUF with `kvforge make-model --arch`
(both engines load the same file), then alternates `kvforge bench latency` and `llama-bench`
for --rounds rounds, and prints a markdown table with every round's figures and the ratio of
the means. Usage:
  bench/family_speed.py KVFORGE PEER_DIR [--families llama,qwen3,...] [--rounds 2]
      [--vocab-from tests/data/tokenizer-tests/ggml-vocab-llama-spm.gguf] [--keep]
"""
import argparse
import json
import os
import subprocess
import sys

# ~1B-parameter shapes (non-embedding), after the families' small releases.
SHAPES = {
    "llama": dict(dim=2048, layers=16, heads=32, kv_heads=8, ffn=8192),   # Llama 3.2 1B
    "qwen3": dict(dim=2048, layers=20, heads=16, kv_heads=8, ffn=6144),   # Qwen3 1.7B, fewer layers
    "gemma": dict(dim=2048, layers=16, heads=8, kv_heads=1, ffn=8192),    # Gemma 2B, narrower MLP
    "phi3": dict(dim=2048, layers=16, heads=32, kv_heads=32, ffn=8192),   # Phi-3 mini, fewer layers
    "falcon": dict(dim=2048, layers=24, heads=32, kv_heads=1, ffn=8192),  # Falcon 7B layout, 1B
}


def make_model(kvf, family, vocab, out):
    s = SHAPES[family]
    cmd = [kvf, "make-model", "--arch", family, "--dim", str(s["dim"]), "--layers",
           str(s["layers"]), "--heads", str(s["heads"]), "--kv-heads", str(s["kv_heads"]),
           "--ffn", str(s["ffn"]), "--dtype", "f16", "--ctx", "4096", "--vocab-from", vocab,
           "--out", out]
    subprocess.run(cmd, check=True, capture_output=True)


def kvforge_run(kvf, model):
    out = subprocess.run([kvf, "bench", "latency", "--model", model, "--n-prompt", "512",
                          "--n-gen", "128", "--repetitions", "2", "--threads", "2",
                          "--no-bandwidth", "--json"], check=True, capture_output=True,
                         text=True).stdout
    tests = {t["name"]: t["tokens_per_s"] for t in json.loads(out)["tests"]}
    return tests["pp512"], tests["tg128"]


def llamacpp_run(peer, model):
    out = subprocess.run([os.path.join(peer, "llama-bench"), "-m", model, "-t", "2", "-fa", "1",
                          "-p", "512", "-n", "128", "-r", "2", "-o", "json"], check=True,
                         capture_output=True, text=True).stdout
    pp = tg = None
    for r in json.loads(out):
        if r["n_prompt"] == 512 and r["n_gen"] == 0:
            pp = r["avg_ts"]
        if r["n_prompt"] == 0 and r["n_gen"] == 128:
            tg = r["avg_ts"]
    return pp, tg


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kvforge")
    ap.add_argument("peer")
    ap.add_argument("--families", default=",".join(SHAPES))
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--vocab-from", default="tests/data/tokenizer-tests/ggml-vocab-llama-spm.gguf")
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--keep", action="store_true", help="keep the written models")
    a = ap.parse_args()
    print("| family | shape | test | kvforge tok/s (rounds) | llama.cpp tok/s (rounds) | "
          "ratio of means |")
    print("|---|---|---|---|---|---|")
    for family in a.families.split(","):
        path = os.path.join(a.dir, f"family-{family}-1b-f16.gguf")
        make_model(a.kvforge, family, a.vocab_from, path)
        kv, lc = [], []
        for r in range(a.rounds):  # alternate, the order flipping every round
            runs = [("k", kvforge_run, a.kvforge), ("l", llamacpp_run, a.peer)]
            if r % 2:
                runs.reverse()
            for tag, fn, exe in runs:
                (kv if tag == "k" else lc).append(fn(exe, path))
        s = SHAPES[family]
        shape = (f"{s['layers']}L d{s['dim']} {s['heads']}h/{s['kv_heads']}kv ff{s['ffn']}")
        for i, test in enumerate(["pp512", "tg128"]):
            k = [x[i] for x in kv]
            l = [x[i] for x in lc]
            ratio = (sum(k) / len(k)) / (sum(l) / len(l))
            print(f"| {family} | {shape} | {test} | {', '.join(f'{v:.1f}' for v in k)} | "
                  f"{', '.join(f'{v:.1f}' for v in l)} | {ratio:.2f}x |", flush=True)
        if not a.keep:
            os.remove(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
