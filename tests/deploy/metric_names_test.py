#!/usr/bin/env python3
"""docs/server.md's vLLM-compatible metric names against a running `kvforge serve`.

Usage: metric_names_test.py KVFORGE DOCS_SERVER_MD

Reads the two tables of the "vLLM-compatible metrics" section: the exported names (name, type,
labels, kvforge quantity) and the vLLM names kvforge does not export. Starts `kvforge serve`
(loopback, ephemeral port, a served model name with a slash as Hugging Face ids have), sends a
small workload, then checks on GET /metrics that:
- each exported name has `# TYPE <name> <type>` as documented, samples (for a histogram:
  _bucket with le, _sum, _count), the model_name label equal to the served name on every sample,
  every documented label on some sample and no undocumented one;
- where the kvforge column says `= kvforge_x`, kvforge_x exists with the same type and value
  (histograms: the same _count and _sum; a labelled series: summed over its samples);
- no vllm: family is exported that the table does not list;
- the names of the second table are absent (labels: on no vllm: sample).
Exits 1 on any failure.
"""
import math
import os
import re
import shutil
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from kvf_serve import (Deadline, TestFailure, http_get, parse_metrics,  # noqa: E402
                       start_kvforge, workload)

MODEL = "test-org/kvforge-model"
SECTION = "vLLM-compatible metrics"
TYPES = ("gauge", "counter", "histogram")

failures = []


def fail(msg):
    failures.append(msg)
    print("FAIL: " + msg, flush=True)


def read_tables(path):
    """The section's markdown tables, each a list of rows (lists of cell strings)."""
    with open(path, encoding="utf-8") as f:
        lines = f.read().splitlines()
    start = None
    for i, line in enumerate(lines):
        if re.match(r"^#+\s+%s\s*$" % re.escape(SECTION), line):
            start = i + 1
            break
    if start is None:
        raise TestFailure("%s has no section %r" % (path, SECTION))
    tables, current = [], None
    for line in lines[start:]:
        if re.match(r"^#{1,2}\s", line):
            break
        if line.startswith("|"):
            cells = [c.strip() for c in line.strip().strip("|").split("|")]
            if current is None:
                current = []
                tables.append(current)
            if all(re.fullmatch(r":?-+:?", c) for c in cells):
                continue
            current.append(cells)
        else:
            current = None
    return tables


def ticked(cell):
    return re.findall(r"`([^`]+)`", cell)


def parse_doc(path):
    tables = read_tables(path)
    if len(tables) < 2:
        raise TestFailure("section %r: wanted two tables, found %d" % (SECTION, len(tables)))
    exported, absent = [], []
    head = [c.lower() for c in tables[0][0]]
    if head[:4] != ["name", "type", "labels", "kvforge quantity"]:
        raise TestFailure("first table's header is %r" % (tables[0][0],))
    for row in tables[0][1:]:
        if len(row) != 4:
            raise TestFailure("row with %d cells: %r" % (len(row), row))
        names = ticked(row[0])
        if len(names) != 1 or not names[0].startswith("vllm:"):
            raise TestFailure("name cell %r: wanted one `vllm:...` name" % row[0])
        if row[1] not in TYPES:
            raise TestFailure("%s: type %r" % (names[0], row[1]))
        same = None
        m = re.search(r"(?:^|: )=\s*`(kvforge_[a-z0-9_]+)`", row[3])
        if m:
            same = m.group(1)
        exported.append({"name": names[0], "type": row[1], "labels": ticked(row[2]),
                         "same": same})
    if [c.lower() for c in tables[1][0]][:2] != ["name", "why"]:
        raise TestFailure("second table's header is %r" % (tables[1][0],))
    for row in tables[1][1:]:
        names = ticked(row[0])
        if not names or not row[1]:
            raise TestFailure("second table: row %r needs names and a reason" % (row,))
        absent.extend(names)
    return exported, absent


def sample_names(fam_type, name):
    if fam_type == "histogram":
        return {name + "_bucket", name + "_sum", name + "_count"}
    return {name}


def values_of(fam, sample):
    return sum(v for n, _, v in fam.samples if n == sample)


def close(a, b):
    return a == b or (math.isfinite(a) and math.isfinite(b) and
                      abs(a - b) <= 1e-9 * max(1.0, abs(a), abs(b)))


def check_page(families, exported, absent, final):
    """Returns the equality mismatches (retried by the caller); reports everything else when
    `final` (the last read)."""
    problems = []

    def report(msg):
        if final:
            fail(msg)

    listed = {e["name"] for e in exported}
    for e in exported:
        name, typ = e["name"], e["type"]
        fam = families.get(name)
        if fam is None:
            report("%s: not exported (no # TYPE %s)" % (name, name))
            continue
        if fam.type != typ:
            report("%s: # TYPE says %s, docs/server.md says %s" % (name, fam.type, typ))
        have = {n for n, _, _ in fam.samples}
        missing = sample_names(typ, name) - have
        if missing:
            report("%s: no %s samples" % (name, ", ".join(sorted(missing))))
        allowed = set(e["labels"]) | ({"le"} if typ == "histogram" else set())
        if "model_name" not in e["labels"]:
            report("%s: docs/server.md lists no model_name label" % name)
        seen = set()
        for n, labels, _ in fam.samples:
            if labels.get("model_name") != MODEL:
                report("%s: sample %s%r has model_name %r, wanted %r" % (
                    name, n, labels, labels.get("model_name"), MODEL))
            extra = set(labels) - allowed
            if extra:
                report("%s: sample %s has undocumented labels %s" % (name, n, sorted(extra)))
            if n == name + "_bucket" and "le" not in labels:
                report("%s: a _bucket sample without le" % name)
            seen |= set(labels)
        for label in e["labels"]:
            if label not in seen:
                report("%s: no sample carries the documented label %s" % (name, label))
        if e["same"]:
            kf = families.get(e["same"])
            if kf is None:
                report("%s: its kvforge twin %s is not exported" % (name, e["same"]))
                continue
            if kf.type != fam.type:
                report("%s is a %s, %s a %s" % (name, fam.type, e["same"], kf.type))
            parts = ["_count", "_sum"] if typ == "histogram" else [""]
            for p in parts:
                a, b = values_of(fam, name + p), values_of(kf, e["same"] + p)
                if not close(a, b):
                    problems.append("%s%s = %r but %s%s = %r" % (name, p, a, e["same"], p, b))
    for fname, fam in families.items():
        if fname.startswith("vllm:") and fname not in listed:
            report("%s is exported but not listed in docs/server.md's %r table" % (
                fname, SECTION))
    for a in absent:
        if a.startswith("vllm:"):
            hits = [f for f in families if f == a or any(
                f == a + s for s in ("_total", "_bucket", "_sum", "_count", "_created"))]
            hits += [n for fam in families.values() for n, _, _ in fam.samples
                     if n == a or n.startswith(a + "_")]
            if hits:
                report("%s is listed as not exported, but /metrics has %s" % (a, sorted(set(hits))))
        else:
            carriers = sorted({f for f, fam in families.items() if f.startswith("vllm:")
                               for _, labels, _ in fam.samples if a in labels})
            if carriers:
                report("label %s is listed as not exported, but %s carry it" % (
                    a, ", ".join(carriers)))
    if final:
        for p in problems:
            fail(p)
    return problems


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    kvforge, doc = os.path.abspath(argv[1]), os.path.abspath(argv[2])
    dl = Deadline(50)
    tmp = tempfile.mkdtemp(prefix="kvf-names-")
    srv = None
    try:
        exported, absent = parse_doc(doc)
        print("docs/server.md: %d exported vllm: names, %d not exported" % (
            len(exported), len(absent)), flush=True)
        srv = start_kvforge(kvforge, ["--served-model-name", MODEL, "--kv-policy", "streaming",
                                      "--kv-budget", "48", "--spec-type", "ngram"], tmp, dl)
        workload(srv.url, MODEL, dl)
        # The equalities hold once the server is idle; poll briefly for the last updates.
        limit = time.monotonic() + dl.left(10)
        while True:
            families = parse_metrics(http_get(srv.url + "/metrics", dl))
            final = time.monotonic() >= limit
            if not check_page(families, exported, absent, final=False) or final:
                break
            time.sleep(0.2)
        check_page(families, exported, absent, final=True)
        print("checked %d vllm: families on a live server" % sum(
            1 for f in families if f.startswith("vllm:")), flush=True)
        if srv.stop() != 0:
            fail("kvforge serve exited %s on SIGTERM" % srv.p.returncode)
    except TestFailure as e:
        fail(str(e))
    finally:
        if srv is not None:
            srv.stop()
            if failures:
                print("--- kvforge log (tail) ---\n" + srv.log_tail(2000))
        shutil.rmtree(tmp, ignore_errors=True)
    if failures:
        print("%d failure(s)" % len(failures))
        return 1
    print("PASS")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
