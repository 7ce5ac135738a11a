"""What the offload, router and Redis benchmarks share: the random-weight f16 llama they serve
(heads of 64, the FFN at 8/3 of the width rounded to 32, written by `kvforge make-model`) and
throw-away redis-server processes (a free loopback port, no persistence, an LRU-bounded memory)."""
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time


def write_json(path, args, **results):
    """The run's arguments and results, for `--json OUT`; nothing when path is empty."""
    if path:
        with open(path, "w") as f:
            json.dump(dict(args=vars(args), **results), f, indent=1)


def ttft_cells(runs, base_runs, ttft):
    """A variant's TTFT per round, its ratios against `base_runs` (the baseline's runs of the
    same rounds) and the two table cells: "a / b / c" and the median ratio "0.20x"."""
    t = [ttft(x) for x in runs]
    ratio = [x / ttft(o) for x, o in zip(t, base_runs)]
    return t, ratio, " / ".join("%.0f" % x for x in t), "%.2fx" % statistics.median(ratio)


def make_llama(kvforge, dim, layers, out, ctx=None):
    cmd = [kvforge, "make-model", "--dim", str(dim), "--layers", str(layers),
           "--heads", str(dim // 64), "--kv-heads", str(dim // 64),
           "--ffn", str(dim * 8 // 3 // 32 * 32), "--dtype", "f16", "--out", out]
    if ctx is not None:
        cmd += ["--ctx", str(ctx)]
    subprocess.run(cmd, check=True, capture_output=True)


def start_listening(cmd, log):
    """Starts `kvforge serve` or `kvforge route` (stderr to `log`); returns the process and the
    URL from its "listening on" line, or exits after 30 s without one."""
    f = open(log, "w")
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=f)
    for _ in range(300):
        with open(log) as g:
            for line in g:
                if "listening on http://" in line:
                    return p, line.strip().split("listening on ")[1]
        if p.poll() is not None:
            break
        time.sleep(0.1)
    p.kill()
    raise SystemExit(f"{' '.join(cmd[:2])} did not start (see {log})")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def redis_cli(port, *args, db=0):
    return subprocess.run(["redis-cli", "-p", str(port), "-n", str(db), *args],
                          capture_output=True, text=True).stdout


class RedisServer:
    """A redis-server in its own directory under `tmp`; with cluster=True a cluster-enabled node
    (not yet part of a cluster: see start_cluster)."""

    def __init__(self, tmp, cluster=False):
        for _ in range(3):  # a port taken between the probe and the bind: try another
            self.port = free_port()
            d = tempfile.mkdtemp(dir=tmp)
            log = os.path.join(d, "redis.log")
            cmd = ["redis-server", "--port", str(self.port), "--bind", "127.0.0.1", "--save", "",
                   "--appendonly", "no", "--dir", d, "--maxmemory", "4gb",
                   "--maxmemory-policy", "allkeys-lru", "--loglevel", "warning", "--logfile", log]
            if cluster:
                cmd += ["--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf"]
            self.proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            for _ in range(100):
                if self.cli("PING").strip() == "PONG":
                    return
                if self.proc.poll() is not None:
                    break
                time.sleep(0.1)
            self.stop()
            tail = open(log).read()[-300:] if os.path.exists(log) else ""
            print(f"redis-server on port {self.port} did not start: {tail}", file=sys.stderr)
        raise SystemExit("redis-server did not start")

    def cli(self, *args, db=0):
        return redis_cli(self.port, *args, db=db)

    def url(self, db=0):
        return f"redis://127.0.0.1:{self.port}/{db}"

    def stop(self):
        self.proc.kill()
        self.proc.wait()


def start_cluster(tmp, masters=3):
    """`masters` cluster-enabled servers joined by redis-cli --cluster create, once every node
    says cluster_state:ok."""
    nodes = [RedisServer(tmp, cluster=True) for _ in range(masters)]
    subprocess.run(["redis-cli", "--cluster", "create", *[f"127.0.0.1:{n.port}" for n in nodes],
                    "--cluster-replicas", "0", "--cluster-yes"], check=True, capture_output=True)
    for _ in range(300):
        if all("cluster_state:ok" in n.cli("CLUSTER", "INFO") for n in nodes):
            return nodes
        time.sleep(0.1)
    for n in nodes:
        n.stop()
    raise SystemExit("the Redis cluster did not come up")
