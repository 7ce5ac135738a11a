#!/usr/bin/env python3
"""Two engine instances sharing Redis: instance B's TTFT on long prompts instance A computed (#19).

For each round: `off` serves --prompts long prompts (--input-len tokens, `bench throughput
--workload fixed`, one at a time, 1 output token) with no tier; then instance A serves the same
prompts with --kv-offload-redis on an empty database (it computes and stores); then instance B,
a new process, serves them again from the same database. With --cluster the same A/B pair runs
against a three-master Redis Cluster the script builds (redis-cli --cluster create), so a single
node and a cluster are compared in the same round. Prints mean TTFT per variant and round and the
ratio against `off` from the same round. Needs redis-server and redis-cli. Usage:
  bench/redis_share.py KVFORGE [--dim 512] [--layers 8] [--input-len 2048] [--prompts 4]
      [--chunk 256] [--rounds 3] [--cluster] [--json OUT]
"""
import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time

from bench_model import make_llama


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_cli(port, *args):
    return subprocess.run(["redis-cli", "-p", str(port), *args], capture_output=True,
                          text=True).stdout


def start_redis(tmp, cluster=False):
    for _ in range(3):  # a port taken between the probe and the bind: try another
        port = free_port()
        d = tempfile.mkdtemp(dir=tmp)
        cmd = ["redis-server", "--port", str(port), "--bind", "127.0.0.1", "--save", "",
               "--appendonly", "no", "--dir", d, "--maxmemory", "4gb",
               "--maxmemory-policy", "allkeys-lru", "--loglevel", "warning",
               "--logfile", os.path.join(d, "redis.log")]
        if cluster:
            cmd += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
        p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for _ in range(100):
            if redis_cli(port, "PING").strip() == "PONG":
                return p, port
            if p.poll() is not None:
                break
            time.sleep(0.1)
        p.kill()
        p.wait()
        log = open(os.path.join(d, "redis.log")).read() if os.path.exists(os.path.join(d, "redis.log")) else ""
        print(f"redis_share: redis-server on port {port} did not start: {log[-300:]}", file=sys.stderr)
    raise SystemExit("redis_share: redis-server did not start")


def start_cluster(tmp):
    nodes = [start_redis(tmp, cluster=True) for _ in range(3)]
    ports = [port for _, port in nodes]
    subprocess.run(["redis-cli", "--cluster", "create", *[f"127.0.0.1:{p}" for p in ports],
                    "--cluster-replicas", "0", "--cluster-yes"], check=True,
                   capture_output=True)
    for _ in range(300):
        if all("cluster_state:ok" in redis_cli(p, "CLUSTER", "INFO") for p in ports):
            return nodes
        time.sleep(0.1)
    raise SystemExit("redis_share: the cluster did not come up")


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
    p.add_argument("--json")
    a = p.parse_args()
    rows = {}
    procs = []
    with tempfile.TemporaryDirectory(prefix="kvf-redis-share-") as tmp:
        model = os.path.join(tmp, "m.gguf")
        make_llama(a.kvforge, a.dim, a.layers, model, ctx=a.input_len + 64)
        try:
            single, sport = start_redis(tmp)
            procs.append(single)
            targets = {"redis": (f"redis://127.0.0.1:{sport}", lambda: redis_cli(sport, "FLUSHALL"))}
            if a.cluster:
                nodes = start_cluster(tmp)
                procs += [n for n, _ in nodes]
                cports = [port for _, port in nodes]
                targets["cluster"] = (
                    "redis://" + ",".join(f"127.0.0.1:{port}" for port in cports),
                    lambda: [redis_cli(port, "FLUSHALL") for port in cports])
            chunk = ["--kv-offload-chunk", str(a.chunk), "--max-model-len", str(a.input_len + 64)]
            for r in range(a.rounds):
                rows.setdefault("off", []).append(ttft(a, model, ["--max-model-len", str(a.input_len + 64)]))
                for name, (url, flush) in targets.items():
                    flush()
                    rows.setdefault(f"{name} A (computes, stores)", []).append(
                        ttft(a, model, ["--kv-offload-redis", url] + chunk))
                    rows.setdefault(f"{name} B (loads A's)", []).append(
                        ttft(a, model, ["--kv-offload-redis", url] + chunk))
        finally:
            for pr in procs:
                pr.kill()
                pr.wait()
    print(f"{a.prompts} prompts x {a.input_len} tokens, one at a time; chunk {a.chunk}; model dim "
          f"{a.dim} x {a.layers} layers, f16 KV\n")
    print("| variant | mean TTFT ms per round | TTFT / off (median) | prompt tokens loaded |")
    print("|---|---|---|---|")
    summary = {}
    for v, rs in rows.items():
        t = [x["ttft_ms"]["mean"] for x in rs]
        ratio = [x / o["ttft_ms"]["mean"] for x, o in zip(t, rows["off"])]
        loaded = statistics.median(x["kv_offload_loaded_tokens"] / max(1, x["prompt_tokens"]) for x in rs)
        summary[v] = dict(ttft_ms=t, ratio=ratio, loaded=loaded)
        print(f"| {v} | {' / '.join('%.0f' % x for x in t)} | {statistics.median(ratio):.2f}x | "
              f"{100 * loaded:.1f}% |")
    if a.json:
        with open(a.json, "w") as f:
            json.dump(dict(args=vars(a), rows=rows, summary=summary), f, indent=1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
