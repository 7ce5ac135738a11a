"""Shared helpers of the deploy tests (Python 3 standard library only).

Starts `kvforge serve` on an ephemeral loopback port, sends a small OpenAI workload, reads the
Prometheus text page, and stops processes with bounded waits:

    with Deadline(50) as dl:
        srv = start_kvforge(kvforge, ["--served-model-name", "m"], tmp, dl)
        workload(srv.url, "m", dl)
        families = parse_metrics(http_get(srv.url + "/metrics", dl))
        srv.stop()
"""
import json
import os
import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.request


class TestFailure(Exception):
    """A check failed; the message says which and why."""


class Deadline:
    """The test's time budget: every wait is bounded by min(its own limit, what is left)."""

    def __init__(self, seconds):
        self.end = time.monotonic() + seconds

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False

    def left(self, cap=None):
        left = self.end - time.monotonic()
        if left <= 0:
            raise TestFailure("the test ran out of its time budget")
        return left if cap is None else min(left, cap)


def free_port():
    """A loopback TCP port that was free a moment ago (for programs that cannot take port 0)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Proc:
    """A child process whose stdout/stderr go to files; stop() is bounded and idempotent."""

    def __init__(self, name, argv, logdir):
        self.name = name
        self.argv = argv
        self.log_path = os.path.join(logdir, name + ".log")
        self._log = open(self.log_path, "wb")
        self.p = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT,
                                  stdin=subprocess.DEVNULL, start_new_session=True)

    def alive(self):
        return self.p.poll() is None

    def log_tail(self, n=3000):
        try:
            with open(self.log_path, "rb") as f:
                data = f.read()
            return data[-n:].decode("utf-8", "replace")
        except OSError:
            return ""

    def stop(self, grace=5.0):
        """SIGTERM, then SIGKILL after `grace` seconds. Returns the exit status."""
        if self.p.poll() is None:
            try:
                self.p.send_signal(signal.SIGTERM)
                self.p.wait(timeout=grace)
            except subprocess.TimeoutExpired:
                self.p.kill()
                self.p.wait(timeout=5)
        self._log.close()
        return self.p.returncode


class Kvforge(Proc):
    url = None


def start_kvforge(binary, extra_args, logdir, dl, name="kvforge"):
    """`kvforge serve --port 0` on 127.0.0.1; waits (bounded) for its listening line."""
    argv = [binary, "serve", "--host", "127.0.0.1", "--port", "0", "--threads", "1",
            "--no-webui"] + list(extra_args)
    srv = Kvforge(name, argv, logdir)
    limit = time.monotonic() + dl.left(30)
    while time.monotonic() < limit:
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", srv.log_tail(20000))
        if m:
            srv.url = m.group(1)
            return srv
        if not srv.alive():
            raise TestFailure("kvforge serve exited with %s before listening:\n%s\n%s" % (
                srv.p.returncode, " ".join(argv), srv.log_tail()))
        time.sleep(0.05)
    srv.stop()
    raise TestFailure("kvforge serve printed no 'listening on' line within 30 s:\n" +
                      srv.log_tail())


def http(method, url, dl, body=None, timeout=20, expect=200):
    """One request; returns (status, body bytes). A status other than `expect` is a failure."""
    data = None
    headers = {}
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=dl.left(timeout)) as r:
            status, payload = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, payload = e.code, e.read()
    except (urllib.error.URLError, OSError) as e:
        raise TestFailure("%s %s: %s" % (method, url, e)) from e
    if expect is not None and status != expect:
        raise TestFailure("%s %s: HTTP %d (wanted %d): %s" % (
            method, url, status, expect, payload[:500].decode("utf-8", "replace")))
    return status, payload


def http_get(url, dl, timeout=20):
    return http("GET", url, dl, timeout=timeout)[1].decode("utf-8")


def post_json(url, body, dl, expect=200):
    status, payload = http("POST", url, dl, body=body, expect=expect)
    return json.loads(payload) if payload else None


def post_stream(url, body, dl):
    """A streaming request: returns the parsed SSE `data:` events up to [DONE]."""
    _, payload = http("POST", url, dl, body=body)
    events = []
    done = False
    for line in payload.decode("utf-8").splitlines():
        if not line.startswith("data: "):
            continue
        data = line[len("data: "):]
        if data == "[DONE]":
            done = True
            break
        events.append(json.loads(data))
    if not done:
        raise TestFailure("stream from %s ended without [DONE]" % url)
    for e in events:
        if "error" in e:
            raise TestFailure("stream from %s carried an error: %s" % (url, e["error"]))
    return events


STORY = ("Once upon a time there was a little girl named Lily. She liked to play in the park "
         "with her mom. One day")


def workload(url, model, dl):
    """A dozen completions and chats. Prompts repeat (prefix-cache hits), some requests stream,
    long ones pass the server's KV eviction budget and one asks for another policy, one stops
    on a stop string (finish_reason stop), the rest end on max_tokens (length), one has n = 2,
    and one is a deliberate 400. Returns the number of requests that got a 200."""
    ok = 0
    comp = url + "/v1/completions"
    chat = url + "/v1/chat/completions"

    def check_choices(r, n=1):
        if not isinstance(r, dict) or len(r.get("choices", [])) != n:
            raise TestFailure("unexpected completion body: %r" % (r,))

    # The same prompt four times: the later ones find its first block in the prefix cache.
    for _ in range(4):
        r = post_json(comp, {"model": model, "prompt": STORY, "max_tokens": 8,
                             "temperature": 0}, dl)
        check_choices(r)
        ok += 1
    # Streamed chats sharing a system prompt.
    for question in ("Tell me a story", "Tell me a story", "What did Lily do?"):
        events = post_stream(chat, {"model": model, "stream": True,
                                    "stream_options": {"include_usage": True},
                                    "messages": [{"role": "system", "content": STORY},
                                                 {"role": "user", "content": question}],
                                    "max_tokens": 12}, dl)
        if not any(e.get("usage") for e in events):
            raise TestFailure("a streamed chat sent no usage chunk")
        ok += 1
    # A streamed completion with a repetitive prompt (n-gram drafts).
    post_stream(comp, {"model": model, "stream": True, "temperature": 0, "max_tokens": 24,
                       "prompt": "the cat sat on the mat. the cat sat on the mat. the cat sat on"},
                dl)
    ok += 1
    # Long prompts: past the server's --kv-budget, and one with a request policy of its own.
    long_prompt = " ".join([STORY] * 3)
    r = post_json(comp, {"model": model, "prompt": long_prompt, "max_tokens": 40,
                         "temperature": 0}, dl)
    check_choices(r)
    ok += 1
    r = post_json(comp, {"model": model, "prompt": long_prompt, "max_tokens": 40,
                         "temperature": 0, "kv_policy": "h2o", "kv_budget": 32}, dl)
    check_choices(r)
    ok += 1
    # n = 2, ending on a stop string.
    r = post_json(comp, {"model": model, "prompt": "Once upon a time", "max_tokens": 40,
                         "temperature": 0, "stop": ["."], "n": 2}, dl)
    check_choices(r, 2)
    ok += 1
    # A chat without streaming.
    r = post_json(chat, {"model": model, "max_tokens": 8,
                         "messages": [{"role": "user", "content": "Hi"}]}, dl)
    check_choices(r)
    ok += 1
    # A deliberate 400 (kvforge_http_requests_total{code="400"}).
    post_json(comp, {"model": model, "prompt": "x", "max_tokens": -1}, dl, expect=400)
    return ok


_SAMPLE = re.compile(r'^([a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(.*)\})?\s+(\S+)(?:\s+\d+)?$')
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"\s*,?')


class Family:
    def __init__(self, name):
        self.name = name
        self.type = None
        self.samples = []  # (sample name, labels dict, value)


def parse_metrics(text):
    """Prometheus text format 0.0.4 -> {family name: Family}. Samples are attached to the
    family whose # TYPE precedes them (histogram _bucket/_sum/_count included)."""
    families = {}
    current = None
    for line in text.splitlines():
        if not line.strip():
            continue
        if line.startswith("#"):
            parts = line.split(None, 3)
            if len(parts) >= 4 and parts[1] == "TYPE":
                fam = families.setdefault(parts[2], Family(parts[2]))
                if fam.type is not None:
                    raise TestFailure("# TYPE %s given twice" % parts[2])
                fam.type = parts[3].strip()
                current = fam
            continue
        m = _SAMPLE.match(line)
        if not m:
            raise TestFailure("unparsable /metrics line: %r" % line)
        name, label_text, value = m.group(1), m.group(2) or "", m.group(3)
        labels = {}
        pos = 0
        while pos < len(label_text):
            lm = _LABEL.match(label_text, pos)
            if not lm:
                raise TestFailure("bad labels in /metrics line: %r" % line)
            labels[lm.group(1)] = lm.group(2)
            pos = lm.end()
        base = name
        if current is not None and name != current.name:
            for suffix in ("_bucket", "_sum", "_count"):
                if current.type == "histogram" and name == current.name + suffix:
                    base = current.name
        fam = families.get(base)
        if fam is None:
            fam = families.setdefault(base, Family(base))  # untyped sample
        fam.samples.append((name, labels, float(value)))
    return families
