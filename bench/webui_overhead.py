#!/usr/bin/env python3
"""What the web page costs the engine: serving throughput with the page's polling on vs off.

Starts one `kvforge serve` and runs `kvforge bench serve` against it --rounds times in each mode,
alternating (the order flips every round): "closed" (nobody looks) and "polling" (a client
fetching GET /v1/kvforge/kv at --hz and GET /v1/kvforge/history at 1 Hz, as an open page does).
Prints every round's output tokens/s and the ratio of the means. Usage:
  bench/webui_overhead.py KVFORGE [--model M] [--rounds 3] [--hz 4] [--num-prompts 256]
      [--concurrency 16] [--input-len 64] [--output-len 128]
"""
import argparse
import http.client
import json
import re
import subprocess
import sys
import threading
import time


def start_server(kvf, model):
    cmd = [kvf, "serve", "--port", "0"] + (["--model", model] if model else [])
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    deadline = time.time() + 60
    err = ""
    while time.time() < deadline:
        line = proc.stderr.readline()
        if not line:
            break
        err += line
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
        if m:
            threading.Thread(target=proc.stderr.read, daemon=True).start()  # drain
            return proc, m.group(1)
    proc.kill()
    raise RuntimeError("kvforge serve did not start:\n" + err)


class Poller:
    """Fetches the page's endpoints like an open page: the snapshot at hz, the history at 1 Hz."""

    def __init__(self, url, hz):
        self.url, self.period, self.stop, self.count = url, 1.0 / hz, threading.Event(), 0

    def run(self):
        # One keep-alive connection, as a browser keeps: the client's own CPU stays small (it
        # shares the 2 cores with the server here; a real page runs elsewhere).
        host = self.url.split("//", 1)[1]
        conn = http.client.HTTPConnection(host, timeout=10)
        last_history = 0.0
        while not self.stop.is_set():
            t0 = time.time()
            paths = ["/v1/kvforge/kv"] + (["/v1/kvforge/history"] if t0 - last_history >= 1.0 else [])
            for path in paths:
                conn.request("GET", path)
                conn.getresponse().read()
            if len(paths) > 1:
                last_history = t0
            self.count += 1
            self.stop.wait(max(0.0, self.period - (time.time() - t0)))
        conn.close()


def bench(kvf, url, a):
    out = subprocess.run([kvf, "bench", "serve", "--url", url, "--num-prompts", str(a.num_prompts),
                          "--concurrency", str(a.concurrency), "--input-len", str(a.input_len),
                          "--output-len", str(a.output_len), "--json", "--no-progress"],
                         check=True, capture_output=True, text=True).stdout
    r = json.loads(out)
    if r["failed"]:
        raise RuntimeError("failed requests: " + r["first_error"])
    return r["output_tokens_per_s"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kvforge")
    ap.add_argument("--model", default="")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--hz", type=float, default=4)
    ap.add_argument("--num-prompts", type=int, default=256)
    ap.add_argument("--concurrency", type=int, default=16)
    ap.add_argument("--input-len", type=int, default=64)
    ap.add_argument("--output-len", type=int, default=128)
    a = ap.parse_args()
    proc, url = start_server(a.kvforge, a.model)
    got = {"closed": [], "polling": []}
    polls = 0
    try:
        bench(a.kvforge, url, a)  # warm-up
        for r in range(a.rounds):
            for mode in (["closed", "polling"] if r % 2 == 0 else ["polling", "closed"]):
                poller = None
                if mode == "polling":
                    poller = Poller(url, a.hz)
                    t = threading.Thread(target=poller.run)
                    t.start()
                got[mode].append(bench(a.kvforge, url, a))
                if poller:
                    poller.stop.set()
                    t.join()
                    polls += poller.count
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    mean = {k: sum(v) / len(v) for k, v in got.items()}
    print(f"model: {a.model or 'embedded stories260K'}, {a.num_prompts} requests x {a.output_len} "
          f"tokens, concurrency {a.concurrency}, {a.rounds} rounds, {polls} snapshots taken")
    print("| mode | output tok/s (rounds) | mean |")
    print("|---|---|---|")
    for k in ("closed", "polling"):
        print(f"| {k} | {', '.join(f'{v:.1f}' for v in got[k])} | {mean[k]:.1f} |")
    ratios = sorted(p / c for p, c in zip(got["polling"], got["closed"]))
    median = ratios[len(ratios) // 2] if len(ratios) % 2 else (
        ratios[len(ratios) // 2 - 1] + ratios[len(ratios) // 2]) / 2
    print(f"polling / closed: ratio of means {mean['polling'] / mean['closed']:.4f}, per-round "
          f"ratios {', '.join(f'{r:.3f}' for r in ratios)} (median {median:.4f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
