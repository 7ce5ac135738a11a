#!/usr/bin/env python3
"""MLA and MoE speed on a DeepSeek-V2-Lite-shaped model, in one run, alternating and repeated.

Writes one random-weight deepseek2 GGUF with `kvforge make-model --arch deepseek2` (V2-Lite's
widths: d2048, 16 heads, no q-lora, kv_lora_rank 512, rope 64, nope 128, v 128, 64 routed experts
of width 1408 with 6 used, 2 shared, one leading dense layer; fewer layers) and measures, every
round flipping the order of the runs (each run: a warm-up, then 2 repetitions):

  decode  tg tokens/s at each --depths, kvforge absorbed vs naive vs llama.cpp (llama-bench -d);
          kvforge's depth is written directly (--fill random), llama.cpp's is prefilled.
  prefill pp tokens/s, kvforge absorbed vs naive vs auto vs llama.cpp (llama-bench -p).
  moe     batched decode S_TG at --batches, kvforge `bench batched` vs llama-batched-bench.

Prints markdown tables with every round's figures and the ratio of the means. Usage:
  bench/mla_speed.py KVFORGE PEER_DIR [--layers 4] [--rounds 2] [--depths 0,2048,8192]
      [--n-gen 32] [--n-prompt 512] [--batches 1,8,32] [--parts decode,prefill,moe] [--keep]
"""
import argparse
import json
import os
import subprocess
import sys

V2_LITE = dict(dim=2048, heads=16, kv_lora_rank=512, qk_rope_dim=64, qk_nope_dim=128,
               v_head_dim=128, experts=64, experts_used=6, shared_experts=2, expert_ffn=1408,
               ffn=10944, leading_dense=1)


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True).stdout


def make_model(kvf, layers, dtype, vocab, out):
    s = V2_LITE
    run([kvf, "make-model", "--arch", "deepseek2", "--dim", str(s["dim"]), "--layers",
         str(layers), "--heads", str(s["heads"]), "--kv-lora-rank", str(s["kv_lora_rank"]),
         "--qk-rope-dim", str(s["qk_rope_dim"]), "--qk-nope-dim", str(s["qk_nope_dim"]),
         "--v-head-dim", str(s["v_head_dim"]), "--experts", str(s["experts"]), "--experts-used",
         str(s["experts_used"]), "--shared-experts", str(s["shared_experts"]), "--expert-ffn",
         str(s["expert_ffn"]), "--ffn", str(s["ffn"]), "--leading-dense",
         str(s["leading_dense"]), "--dtype", dtype, "--ctx", "16384", "--vocab-from", vocab,
         "--out", out])


def kvforge_latency(kvf, model, form, n_prompt, n_gen, depth):
    cmd = [kvf, "bench", "latency", "--model", model, "--n-prompt", str(n_prompt), "--n-gen",
           str(n_gen), "--depth", str(depth), "--repetitions", "2", "--threads", "2",
           "--mla-attention", form, "--no-bandwidth", "--json"]
    if depth:
        cmd += ["--fill", "random"]
    tests = json.loads(run(cmd))["tests"]
    return tests[0]["tokens_per_s"]


def llamacpp_latency(peer, model, n_prompt, n_gen, depth):
    out = run([os.path.join(peer, "llama-bench"), "-m", model, "-t", "2", "-fa", "1", "-p",
               str(n_prompt), "-n", str(n_gen), "-d", str(depth), "-r", "2", "-o", "json"])
    for r in json.loads(out):
        if r["n_prompt"] == n_prompt and r["n_gen"] == n_gen:
            return r["avg_ts"]
    raise RuntimeError("llama-bench printed no matching test")


def kvforge_batched(kvf, model, batches, n_prompt, n_gen):
    out = run([kvf, "bench", "batched", "--model", model, "--n-prompt", str(n_prompt), "--n-gen",
               str(n_gen), "--batches", ",".join(map(str, batches)), "--threads", "2", "--json"])
    return {r["batch"]: r["s_tg"] for r in json.loads(out)["results"]}


def llamacpp_batched(peer, model, batches, n_prompt, n_gen):
    ctx = max(batches) * (n_prompt + n_gen) + 256
    out = run([os.path.join(peer, "llama-batched-bench"), "-m", model, "-t", "2", "-fa", "on",
               "-kvu", "-c", str(ctx), "-b", "2048", "-ub", "512", "-npp", str(n_prompt), "-ntg",
               str(n_gen), "-npl", ",".join(map(str, batches)), "--output-format", "jsonl"])
    got = {}
    for line in out.splitlines():
        line = line.strip()
        if line.startswith("{"):
            r = json.loads(line)
            got[r["pl"]] = r["speed_tg"]
    return got


def mean(v):
    return sum(v) / len(v)


def fmt(v):
    return ", ".join(f"{x:.2f}" for x in v)


def alternate(rounds, runs):
    """runs: {name: thunk}; every round calls each, the order flipping; {name: [results]}."""
    got = {k: [] for k in runs}
    names = list(runs)
    for r in range(rounds):
        for name in (names if r % 2 == 0 else names[::-1]):
            got[name].append(runs[name]())
    return got


def decode_part(a, model):
    print("\n| depth | kvforge absorbed | kvforge naive | llama.cpp | absorbed / naive | "
          "absorbed / llama.cpp |")
    print("|---|---|---|---|---|---|")
    for d in a.depths:
        got = alternate(a.rounds, {
            "absorbed": lambda d=d: kvforge_latency(a.kvforge, model, "absorbed", 0, a.n_gen, d),
            "naive": lambda d=d: kvforge_latency(a.kvforge, model, "naive", 0, a.n_gen, d),
            "llama": lambda d=d: llamacpp_latency(a.peer, model, 0, a.n_gen, d),
        })
        ab, nv, lc = got["absorbed"], got["naive"], got["llama"]
        print(f"| {d} | {fmt(ab)} | {fmt(nv)} | {fmt(lc)} | {mean(ab) / mean(nv):.2f}x | "
              f"{mean(ab) / mean(lc):.2f}x |", flush=True)


def prefill_part(a, model):
    p = a.n_prompt
    got = alternate(a.rounds, {
        "absorbed": lambda: kvforge_latency(a.kvforge, model, "absorbed", p, 0, 0),
        "naive": lambda: kvforge_latency(a.kvforge, model, "naive", p, 0, 0),
        "auto": lambda: kvforge_latency(a.kvforge, model, "auto", p, 0, 0),
        "llama": lambda: llamacpp_latency(a.peer, model, p, 0, 0),
    })
    print(f"\n| test | kvforge absorbed | kvforge naive | kvforge auto | llama.cpp | "
          f"naive / absorbed | auto / llama.cpp |")
    print("|---|---|---|---|---|---|---|")
    ab, nv, au, lc = got["absorbed"], got["naive"], got["auto"], got["llama"]
    print(f"| pp{p} | {fmt(ab)} | {fmt(nv)} | {fmt(au)} | {fmt(lc)} | "
          f"{mean(nv) / mean(ab):.2f}x | {mean(au) / mean(lc):.2f}x |", flush=True)


def moe_part(a, model):
    got = alternate(a.rounds, {
        "kvforge": lambda: kvforge_batched(a.kvforge, model, a.batches, 128, a.n_gen),
        "llama": lambda: llamacpp_batched(a.peer, model, a.batches, 128, a.n_gen),
    })
    print("\n| B | kvforge S_TG t/s (rounds) | llama.cpp S_TG t/s (rounds) | kvforge / llama.cpp |")
    print("|---|---|---|---|")
    for b in a.batches:
        k = [r[b] for r in got["kvforge"]]
        lc = [r[b] for r in got["llama"]]
        print(f"| {b} | {fmt(k)} | {fmt(lc)} | {mean(k) / mean(lc):.2f}x |", flush=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kvforge")
    ap.add_argument("peer")
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--dtype", default="q8_0")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--depths", default="0,2048,8192")
    ap.add_argument("--n-gen", type=int, default=32)
    ap.add_argument("--n-prompt", type=int, default=512)
    ap.add_argument("--batches", default="1,8,32")
    ap.add_argument("--parts", default="decode,prefill,moe")
    ap.add_argument("--vocab-from", default="tests/data/tokenizer-tests/ggml-vocab-llama-spm.gguf")
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--keep", action="store_true", help="keep the written model")
    a = ap.parse_args()
    a.depths = [int(x) for x in a.depths.split(",")]
    a.batches = [int(x) for x in a.batches.split(",")]
    model = os.path.join(a.dir, f"mla-v2lite-{a.layers}L-{a.dtype}.gguf")
    if not os.path.exists(model):
        make_model(a.kvforge, a.layers, a.dtype, a.vocab_from, model)
    print(f"model: {model} (V2-Lite widths, {a.layers} layers, {a.dtype}), {a.rounds} rounds")
    parts = {"decode": decode_part, "prefill": prefill_part, "moe": moe_part}
    for name in a.parts.split(","):
        parts[name](a, model)
    if not a.keep:
        os.remove(model)
    return 0


if __name__ == "__main__":
    sys.exit(main())
