#!/usr/bin/env python3
"""kvforge against the llama.cpp peer build, side by side in one run (#20's comparison script).

For each shape and weight type it writes one random-weight GGUF with `kvforge make-model` (both
engines load the same file), then runs every test with both engines, alternating, --rounds
rounds, the order flipping each round:
  pp<N>           kvforge bench latency --n-prompt N          | llama-bench -p N -n 0
  tg<N>           kvforge bench latency --n-gen N             | llama-bench -p 0 -n N
  tg<N>@d<D>      ... --depth D (prefilled, as llama-bench -d) | llama-bench -n N -d D
  batched         kvforge bench batched --batches B,...        | llama-batched-bench -npl B,...
Every kvforge run and every llama-bench run is a warm-up and then --reps repetitions; 2 threads;
llama.cpp with flash attention (-fa 1). --kv-dtype q8_0 runs both with a q8_0 KV cache
(llama-bench -ctk q8_0 -ctv q8_0). Prints one markdown row per (shape, weights, test): both
engines' figures per round, the ratio per round, the median ratio, and for pp tests kvforge's
matmul GFLOP/s as a fraction of the FMA peak `bench latency` measures in the same run (with the
same kernel table: on an AVX-512 CPU that is the zmm peak, twice the ymm one).
The peer is picked like for like: PEER `auto` (the default) reads the CPU's flags and runs
llama.cpp's native AVX-512 build (../shared/peers/llama.cpp-b10573-avx512, built for AVX-512
F/BW/DQ/VL/VNNI/BF16) against kvforge's best kernel table where the CPU has all of those, else
the AVX2 build against kvforge's best (AVX2) table. `avx2` runs the AVX2 build against kvforge
restricted to its AVX2 kernels (KVFORGE_KERNELS=avx2) on any CPU; `avx512` insists on the native
pair; `both` runs the two pairs on the same model files, one after the other; a directory runs
that build with --kernels as given. The header names the CPU, each pair and the kernel table
kvforge reported. Usage:
  bench/compare_llamacpp.py KVFORGE [auto|avx2|avx512|both|PEER_DIR] [--shapes 110m,1b]
      [--dtypes f16,q8_0,...] [--tests pp512,tg128,tg64@d2048] [--batches 1,4,8,16,64]
      [--rounds 3] [--reps 2] [--kv-dtype f16|q8_0] [--kernels avx2|avx512] [--json OUT] [--keep]
"""
import argparse
import json
import os
import statistics
import subprocess
import sys

SHAPES = {  # the two shapes the issue names
    "110m": dict(dim=768, layers=12, heads=12, kv_heads=12, ffn=2048),
    "1b": dict(dim=2048, layers=16, heads=32, kv_heads=8, ffn=8192),
}


# The environment of kvforge's runs (KVFORGE_KERNELS with --kernels); llama.cpp's runs get the
# caller's own.
KVFORGE_ENV = dict(os.environ)
# The kernel table each kvforge latency run reported.
KVFORGE_TABLES = set()


def run(cmd, env=None):
    return subprocess.run(cmd, check=True, capture_output=True, text=True, env=env).stdout


def make_model(kvf, shape, dtype, vocab, out):
    s = SHAPES[shape]
    run([kvf, "make-model", "--dim", str(s["dim"]), "--layers", str(s["layers"]), "--heads",
         str(s["heads"]), "--kv-heads", str(s["kv_heads"]), "--ffn", str(s["ffn"]), "--dtype",
         dtype, "--ctx", "16384", "--seed", "1", "--vocab-from", vocab, "--out", out])


# kvforge's pp matmul GFLOP/s as a fraction of the FMA peak its bench measured, per (model, test).
PEAK_FRACTIONS = {}
# Per (model, test) of a tg test: (STREAM triad GB/s, bytes read per token) of each kvforge run;
# the triad is measured by that run, just before its tokens, so both engines' tg of the round
# can be put against the machine's bandwidth of the moment.
TRIADS = {}


def parse_test(name):
    """'pp512' -> ('pp', 512, 0); 'tg64@d2048' -> ('tg', 64, 2048)."""
    body, _, depth = name.partition("@d")
    kind, n = body[:2], int(body[2:])
    if kind not in ("pp", "tg"):
        raise ValueError("a test is ppN, tgN or tgN@dD: " + name)
    return kind, n, int(depth or 0)


def kvforge_test(kvf, model, test, a):
    kind, n, depth = parse_test(test)
    cmd = [kvf, "bench", "latency", "--model", model, "--n-prompt", str(n if kind == "pp" else 0),
           "--n-gen", str(n if kind == "tg" else 0), "--depth", str(depth), "--repetitions",
           str(a.reps), "--threads", "2", "--kv-dtype", a.kv_dtype, "--json"]
    if kind == "pp":
        cmd.append("--no-bandwidth")
    report = json.loads(run(cmd, KVFORGE_ENV))
    KVFORGE_TABLES.add(report.get("kernels", "?"))
    t = report["tests"][0]
    if kind == "pp":
        PEAK_FRACTIONS.setdefault((model, test), []).append(t["peak_fraction"])
    else:
        bw = report["bandwidth_gb_per_s"]
        per_token = report["roofline_fraction"] * bw * 1e9 / t["tokens_per_s"]
        TRIADS.setdefault((model, test), []).append((bw, per_token))
    return t["tokens_per_s"]


def llamacpp_test(peer, model, test, a):
    kind, n, depth = parse_test(test)
    p, g = (n, 0) if kind == "pp" else (0, n)
    cmd = [os.path.join(peer, "llama-bench"), "-m", model, "-t", "2", "-fa", "1", "-p", str(p),
           "-n", str(g), "-d", str(depth), "-r", str(a.reps), "-o", "json"]
    if a.kv_dtype != "f16":
        cmd += ["-ctk", a.kv_dtype, "-ctv", a.kv_dtype]
    for r in json.loads(run(cmd)):
        if r["n_prompt"] == p and r["n_gen"] == g:
            return r["avg_ts"]
    raise RuntimeError("llama-bench printed no " + test)


def kvforge_batched(kvf, model, a):
    out = run([kvf, "bench", "batched", "--model", model, "--n-prompt", "128", "--n-gen", "64",
               "--batches", ",".join(map(str, a.batches)), "--threads", "2", "--kv-dtype",
               a.kv_dtype, "--json"], KVFORGE_ENV)
    return {r["batch"]: r["s_tg"] for r in json.loads(out)["results"]}


def llamacpp_batched(peer, model, a):
    cmd = [os.path.join(peer, "llama-batched-bench"), "-m", model, "-t", "2", "-fa", "on", "-kvu",
           "-c", str(max(a.batches) * 192 + 256), "-b", "2048", "-ub", "512", "-npp", "128",
           "-ntg", "64", "-npl", ",".join(map(str, a.batches)), "--output-format", "jsonl"]
    if a.kv_dtype != "f16":
        cmd += ["-ctk", a.kv_dtype, "-ctv", a.kv_dtype]
    got = {}
    for line in run(cmd).splitlines():
        if line.strip().startswith("{"):
            r = json.loads(line)
            got[r["pl"]] = r["speed_tg"]
    return got


# What the native llama.cpp build was compiled for (../shared/peers/llama.cpp-b10573-avx512/
# SOURCES.md); it stops with an illegal instruction on a CPU without them.
AVX512_FLAGS = ("avx512f", "avx512bw", "avx512dq", "avx512vl", "avx512_vnni", "avx512_bf16")


def cpu_info():
    """(model name, set of flags) of the first CPU in /proc/cpuinfo."""
    name, flags = "unknown CPU", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name" and name == "unknown CPU":
                    name = value.strip()
                elif key.strip() == "flags" and not flags:
                    flags = set(value.split())
    except OSError:
        pass
    return name, flags


def pick_pairs(choice, peers_root, kernels, flags):
    """[(peer dir, kvforge kernel table or '', label)] for the PEER argument."""
    native = all(f in flags for f in AVX512_FLAGS)
    avx2 = os.path.join(peers_root, "llama.cpp-b10573")
    avx512 = os.path.join(peers_root, "llama.cpp-b10573-avx512")
    missing = [f for f in AVX512_FLAGS if f not in flags]
    if choice == "auto":
        choice = "avx512" if native else "avx2"
    if choice == "avx512":
        if not native:
            sys.exit("compare: the AVX-512 peer needs " + ", ".join(missing) + " (not on this CPU)")
        return [(avx512, kernels, "native AVX-512 llama.cpp vs kvforge's best table")]
    if choice == "avx2":
        return [(avx2, kernels or ("avx2" if native else ""),
                 "AVX2 llama.cpp vs kvforge's AVX2 table")]
    if choice == "both":
        return pick_pairs("avx512", peers_root, kernels, flags) + \
            pick_pairs("avx2", peers_root, "", flags)
    if not os.path.exists(os.path.join(choice, "llama-bench")):
        sys.exit("compare: no llama-bench in " + choice)
    return [(choice, kernels, "peer " + choice)]


def alternate(rounds, first, second):
    """Calls both thunks `rounds` times, flipping the order each round; (firsts, seconds)."""
    xs, ys = [], []
    for r in range(rounds):
        if r % 2 == 0:
            xs.append(first())
            ys.append(second())
        else:
            ys.append(second())
            xs.append(first())
    return xs, ys


def triad_fractions(k, l, triads):
    """Each engine's bytes read per second over the round's triad: (kvforge, llama.cpp, triad)."""
    fk = [tps * b / (bw * 1e9) for tps, (bw, b) in zip(k, triads)]
    fl = [tps * b / (bw * 1e9) for tps, (bw, b) in zip(l, triads)]
    return (statistics.median(fk), statistics.median(fl),
            statistics.median([bw for bw, _ in triads]))


def row(shape, dtype, test, k, l, rows, peak=None, peer="", triads=None):
    ratios = [x / y for x, y in zip(k, l)]
    med = statistics.median(ratios)
    frac = f"{statistics.median(peak):.2f}" if peak else ""
    tg_triad = None
    if triads:
        tg_triad = triad_fractions(k, l, triads)
        frac = f"tg/triad {tg_triad[0]:.2f} vs {tg_triad[1]:.2f} (triad {tg_triad[2]:.1f} GB/s)"
    print(f"| {peer} | {shape} | {dtype} | {test} | {', '.join(f'{v:.1f}' for v in k)} | "
          f"{', '.join(f'{v:.1f}' for v in l)} | {', '.join(f'{r:.2f}' for r in ratios)} | "
          f"{med:.2f}x | {frac} |", flush=True)
    rows.append(dict(peer=peer, shape=shape, weights=dtype, test=test, kvforge=k, llamacpp=l,
                     ratios=ratios, median_ratio=med, kvforge_peak_fraction=peak,
                     tg_over_triad=tg_triad))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kvforge")
    ap.add_argument("peer", nargs="?", default="auto",
                    help="auto | avx2 | avx512 | both | a llama.cpp build directory")
    ap.add_argument("--peers-root", default=os.path.join(os.path.dirname(os.path.abspath(
        __file__)), "..", "..", "shared", "peers"), help="where the two b10573 builds are")
    ap.add_argument("--shapes", default="110m,1b")
    ap.add_argument("--dtypes", default="f32,f16,bf16,q8_0,q4_0,q4_k,q6_k")
    ap.add_argument("--tests", default="pp512,tg128,tg64@d2048,tg64@d8192")
    ap.add_argument("--batches", default="1,4,8,16,64", help="empty: no batched test")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--reps", type=int, default=2)
    ap.add_argument("--kv-dtype", default="f16", choices=["f16", "q8_0"])
    ap.add_argument("--kernels", default="", help="kvforge's kernel table (KVFORGE_KERNELS): "
                    "avx2 for a like-for-like run against an AVX2 peer; default: the best")
    ap.add_argument("--vocab-from", default="tests/data/tokenizer-tests/ggml-vocab-llama-spm.gguf")
    ap.add_argument("--dir", default="/tmp")
    ap.add_argument("--json", default="", help="also write every figure to this file")
    ap.add_argument("--keep", action="store_true", help="keep the written models")
    a = ap.parse_args()
    a.batches = [int(x) for x in a.batches.split(",") if x]
    tests = [t for t in a.tests.split(",") if t]
    for t in tests:
        parse_test(t)  # fail before any work on a bad name
    os.makedirs(a.dir, exist_ok=True)
    cpu, flags = cpu_info()
    pairs = pick_pairs(a.peer, os.path.abspath(a.peers_root), a.kernels, flags)
    print(f"kvforge vs llama.cpp b10573 on {cpu}, {a.rounds} rounds alternating, KV {a.kv_dtype}, "
          f"2 threads")
    for i, (peer, kernels, label) in enumerate(pairs):
        print(f"pair {chr(ord('A') + i)}: {label}: {peer}, kvforge kernels: "
              f"{kernels or 'best for the CPU'}")
    print("| pair | shape | weights | test | kvforge t/s (rounds) | llama.cpp t/s (rounds) | "
          "ratio per round | median ratio | pp: kvforge matmuls / FMA peak; tg: bytes/s / triad |")
    print("|---|---|---|---|---|---|---|---|---|")
    rows = []

    def use_kernels(kernels):
        KVFORGE_ENV.pop("KVFORGE_KERNELS", None)
        if kernels:
            KVFORGE_ENV["KVFORGE_KERNELS"] = kernels

    for shape in a.shapes.split(","):
        for dtype in a.dtypes.split(","):
            model = os.path.join(a.dir, f"compare-{shape}-{dtype}.gguf")
            if not os.path.exists(model):
                make_model(a.kvforge, shape, dtype, a.vocab_from, model)
            for i, (peer, kernels, _) in enumerate(pairs):
                tag = chr(ord("A") + i)
                use_kernels(kernels)
                PEAK_FRACTIONS.clear()
                TRIADS.clear()
                for test in tests:
                    k, l = alternate(a.rounds, lambda t=test: kvforge_test(a.kvforge, model, t, a),
                                     lambda t=test, p=peer: llamacpp_test(p, model, t, a))
                    row(shape, dtype, test, k, l, rows, PEAK_FRACTIONS.get((model, test)), tag,
                        TRIADS.get((model, test)))
                if a.batches:
                    k, l = alternate(a.rounds, lambda: kvforge_batched(a.kvforge, model, a),
                                     lambda p=peer: llamacpp_batched(p, model, a))
                    for b in a.batches:
                        row(shape, dtype, f"S_TG B={b}", [r[b] for r in k], [r[b] for r in l],
                            rows, peer=tag)
            if not a.keep:
                os.remove(model)
    if KVFORGE_TABLES:
        print("kvforge ran the kernel table(s): " + ", ".join(sorted(KVFORGE_TABLES)))
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(cpu=cpu, pairs=[dict(peer=p, kernels=k, label=n) for p, k, n in pairs],
                           rounds=a.rounds, kv_dtype=a.kv_dtype, rows=rows,
                           kvforge_kernels=sorted(KVFORGE_TABLES)), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
