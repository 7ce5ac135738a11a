#!/usr/bin/env python3
"""A stopped Redis and the other streams (#19, ADR 0013): tier loads run on a loader thread, so a
request whose prefix is in a Redis that stopped answering waits alone, and the running streams
keep their pace.

Instance A (`kvforge serve`) computes a long prompt P and stores its chunks in a redis-server the
script starts. Then, per round and variant, a fresh instance B streams a short request Q
(--output-len tokens); after Q's 8th token:
  alone          nothing else arrives (the baseline);
  redis running  P arrives and loads from Redis;
  redis stopped  Redis is stopped (SIGSTOP) and P arrives; it stays stopped until Q is done.
B runs with --kv-offload-redis-timeout --stall-ms, so a stopped server holds each call that long.
Prints per variant Q's largest gap between tokens after the 8th (per round), the median ratio of
that against `alone` in the same round, and P's latency and cached tokens. Variants alternate
within a round, the order reversed each round. Usage:
  bench/redis_stall.py KVFORGE [--dim 512] [--layers 8] [--prompt-words 1400] [--output-len 64]
      [--stall-ms 5000] [--rounds 3] [--json OUT]
"""
import argparse
import json
import os
import random
import signal
import statistics
import sys
import tempfile
import threading
import time
import urllib.request

from bench_support import RedisServer, make_llama, start_listening, write_json

WORDS = ("the a little girl boy dog cat tree park ball sun day happy sad big small red blue "
         "green went saw played ran jumped found lost friend mom dad house garden").split()
VARIANTS = ["alone", "redis running", "redis stopped"]


def post(url, body, timeout=600):
    req = urllib.request.Request(url + "/v1/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    return urllib.request.urlopen(req, timeout=timeout)


def complete(url, prompt, out):
    """P: one token, non-streaming; fills out with its latency and usage."""
    t0 = time.perf_counter()
    with post(url, {"prompt": prompt, "max_tokens": 1, "temperature": 0}) as r:
        out["usage"] = json.load(r)["usage"]
    out["ms"] = 1000 * (time.perf_counter() - t0)


def stream(url, prompt, max_tokens, times, started):
    """Q: streams `max_tokens` tokens, appending each arrival time; sets `started` at the 8th."""
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "ignore_eos": True,
            "stream": True}
    with post(url, body) as r:
        for raw in r:
            line = raw.decode().strip()
            if line.startswith("data: {") and json.loads(line[6:]).get("choices"):
                times.append(time.perf_counter())
                if len(times) == 8:
                    started.set()
    started.set()


def serve(a, model, url, log, extra=()):
    return start_listening([a.kvforge, "serve", "--model", model, "--port", "0", "--threads", "2",
                            "--max-model-len", "4096", "--kv-offload-redis", url,
                            "--kv-offload-chunk", "256", *extra], log)


def stop(proc):
    proc.send_signal(signal.SIGTERM)  # A's writer finishes its queue before it exits
    proc.wait(timeout=120)


def run_variant(a, model, redis, variant, p_prompt, q_prompt, log):
    proc, url = serve(a, model, redis.url(), log,
                      ["--kv-offload-redis-timeout", str(a.stall_ms),
                       "--kv-offload-load-timeout", str(4 * a.stall_ms)])
    times, started, p_out = [], threading.Event(), {}
    q = threading.Thread(target=stream, args=(url, q_prompt, a.output_len, times, started))
    q.start()
    started.wait(600)
    p = None
    try:
        if variant == "redis stopped":
            redis.proc.send_signal(signal.SIGSTOP)
        if variant != "alone":
            p = threading.Thread(target=complete, args=(url, p_prompt, p_out))
            p.start()
        q.join(600)
    finally:
        redis.proc.send_signal(signal.SIGCONT)
    if p is not None:
        p.join(600)
    stop(proc)
    gaps = [1000 * (y - x) for x, y in zip(times[7:], times[8:])]
    return dict(max_gap_ms=max(gaps), median_gap_ms=statistics.median(gaps), tokens=len(times),
                p_ms=p_out.get("ms"),
                p_cached=(p_out.get("usage") or {}).get("prompt_tokens_details", {}).get("cached_tokens"),
                p_prompt_tokens=(p_out.get("usage") or {}).get("prompt_tokens"))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kvforge")
    ap.add_argument("--dim", type=int, default=512)
    ap.add_argument("--layers", type=int, default=8)
    ap.add_argument("--prompt-words", type=int, default=1400)
    ap.add_argument("--output-len", type=int, default=64)
    ap.add_argument("--stall-ms", type=int, default=5000)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--json")
    a = ap.parse_args()
    rng = random.Random(11)
    p_prompt = "Story: " + " ".join(rng.choice(WORDS) for _ in range(a.prompt_words)) + "."
    rows = {v: [] for v in VARIANTS}
    with tempfile.TemporaryDirectory(prefix="kvf-redis-stall-") as tmp:
        model = os.path.join(tmp, "m.gguf")
        make_llama(a.kvforge, a.dim, a.layers, model, ctx=4096)
        redis = RedisServer(tmp)
        try:
            proc, url = serve(a, model, redis.url(), os.path.join(tmp, "a.log"))
            fill = {}
            complete(url, p_prompt, fill)  # instance A computes P and stores its chunks
            stop(proc)
            for r in range(a.rounds):
                for i, v in enumerate(VARIANTS if r % 2 == 0 else VARIANTS[::-1]):
                    q_prompt = f"Round {r} {i}: " + " ".join(rng.choice(WORDS) for _ in range(20))
                    rows[v].append(run_variant(a, model, redis, v, p_prompt, q_prompt,
                                               os.path.join(tmp, f"b{r}{i}.log")))
        finally:
            redis.stop()
    print(f"P: {fill['usage']['prompt_tokens']} tokens in Redis; Q: {a.output_len} tokens; model dim "
          f"{a.dim} x {a.layers} layers, f16 KV; Redis time-out {a.stall_ms} ms\n")
    print("| variant | Q's largest gap after token 8, ms per round | / alone (median) | "
          "Q's median gap ms | P latency ms | P cached tokens |")
    print("|---|---|---|---|---|---|")
    for v, rs in rows.items():
        ratio = statistics.median(x["max_gap_ms"] / y["max_gap_ms"] for x, y in zip(rs, rows["alone"]))
        p_ms = " / ".join("%.0f" % x["p_ms"] for x in rs) if rs[0]["p_ms"] else "-"
        cached = " / ".join(str(x["p_cached"]) for x in rs) if rs[0]["p_ms"] else "-"
        print(f"| {v} | {' / '.join('%.0f' % x['max_gap_ms'] for x in rs)} | {ratio:.2f}x | "
              f"{statistics.median(x['median_gap_ms'] for x in rs):.1f} | {p_ms} | {cached} |")
    write_json(a.json, a, rows=rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
