#!/usr/bin/env python3
"""The shipped monitoring against a real Prometheus scraping a real `kvforge serve`.

Usage: prometheus_test.py KVFORGE DEPLOY_DIR

1. promtool: `check config` on the shipped deploy/prometheus/prometheus.yml and on the test's
   copy of it, `check rules` on deploy/prometheus/kvforge-alerts.yml, and `test rules` on the
   alert unit tests beside this file (kvforge_alerts_test.yml).
2. Starts `kvforge serve` (loopback, ephemeral port) with the features the dashboard charts: prefix
   caching, a KV eviction policy, a RAM offload tier and n-gram speculative decoding; starts
   `prometheus` (loopback, free port, a temporary TSDB) on the shipped config with a 1 s scrape and
   evaluation interval and the alert rules loaded.
3. Sends a workload, waits (bounded, polling) until Prometheus has a sample taken after it, then
   runs every PromQL expression of deploy/grafana/kvforge.json (Grafana variables substituted)
   as an instant and, for range panels, a range query, and every alert expression and its
   left-hand side (the part before the threshold). Each must succeed with the right result type
   and, except the full alert expressions, at least one series.
4. Checks /api/v1/targets (the target is up), /api/v1/rules (every rule of the file loaded,
   evaluated without error, with summary and description) and /api/v1/alerts (a healthy server
   raises none).

Exits 77 (skipped) when prometheus or promtool is not installed, 1 on any failure.
"""
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.parse

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kvf_serve import (Deadline, Proc, TestFailure, free_port, http, http_get,  # noqa: E402
                       parse_metrics, start_kvforge, workload)

SKIP = 77
MODEL = "test-org/kvforge-model"
RATE_WINDOW = "1m"  # $__rate_interval: covers the whole run at a 1 s scrape interval

# Dashboard expressions that may legitimately return no series, with the reason. Every other
# expression must return at least one. (None at present: every series the dashboard reads exists
# once the server has the features above and has served the workload; ratios of idle counters are
# NaN samples, not missing ones.)
MAY_BE_EMPTY = {}

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg, flush=True)


def run_promtool(promtool, args, dl):
    try:
        r = subprocess.run([promtool] + args, capture_output=True, text=True,
                           timeout=dl.left(30))
    except subprocess.TimeoutExpired:
        fail("promtool %s timed out" % " ".join(args))
        return
    if r.returncode != 0:
        fail("promtool %s exited %d:\n%s%s" % (" ".join(args), r.returncode, r.stdout, r.stderr))
    else:
        print("ok: promtool %s" % " ".join(args), flush=True)


def replace_once(text, old, new, what):
    if text.count(old) != 1:
        raise TestFailure("deploy/prometheus/prometheus.yml: expected exactly one %r (%s); the "
                          "file changed, update this test" % (old, what))
    return text.replace(old, new)


def test_config(shipped, rules, port):
    """The shipped config with the test's target, 1 s intervals and an absolute rules path."""
    with open(shipped) as f:
        text = f.read()
    text = replace_once(text, "scrape_interval: 15s", "scrape_interval: 1s", "scrape interval")
    text = replace_once(text, "evaluation_interval: 15s", "evaluation_interval: 1s",
                        "evaluation interval")
    text = replace_once(text, '"localhost:8000"', '"127.0.0.1:%d"' % port, "the target")
    text = replace_once(text, "  - kvforge-alerts.yml", "  - " + json.dumps(rules), "rule file")
    return text


class Prom:
    def __init__(self, base):
        self.base = base

    def api(self, path, dl, **params):
        url = self.base + path
        if params:
            url += "?" + urllib.parse.urlencode(params)
        status, payload = http("GET", url, dl, expect=None)
        try:
            body = json.loads(payload)
        except ValueError:
            raise TestFailure("%s: HTTP %d, not JSON: %r" % (path, status, payload[:300]))
        return status, body

    def query(self, expr, dl):
        return self.api("/api/v1/query", dl, query=expr)

    def query_range(self, expr, start, end, dl):
        return self.api("/api/v1/query_range", dl, query=expr, start="%.3f" % start,
                        end="%.3f" % end, step="1")


def start_prometheus(prometheus, config_text, tmp, dl):
    """prometheus on a free loopback port (retried if another process takes the port first)."""
    cfg = os.path.join(tmp, "prometheus.yml")
    for attempt in range(3):
        port = free_port()
        # The config must name the kvforge target; written by the caller with its port.
        with open(cfg, "w") as f:
            f.write(config_text)
        proc = Proc("prometheus-%d" % attempt,
                    [prometheus, "--config.file=" + cfg,
                     "--storage.tsdb.path=" + os.path.join(tmp, "tsdb-%d" % attempt),
                     "--web.listen-address=127.0.0.1:%d" % port,
                     "--storage.tsdb.retention.time=1h", "--log.level=warn"], tmp)
        base = "http://127.0.0.1:%d" % port
        limit = time.monotonic() + dl.left(20)
        while time.monotonic() < limit:
            if not proc.alive():
                break
            try:
                status, _ = http("GET", base + "/-/ready", dl, timeout=2, expect=None)
                if status == 200:
                    return proc, Prom(base)
            except TestFailure:
                pass
            time.sleep(0.1)
        log = proc.log_tail()
        proc.stop()
        if "address already in use" not in log:
            raise TestFailure("prometheus did not become ready within 20 s:\n" + log)
    raise TestFailure("prometheus: no free port after 3 attempts")


def wait_for(what, dl, cap, probe, interval=0.25):
    """Polls probe() (truthy when done) for at most `cap` seconds; fails naming `what`."""
    limit = time.monotonic() + dl.left(cap)
    last = None
    while time.monotonic() < limit:
        last = probe()
        if last:
            return last
        time.sleep(interval)
    raise TestFailure("timed out after %.0f s waiting for %s" % (cap, what))


# ----------------------------------------------------------------------------- dashboard

def dashboard_panels(panels):
    for p in panels:
        yield p
        yield from dashboard_panels(p.get("panels", []))


def check_dashboard(board):
    """Static checks that make the JSON importable as is; returns [(panel title, target)]."""
    if not 36 <= board.get("schemaVersion", 0) <= 41:
        fail("dashboard schemaVersion %r (wanted about 39)" % board.get("schemaVersion"))
    if board.get("id") is not None:
        fail("dashboard id must be null for import")
    variables = {v["name"]: v for v in board.get("templating", {}).get("list", [])}
    ds = variables.get("DS_PROMETHEUS")
    if not ds or ds.get("type") != "datasource" or ds.get("query") != "prometheus":
        fail("no DS_PROMETHEUS variable of type datasource (query prometheus)")
    mv = variables.get("model_name")
    mq = mv and (mv.get("query", {}).get("query") if isinstance(mv.get("query"), dict)
                 else mv.get("query"))
    if not mv or mv.get("type") != "query" or \
            (mq or "").replace(" ", "") != "label_values(vllm:num_requests_running,model_name)":
        fail("no model_name query variable label_values(vllm:num_requests_running, model_name)")
    want_ds = {"type": "prometheus", "uid": "${DS_PROMETHEUS}"}
    for name, v in variables.items():
        if v.get("type") == "query" and v.get("datasource") != want_ds:
            fail("variable %s does not use ${DS_PROMETHEUS}" % name)
    targets = []
    ids = set()
    boxes = []
    for p in dashboard_panels(board.get("panels", [])):
        title = p.get("title", "?")
        if p.get("id") in ids:
            fail("panel id %r used twice" % p.get("id"))
        ids.add(p.get("id"))
        g = p.get("gridPos", {})
        if not all(k in g for k in ("h", "w", "x", "y")) or g["x"] + g["w"] > 24:
            fail("panel %r: bad gridPos %r" % (title, g))
        else:
            boxes.append((title, g))
        if p.get("type") == "row":
            continue
        if p.get("datasource") != want_ds:
            fail("panel %r: datasource is not ${DS_PROMETHEUS}" % title)
        if not p.get("targets"):
            fail("panel %r has no targets" % title)
        for tg in p.get("targets", []):
            if tg.get("datasource") != want_ds:
                fail("panel %r target %s: datasource is not ${DS_PROMETHEUS}" % (
                    title, tg.get("refId")))
            expr = tg.get("expr", "")
            ranges = re.findall(r"\[([^\]]*)\]", expr)
            if any(r != "$__rate_interval" for r in ranges):
                fail("panel %r: range %r is not [$__rate_interval]" % (title, ranges))
            if "vllm:" in expr and 'model_name="$model_name"' not in expr:
                fail("panel %r: a vllm: expression without model_name=\"$model_name\"" % title)
            targets.append((title, tg, p.get("type")))
    for i, (ta, a) in enumerate(boxes):
        for tb, b in boxes[i + 1:]:
            if a["x"] < b["x"] + b["w"] and b["x"] < a["x"] + a["w"] and \
                    a["y"] < b["y"] + b["h"] and b["y"] < a["y"] + a["h"]:
                fail("panels %r and %r overlap" % (ta, tb))
    return variables, targets


def substitute(expr, values):
    def repl(m):
        name = m.group(1) or m.group(2)
        if name not in values:
            raise TestFailure("expression uses an unknown variable $%s: %s" % (name, expr))
        return values[name]
    return re.sub(r"\$\{(\w+)(?::\w+)?\}|\$(\w+)", repl, expr)


# ----------------------------------------------------------------------------- alert rules

def split_top(expr, words=(), symbols=()):
    """Splits `expr` at operators outside parentheses, brackets, braces and strings."""
    parts, depth, start, i, quote = [], 0, 0, 0, None
    while i < len(expr):
        c = expr[i]
        if quote:
            if c == "\\":
                i += 2
                continue
            if c == quote:
                quote = None
        elif c in "\"'`":
            quote = c
        elif c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0:
            hit = None
            for s in symbols:
                if expr.startswith(s, i):
                    hit = s
                    break
            if hit is None:
                for w in words:
                    if re.match(r"(?<![\w:])%s(?![\w:])" % w, expr[i:]) and \
                            (i == 0 or not (expr[i - 1].isalnum() or expr[i - 1] in "_:")):
                        hit = w
                        break
            if hit:
                parts.append(expr[start:i].strip())
                i += len(hit)
                start = i
                continue
        i += 1
    parts.append(expr[start:].strip())
    return parts


def left_hand_sides(expr):
    """The operands before the threshold comparison of each `and`/`unless` clause."""
    out = []
    for clause in split_top(expr, words=("and", "unless", "or")):
        sides = split_top(clause, symbols=("==", "!=", ">=", "<=", ">", "<"))
        if len(sides) > 1:
            out.append(sides[0])
    return out


# ----------------------------------------------------------------------------- main

def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    kvforge, deploy = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    prometheus, promtool = shutil.which("prometheus"), shutil.which("promtool")
    if not prometheus or not promtool:
        print("SKIP: prometheus/promtool not installed (Debian package prometheus; "
              "scripts/install_deps.sh)")
        return SKIP
    shipped_cfg = os.path.join(deploy, "prometheus", "prometheus.yml")
    rules_path = os.path.join(deploy, "prometheus", "kvforge-alerts.yml")
    board_path = os.path.join(deploy, "grafana", "kvforge.json")
    alerts_unit = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                               "kvforge_alerts_test.yml")

    dl = Deadline(55)
    procs = []
    tmp = tempfile.mkdtemp(prefix="kvf-prom-")
    try:
        with open(board_path) as f:
            board = json.load(f)
        variables, targets = check_dashboard(board)

        run_promtool(promtool, ["check", "rules", rules_path], dl)
        run_promtool(promtool, ["check", "config", shipped_cfg], dl)
        run_promtool(promtool, ["test", "rules", alerts_unit], dl)

        srv = start_kvforge(kvforge, [
            "--served-model-name", MODEL,
            "--prefix-cache", "hash",                          # prefix caching
            "--kv-policy", "streaming", "--kv-budget", "48",   # eviction past 48 + 16 tokens
            "--kv-offload-ram", "16MiB", "--kv-offload-chunk", "16",  # a RAM offload tier
            "--spec-type", "ngram", "--num-speculative-tokens", "4",  # speculative decoding
        ], tmp, dl)
        procs.append(srv)
        port = int(srv.url.rsplit(":", 1)[1])
        instance = "127.0.0.1:%d" % port

        cfg_text = test_config(shipped_cfg, rules_path, port)
        with open(os.path.join(tmp, "generated.yml"), "w") as f:
            f.write(cfg_text)
        run_promtool(promtool, ["check", "config", os.path.join(tmp, "generated.yml")], dl)
        prom_proc, prom = start_prometheus(prometheus, cfg_text, tmp, dl)
        procs.append(prom_proc)

        def target_up():
            _, body = prom.api("/api/v1/targets", dl)
            for t in body.get("data", {}).get("activeTargets", []):
                if t.get("labels", {}).get("instance") == instance and t.get("health") == "up":
                    return t
            return None
        target = wait_for("the kvforge target to be scraped and up", dl, 15, target_up)
        if target["labels"].get("job") != "kvforge":
            fail("target job is %r, not kvforge" % target["labels"].get("job"))
        t_start = time.time()
        print("ok: target %s up (job %s)" % (instance, target["labels"].get("job")), flush=True)

        served = workload(srv.url, MODEL, dl)
        page = parse_metrics(http_get(srv.url + "/metrics", dl))
        generated = sum(v for _, _, v in page["kvforge_generation_tokens_total"].samples)
        print("ok: workload: %d requests served, %d tokens generated" % (served, generated),
              flush=True)

        def scraped_after_workload():
            _, body = prom.query('kvforge_generation_tokens_total{instance="%s"} >= %d' % (
                instance, generated), dl)
            return body.get("data", {}).get("result")
        wait_for("a scrape taken after the workload (kvforge_generation_tokens_total >= %d)"
                 % generated, dl, 15, scraped_after_workload)

        # Every rule of the file loaded and evaluated since then, without error.
        with open(rules_path) as f:
            want_alerts = re.findall(r"^\s*-\s*alert:\s*(\S+)", f.read(), re.M)
        since = time.time()

        def rules_evaluated():
            _, body = prom.api("/api/v1/rules", dl)
            rules = [r for g in body.get("data", {}).get("groups", []) for r in g["rules"]]
            names = [r["name"] for r in rules]
            if sorted(names) != sorted(want_alerts):
                return None
            for r in rules:
                ts = r.get("lastEvaluation", "")
                if r.get("health") != "ok" or not ts or ts.startswith("0001-"):
                    return None
            return rules if time.time() > since + 1.5 else None
        rules = wait_for("every alert rule to be loaded and evaluated (health ok)", dl, 15,
                         rules_evaluated)
        for r in rules:
            ann = r.get("annotations", {})
            if not ann.get("summary") or not ann.get("description"):
                fail("alert %s lacks a summary or description annotation" % r["name"])
            if r.get("lastError"):
                fail("alert %s: %s" % (r["name"], r["lastError"]))
        print("ok: %d alert rules loaded and evaluated" % len(rules), flush=True)

        t_end = time.time()
        values = {"__rate_interval": RATE_WINDOW, "__interval": "1s", "__range": "1m",
                  "__range_s": "60", "__interval_ms": "1000", "model_name": MODEL,
                  "instance": instance}
        for name in variables:
            if name not in values and name != "DS_PROMETHEUS":
                fail("dashboard variable $%s has no test value" % name)
        empty = []
        checked = 0
        for title, tg, ptype in targets:
            expr = substitute(tg["expr"], values)
            where = "panel %r %s" % (title, tg.get("refId"))
            _, body = prom.query(expr, dl)
            checked += 1
            if body.get("status") != "success":
                fail("%s: %s: %s" % (where, expr, body.get("error")))
                continue
            data = body["data"]
            if data.get("resultType") != "vector":
                fail("%s: result type %s, wanted vector: %s" % (where, data.get("resultType"),
                                                               expr))
            if not data.get("result"):
                if tg["expr"] in MAY_BE_EMPTY:
                    empty.append(title)
                else:
                    fail("%s: no series: %s" % (where, expr))
            if tg.get("range") and not tg.get("instant"):
                _, body = prom.query_range(expr, t_start - 2, t_end, dl)
                checked += 1
                if body.get("status") != "success":
                    fail("%s (range): %s: %s" % (where, expr, body.get("error")))
                elif body["data"].get("resultType") != "matrix" or not body["data"]["result"]:
                    if tg["expr"] not in MAY_BE_EMPTY:
                        fail("%s (range): %s result with %d series: %s" % (
                            where, body["data"].get("resultType"),
                            len(body["data"].get("result", [])), expr))
        print("checked: %d dashboard queries over %d targets (%d allowed empty)" % (
            checked, len(targets), len(empty)), flush=True)

        for r in rules:
            expr = r["query"]
            _, body = prom.query(expr, dl)
            if body.get("status") != "success" or body["data"].get("resultType") != "vector":
                fail("alert %s: %s -> %s %s" % (r["name"], expr, body.get("error"),
                                                body.get("data", {}).get("resultType")))
            lhs = left_hand_sides(expr)
            if not lhs:
                fail("alert %s: no threshold comparison found in %s" % (r["name"], expr))
            for side in lhs:
                _, body = prom.query(side, dl)
                if body.get("status") != "success":
                    fail("alert %s: %s: %s" % (r["name"], side, body.get("error")))
                elif body["data"].get("resultType") != "vector" or not body["data"]["result"]:
                    fail("alert %s: the left-hand side has no data: %s" % (r["name"], side))
        print("checked: %d alert expressions and their left-hand sides" % len(rules), flush=True)

        _, body = prom.api("/api/v1/alerts", dl)
        active = [a["labels"].get("alertname") for a in body.get("data", {}).get("alerts", [])]
        if active:
            fail("a healthy server raised alerts: %s" % ", ".join(active))

        if srv.stop() != 0:
            fail("kvforge serve exited %s on SIGTERM:\n%s" % (srv.p.returncode, srv.log_tail()))
    except TestFailure as e:
        fail(str(e))
    finally:
        for p in reversed(procs):
            p.stop()
        if failures:
            for p in procs:
                print("--- %s log (tail) ---\n%s" % (p.name, p.log_tail(2000)))
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
