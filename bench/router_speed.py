#!/usr/bin/env python3
"""Cache-aware routing against round robin, in one run (#19).

Starts --workers `kvforge serve` processes (one compute thread each, a KV pool of --pool) on a
random-weight llama from `kvforge make-model` (--dim/--layers, so that prefill costs something),
and a `kvforge route` in front of them, once per policy. The workload is --conversations chat
conversations, each a distinct long opening (--prefix-words) followed by --turns turns; every
turn's prompt is the conversation so far plus a new question, so a worker that served the earlier
turns holds most of the prompt in its prefix cache. --clients closed-loop clients take the
conversations' turns in an interleaved order (turn t of every conversation, shuffled, before
turn t+1).
Policies alternate within each round, the order flipping each round, for --rounds rounds; each
run restarts the workers, so every policy starts cold. Prints per policy and round: the prompt
tokens served from the workers' caches (usage.prompt_tokens_details.cached_tokens), mean and
p90 TTFT of the streamed requests, requests per second, and the ratios against round robin from
the same round. Usage:
  bench/router_speed.py KVFORGE [--workers 2] [--dim 384] [--layers 6] [--conversations 12]
      [--turns 4] [--prefix-words 220] [--clients 4] [--pool 40MiB] [--rounds 2] [--json OUT]
"""
import argparse
import json
import os
import random
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import urllib.request

from bench_support import make_llama, start_listening, write_json


POLICIES = ["round_robin", "cache_aware"]
WORDS = ("the a little girl boy dog cat tree park ball sun day happy sad big small red blue "
         "green went saw played ran jumped found lost friend mom dad house garden flower bird "
         "sky water rain snow toy box car boat fish cake cookie apple tall short fast slow").split()


def conversations(a):
    rng = random.Random(7)
    out = []
    for c in range(a.conversations):
        opening = " ".join(rng.choice(WORDS) for _ in range(a.prefix_words))
        turns = [" ".join(rng.choice(WORDS) for _ in range(12)) + "?" for _ in range(a.turns)]
        out.append((f"Story {c}: {opening}.", turns))
    return out


def stream_request(url, prompt, max_tokens):
    body = json.dumps({"prompt": prompt, "max_tokens": max_tokens, "temperature": 0,
                       "ignore_eos": True, "stream": True,
                       "stream_options": {"include_usage": True}}).encode()
    req = urllib.request.Request(url + "/v1/completions", data=body,
                                 headers={"Content-Type": "application/json"})
    t0 = time.perf_counter()
    ttft, text, usage = None, "", None
    with urllib.request.urlopen(req, timeout=600) as r:
        for raw in r:
            line = raw.decode().strip()
            if not line.startswith("data: ") or line == "data: [DONE]":
                continue
            ev = json.loads(line[6:])
            if ev.get("choices"):
                if ttft is None:
                    ttft = time.perf_counter() - t0
                text += ev["choices"][0].get("text", "")
            if ev.get("usage"):
                usage = ev["usage"]
    return ttft, text, usage


def run_policy(a, model, policy, tmp):
    workers, urls = [], []
    for i in range(a.workers):
        p, u = start_listening([a.kvforge, "serve", "--model", model, "--port", "0", "--threads", "1",
                      "--kv-cache-memory", a.pool, "--no-webui"], os.path.join(tmp, f"w{i}.log"))
        workers.append(p)
        urls.append(u)
    router, rurl = start_listening([a.kvforge, "route", "--port", "0", "--workers", ",".join(urls),
                          "--policy", policy], os.path.join(tmp, "route.log"))
    try:
        convs = conversations(a)
        history = [opening for opening, _ in convs]
        lock = threading.Lock()
        results = []
        for t in range(a.turns):  # each turn of every conversation, then the next turn
            jobs = list(range(len(convs)))
            # Users come back in no fixed order (a fixed one would let round robin send a
            # conversation to the same worker every turn by accident).
            random.Random(100 + t).shuffle(jobs)
            def client():
                while True:
                    with lock:
                        if not jobs:
                            return
                        c = jobs.pop(0)
                    prompt = history[c] + " Q: " + convs[c][1][t] + " A:"
                    ttft, text, usage = stream_request(rurl, prompt, a.output_len)
                    with lock:
                        history[c] = prompt + text
                        results.append((ttft, usage))
            t0 = time.perf_counter()
            threads = [threading.Thread(target=client) for _ in range(a.clients)]
            for th in threads:
                th.start()
            for th in threads:
                th.join()
            results.append(("wall", time.perf_counter() - t0))
        walls = [w for k, w in results if k == "wall"]
        reqs = [(ttft, u) for ttft, u in results if ttft != "wall"]
        prompt = sum(u["prompt_tokens"] for _, u in reqs if u)
        cached = sum(u.get("prompt_tokens_details", {}).get("cached_tokens", 0) for _, u in reqs if u)
        ttfts = sorted(t for t, _ in reqs if t is not None)
        return dict(requests=len(reqs), wall_s=sum(walls), req_per_s=len(reqs) / sum(walls),
                    cached_share=cached / max(1, prompt), prompt_tokens=prompt,
                    ttft_mean_ms=1000 * statistics.mean(ttfts),
                    ttft_p90_ms=1000 * ttfts[int(0.9 * (len(ttfts) - 1))])
    finally:
        for p in [router] + workers:
            p.kill()
            p.wait()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("kvforge")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--dim", type=int, default=384)
    p.add_argument("--layers", type=int, default=6)
    p.add_argument("--conversations", type=int, default=12)
    p.add_argument("--turns", type=int, default=4)
    p.add_argument("--prefix-words", type=int, default=220)
    p.add_argument("--output-len", type=int, default=16)
    p.add_argument("--clients", type=int, default=4)
    p.add_argument("--pool", default="40MiB")  # ~4500 tokens: the working set is ~7000
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--json")
    a = p.parse_args()
    rows = {pol: [] for pol in POLICIES}
    with tempfile.TemporaryDirectory(prefix="kvf-router-bench-") as tmp:
        model = os.path.join(tmp, "m.gguf")
        make_llama(a.kvforge, a.dim, a.layers, model, ctx=4096)
        for r in range(a.rounds):
            for pol in (POLICIES if r % 2 == 0 else list(reversed(POLICIES))):
                rows[pol].append(run_policy(a, model, pol, tmp))
    print(f"{a.workers} workers, {a.conversations} conversations x {a.turns} turns, opening "
          f"{a.prefix_words} words, {a.clients} clients, pool {a.pool} per worker; model dim "
          f"{a.dim} x {a.layers} layers\n")
    print("| policy | cached share of prompt tokens per round | mean TTFT ms per round | "
          "TTFT / round robin (median) | req/s per round | req/s / round robin (median) |")
    print("|---|---|---|---|---|---|")
    for pol in POLICIES:
        rs, base = rows[pol], rows["round_robin"]
        tr = [x["ttft_mean_ms"] / b["ttft_mean_ms"] for x, b in zip(rs, base)]
        qr = [x["req_per_s"] / b["req_per_s"] for x, b in zip(rs, base)]
        cached = " / ".join("%.1f%%" % (100 * x["cached_share"]) for x in rs)
        ttft = " / ".join("%.0f" % x["ttft_mean_ms"] for x in rs)
        qps = " / ".join("%.2f" % x["req_per_s"] for x in rs)
        print(f"| {pol} | {cached} | {ttft} | {statistics.median(tr):.2f}x | {qps} | "
              f"{statistics.median(qr):.2f}x |")
    write_json(a.json, a, rows=rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
