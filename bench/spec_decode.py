#!/usr/bin/env python3
"""Speculative decoding, kvforge against llama.cpp's llama-server, in one run: decode tokens/s of
plain decode, n-gram prompt lookup and a draft model, and the draft acceptance rate, the engines
alternating and every configuration repeated --rounds times.

  bench/spec_decode.py KVFORGE PEER_DIR [--model PATH|110m|1b|induction] [--draft-model PATH|tiny]
      [--workloads copy,repeat,stories] [--modes plain,ngram,draft] [--engines kvforge,llama]
      [--rounds 3] [--tokens 128] [--k 4] [--lookup-max 4] [--lookup-min 2]
      [--peer-ngram ngram-simple:2,ngram-simple:4] [--copy-words 200] [--stop-at-eos] [--json OUT]

Engines, both greedy on 2 threads, decoding the same prompt from the same GGUF:
  kvforge    `KVFORGE run --model M --prompt TEXT --max-tokens T --temperature 0 --threads 2 --json`,
             a fresh process per run; plain, or with `--speculative-method ngram
             --num-speculative-tokens K --prompt-lookup-max 4 --prompt-lookup-min 2`, or with
             `--speculative-model DRAFT --num-speculative-tokens K`. Its JSON line gives
             decode_tokens_per_s and spec_draft_tokens / spec_accepted_tokens.
  llama.cpp  `PEER_DIR/llama-server -m M -t 2 -c 2048 -np 1 --temp 0` on a free loopback port, one
             server per (round, mode), one POST /completion per workload ({"prompt", "n_predict": T,
             "temperature": 0, "cache_prompt": false}); its "timings" give predicted_per_second and
             draft_n / draft_n_accepted. n-gram: `--spec-type ngram-simple
             --spec-ngram-simple-size-n N --spec-ngram-simple-size-m K --spec-draft-n-max K`, one
             row per TYPE:N of --peer-ngram (kvforge tries n = 4 down to 2, ngram-simple one fixed
             n, so the default brackets it with n = 2 and n = 4; the other types the build offers:
             ngram-map-k, ngram-map-k4v, ngram-mod, ngram-cache). Draft model: `--spec-type
             draft-simple -md DRAFT --spec-draft-n-max K --spec-draft-n-min 0
             --spec-draft-p-min 0` (-md alone drafts nothing in this build).
Each round runs the modes in turn (plain, ngram, draft), both engines back to back within a mode,
the engine order flipping every round; a speculative run's ratio is over its engine's plain run of
the same round and workload, and the table gives the median of those ratios. A configuration that
fails on a workload (say, a flag the kvforge build lacks) is reported with its stderr tail,
skipped in later rounds and marked in the table; the script then exits 1. "output = plain"
counts the rounds whose generated tokens equal the same engine's plain decode (greedy
speculation should not change them).

Workloads (prompt text; the passage is the first paragraphs of ../shared/models/
tinystories-h64-heldout.txt, TinyStories text tinystories-h64.gguf never trained on, up to
--copy-words words, then paragraphs dropped from its end until the prompt (counted by `kvforge
tokenize`) and T tokens fit the model's context and -c: 512 tokens for the TinyStories models):
  copy     the passage, then "Repeat the story above word for word:" and its first sentence
  repeat   the passage twice (synthetic copy: lookup always finds the prompt's own text; whether
           the output copies it is up to the model: the `induction` shape does, random weights
           do not)
  stories  "Once upon a time, there was a little girl named Lily." (--stories-prompt)
Models: --model is a GGUF path (default ../shared/models/tinystories-h64.gguf, with
tests/data/models/stories260K.gguf, the same 512-token vocabulary, as the draft) or a shape that
`kvforge make-model` writes with --vocab-from's tokenizer, random f16 weights, cached in
$TMPDIR/kvforge-spec-bench (delete it to rewrite): 110m (768 x 12 layers), 1b (2048 x 16, 8 KV
heads), induction (the hand-set copy model), tiny (128 x 2: the default draft for a shape target).
Generation ignores end-of-sequence (both engines emit exactly T tokens) unless --stop-at-eos.
"""
import argparse
import json
import os
import re
import shlex
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request

from bench_support import free_port, write_json

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHARED_MODELS = os.path.join(REPO, "..", "shared", "models")

SHAPES = {  # the comparison grid's two shapes (compare_llamacpp.py) and a small random draft
    "110m": dict(dim=768, layers=12, heads=12, kv_heads=12, ffn=2048),
    "1b": dict(dim=2048, layers=16, heads=32, kv_heads=8, ffn=8192),
    "tiny": dict(dim=128, layers=2, heads=2, kv_heads=2, ffn=352),
}
SHAPE_ALIASES = {"110M": "110m", "1.1b": "1b", "1.1B": "1b", "1B": "1b"}
NGRAM_TYPES = ("ngram-simple", "ngram-map-k", "ngram-map-k4v", "ngram-mod", "ngram-cache")
MODES = ("plain", "ngram", "draft")


class RunError(Exception):
    """One engine run that failed; the message says what ran and ends with its stderr tail."""


def tail(text, n=1500):
    text = (text or "").strip()
    return text if len(text) <= n else "..." + text[-n:]


def shown(cmd):
    """The command line, the prompt's text replaced by its length."""
    out = []
    for i, a in enumerate(cmd):
        out.append(f"<{len(a)} chars>" if i and cmd[i - 1] == "--prompt" else shlex.quote(a))
    return " ".join(out)


def cpu_model():
    try:
        info = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
    except OSError:
        info = ""
    fields = dict(l.split(":", 1) for l in info.splitlines() if ":" in l)
    get = lambda k: fields.get(k, "?").strip()
    if not info:
        with open("/proc/cpuinfo") as f:
            names = [l.split(":", 1)[1].strip() for l in f if l.startswith("model name")]
        return f"{names[0] if names else '?'}, {len(names)} CPUs (no lscpu)"
    return (f"{get('Model name')} (family {get('CPU family')}, model {get('Model')}), "
            f"{get('CPU(s)')} CPUs")


# --- models -----------------------------------------------------------------------------------

def model_path(kvf, name, vocab, dtype):
    """`name` itself when it is a file, else the cached random-weight GGUF of that shape."""
    shape = SHAPE_ALIASES.get(name, name)
    if shape not in SHAPES and shape != "induction":
        if not os.path.isfile(name):
            raise SystemExit(f"no model file {name!r} and no such shape "
                             f"(shapes: {', '.join(list(SHAPES) + ['induction'])})")
        return os.path.abspath(name)
    cache = os.path.join(tempfile.gettempdir(), "kvforge-spec-bench")
    os.makedirs(cache, exist_ok=True)
    out = os.path.join(cache, f"{shape}-{dtype}-{os.path.basename(vocab)}")
    if not out.endswith(".gguf"):
        out += ".gguf"
    if os.path.exists(out):
        return out
    cmd = [kvf, "make-model"]
    if shape == "induction":
        cmd += ["--induction"]
    else:
        s = SHAPES[shape]
        cmd += ["--dim", str(s["dim"]), "--layers", str(s["layers"]), "--heads", str(s["heads"]),
                "--kv-heads", str(s["kv_heads"]), "--ffn", str(s["ffn"])]
    part = out + ".part"
    cmd += ["--dtype", dtype, "--ctx", "4096", "--seed", "1", "--vocab-from", vocab, "--out", part]
    print(f"writing {out}: {shown(cmd)}", flush=True)
    p = subprocess.run(cmd, capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit(f"kvforge make-model failed ({p.returncode}): {shown(cmd)}\n"
                         + tail(p.stderr))
    os.replace(part, out)
    return out


# --- workloads --------------------------------------------------------------------------------

def paragraphs(path, words):
    """Whole paragraphs from the start of `path` (blank-line separated), up to `words` words."""
    with open(path, encoding="utf-8") as f:
        paras = [" ".join(p.split()) for p in f.read().split("\n\n") if p.strip()]
    out, n = [], 0
    for p in paras:
        if out and n + len(p.split()) > words:
            break
        out.append(p)
        n += len(p.split())
    return out


def build_prompt(workload, paras, a):
    text = "\n\n".join(paras)
    if workload == "copy":
        first = re.match(r".*?[.!?](?=\s|$)", text, re.S)
        first = first.group(0) if first else paras[0]
        return f"{text}\n\nRepeat the story above word for word:\n{first}"
    if workload == "repeat":
        return f"{text}\n\n{text}"
    return a.stories_prompt


def prompt_tokens(a, text):
    """The prompt's token count (BOS included), by `kvforge tokenize` with the model's vocab."""
    p = subprocess.run([a.kvforge, "tokenize", "--json", "--model", a.model_file], input=text,
                       capture_output=True, text=True)
    if p.returncode != 0:
        raise SystemExit("kvforge tokenize failed:\n" + tail(p.stderr))
    return len(json.loads(p.stdout))


def model_context(a):
    p = subprocess.run([a.kvforge, "info", "--json", "--model", a.model_file],
                       capture_output=True, text=True)
    try:
        return int(json.loads(p.stdout)["context_length"])
    except (ValueError, KeyError, TypeError):
        raise SystemExit("kvforge info failed:\n" + tail(p.stderr))


def workloads(a):
    """{workload: prompt}; copy and repeat drop the passage's last paragraphs until the prompt
    and --tokens fit the model's context (and llama-server's -c)."""
    room = min(model_context(a), a.ctx) - a.tokens
    prompts = {}
    for w in a.workloads:
        if w not in ("copy", "repeat", "stories"):
            raise SystemExit(f"unknown workload {w!r} (copy, repeat, stories)")
        paras = paragraphs(a.text, a.copy_words)
        prompt = build_prompt(w, paras, a)
        n = prompt_tokens(a, prompt)
        while n > room and w != "stories" and len(paras) > 1:
            paras.pop()
            prompt = build_prompt(w, paras, a)
            n = prompt_tokens(a, prompt)
        if n > room:
            raise SystemExit(f"{w}: the prompt ({n} tokens) and --tokens {a.tokens} do not fit "
                             f"the context ({room + a.tokens})")
        words = len(" ".join(paras).split())
        print(f"workload {w}: {n} prompt tokens" + (
            f", passage {words} words ({len(paras)} paragraphs)" if w != "stories" else ""))
        prompts[w] = prompt
    return prompts


# --- kvforge ----------------------------------------------------------------------------------

KERNELS = set()  # the kernel table kvforge reported ("avx512", ...)


def kvforge_run(a, cfg, prompt):
    cmd = [a.kvforge, "run", "--model", a.model_file, "--prompt", prompt, "--max-tokens",
           str(a.tokens), "--temperature", "0", "--threads", str(a.threads), "--json"]
    if not a.stop_at_eos:
        cmd += ["--ignore-eos"]
    cmd += cfg["flags"]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=a.run_timeout)
    except subprocess.TimeoutExpired as e:
        raise RunError(f"kvforge run timed out after {a.run_timeout} s: {shown(cmd)}\n"
                       + tail(e.stderr.decode() if isinstance(e.stderr, bytes) else e.stderr))
    if p.returncode != 0:
        raise RunError(f"kvforge run exited {p.returncode}: {shown(cmd)}\nstderr:\n"
                       + tail(p.stderr))
    line = next((l for l in p.stdout.splitlines() if l.startswith('{"prompt_tokens"')), None)
    if line is None:
        raise RunError(f"kvforge run printed no JSON line: {shown(cmd)}\nstdout:\n"
                       + tail(p.stdout) + "\nstderr:\n" + tail(p.stderr))
    out = json.loads(line)
    m = re.search(r"; (\w+) kernels", p.stderr)
    if m:
        KERNELS.add(m.group(1))
    pt = out.get("prompt_tokens", [])
    return dict(tps=float(out["decode_tokens_per_s"]), tokens=list(out.get("tokens", [])),
                gen=len(out.get("tokens", [])), prompt_n=len(pt) if isinstance(pt, list) else pt,
                # spec_draft_tokens as built (spec_drafted_tokens as first planned)
                drafted=out.get("spec_draft_tokens", out.get("spec_drafted_tokens", 0)),
                accepted=out.get("spec_accepted_tokens", 0),
                verify_steps=out.get("spec_verify_steps"))


# --- llama-server -----------------------------------------------------------------------------

class LlamaServer:
    """One llama-server on a free loopback port, its log under `tmp`; stop() ends it."""

    def __init__(self, a, flags, tmp):
        exe = os.path.join(a.peer, "llama-server")
        if not os.access(exe, os.X_OK):
            raise SystemExit(f"no llama-server in {a.peer}")
        self.proc = None
        for attempt in range(3):  # a port taken between the probe and the bind: try another
            self.port = free_port()
            self.log = os.path.join(tmp, f"llama-server-{self.port}.log")
            self.cmd = [exe, "-m", a.model_file, "-t", str(a.threads), "-c", str(a.ctx),
                        "-np", "1", "--temp", "0", "--host", "127.0.0.1", "--port",
                        str(self.port), *flags]
            with open(self.log, "w") as f:
                self.proc = subprocess.Popen(self.cmd, stdout=f, stderr=subprocess.STDOUT)
            deadline = time.time() + a.server_timeout
            while time.time() < deadline and self.proc.poll() is None:
                try:
                    with urllib.request.urlopen(self.url("/health"), timeout=2) as r:
                        if r.status == 200:
                            self.meta = self._meta()
                            return
                except (urllib.error.URLError, ConnectionError, OSError):
                    pass
                time.sleep(0.2)
            rc = self.proc.poll()
            self.stop()
            log = tail(open(self.log, errors="replace").read())
            if rc is None:
                raise RunError(f"llama-server not healthy after {a.server_timeout} s: "
                               f"{shown(self.cmd)}\nlog:\n{log}")
            if "bind" not in log.lower() or attempt == 2:
                raise RunError(f"llama-server exited {rc} before /health answered: "
                               f"{shown(self.cmd)}\nlog:\n{log}")

    def url(self, path):
        return f"http://127.0.0.1:{self.port}{path}"

    def _meta(self):
        try:
            with urllib.request.urlopen(self.url("/v1/models"), timeout=10) as r:
                return json.load(r)["data"][0].get("meta", {})
        except (urllib.error.URLError, OSError, KeyError, IndexError, ValueError):
            return {}

    def complete(self, a, prompt, spec):
        body = dict(prompt=prompt, n_predict=a.tokens, temperature=0, cache_prompt=False,
                    ignore_eos=not a.stop_at_eos, return_tokens=True)
        req = urllib.request.Request(self.url("/completion"), data=json.dumps(body).encode(),
                                     headers={"Content-Type": "application/json"})
        try:
            with urllib.request.urlopen(req, timeout=a.run_timeout) as r:
                out = json.load(r)
        except urllib.error.HTTPError as e:
            raise RunError(f"POST /completion: HTTP {e.code} {tail(e.read().decode(errors='replace'))}"
                           f"\nserver: {shown(self.cmd)}\nlog:\n{tail(open(self.log, errors='replace').read())}")
        except (urllib.error.URLError, OSError) as e:
            raise RunError(f"POST /completion failed: {e}\nserver: {shown(self.cmd)}\nlog:\n"
                           + tail(open(self.log, errors="replace").read()))
        t = out.get("timings")
        if not t or "predicted_per_second" not in t:
            raise RunError(f"no timings.predicted_per_second in the reply: {tail(json.dumps(out))}")
        return dict(tps=float(t["predicted_per_second"]), tokens=list(out.get("tokens") or []),
                    text=out.get("content", ""), gen=t.get("predicted_n", out.get("tokens_predicted")),
                    prompt_n=t.get("prompt_n", out.get("tokens_evaluated")),
                    # no draft_n in the timings of a speculative server: nothing was drafted
                    drafted=t.get("draft_n", 0 if spec else None),
                    accepted=t.get("draft_n_accepted", 0 if spec else None))

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# --- configurations ---------------------------------------------------------------------------

def peer_ngram_flags(item, k):
    kind, _, n = item.partition(":")
    if kind not in NGRAM_TYPES:
        raise SystemExit(f"--peer-ngram: unknown type {kind!r} ({', '.join(NGRAM_TYPES)})")
    n = int(n) if n else 3
    flags = ["--spec-type", kind, "--spec-draft-n-max", str(k)]
    if kind == "ngram-mod":
        flags += ["--spec-ngram-mod-n-match", str(n), "--spec-ngram-mod-n-min", "1",
                  "--spec-ngram-mod-n-max", str(k)]
        label = f"ngram-mod n={n} max={k}"
    elif kind == "ngram-cache":
        label = f"ngram-cache max={k}"
    else:
        opt = "--spec-" + kind
        flags += [opt + "-size-n", str(n), opt + "-size-m", str(k)]
        label = f"{kind} n={n} m={k}"
    return flags, label


def configs(a):
    """Per mode, the (engine, config) pairs: {engine, mode, label, flags}."""
    out = {m: [] for m in a.modes}
    dname = os.path.basename(a.draft_file) if a.draft_file else ""
    for mode in a.modes:
        if "kvforge" in a.engines:
            if mode == "plain":
                c = dict(label="-", flags=[])
            elif mode == "ngram":
                c = dict(label=f"K={a.k}, lookup n={a.lookup_max}..{a.lookup_min}",
                         flags=["--speculative-method", "ngram", "--num-speculative-tokens",
                                str(a.k), "--prompt-lookup-max", str(a.lookup_max),
                                "--prompt-lookup-min", str(a.lookup_min)])
            else:
                c = dict(label=f"{dname} K={a.k}",
                         flags=["--speculative-model", a.draft_file, "--num-speculative-tokens",
                                str(a.k)])
            out[mode].append(dict(engine="kvforge", mode=mode, **c))
        if "llama" in a.engines:
            if mode == "plain":
                out[mode].append(dict(engine="llama.cpp", mode=mode, label="-", flags=[]))
            elif mode == "ngram":
                for item in a.peer_ngram:
                    flags, label = peer_ngram_flags(item, a.k)
                    out[mode].append(dict(engine="llama.cpp", mode=mode, label=label, flags=flags))
            else:
                out[mode].append(dict(engine="llama.cpp", mode=mode, label=f"{dname} max={a.k}",
                                      flags=["--spec-type", "draft-simple", "-md", a.draft_file,
                                             "--spec-draft-n-max", str(a.k),
                                             "--spec-draft-n-min", "0", "--spec-draft-p-min", "0"]))
    return out


def key(c):
    return (c["engine"], c["mode"], c["label"])


# --- the report -------------------------------------------------------------------------------

def fmt_rate(acc, dr):
    if dr is None:
        return "-"
    return f"{acc / dr:.2f}" if dr else "0 drafted"


def report(a, cfgs, prompts, results, failures):
    for w in prompts:
        print(f"\n### {w}\n")
        pn = {}
        for c in (c for m in a.modes for c in cfgs[m]):
            for r in results.get((w, key(c)), []):
                if r:
                    pn.setdefault(c["engine"], r["prompt_n"])
        plains = [results.get((w, key(c)), []) for c in cfgs.get("plain", [])]
        same = ""
        if len(plains) == 2:
            pairs = [(x, y) for x, y in zip(*plains) if x and y]
            same = (f"; kvforge's plain output = llama.cpp's: "
                    f"{sum(x['tokens'] == y['tokens'] for x, y in pairs)}/{len(pairs)} rounds")
        print("prompt tokens: " + ", ".join(f"{e} {n}" for e, n in pn.items())
              + f"; {a.tokens} tokens generated per run{same}\n")
        print("| engine | mode | config | tokens/s (median) | vs plain (median) | acceptance "
              "| tokens/s per round | vs plain per round | accepted/drafted per round "
              "| output = plain |")
        print("|---|---|---|---:|---:|---:|---|---|---|---|")
        for mode in a.modes:
            for c in cfgs[mode]:
                runs = results.get((w, key(c)), [])
                base = next((results.get((w, key(b)), []) for b in cfgs.get("plain", [])
                             if b["engine"] == c["engine"]), [])
                fail = failures.get((w, key(c)))
                if not any(runs):
                    msg = fail.splitlines()[0][:80] if fail else "not run"
                    print(f"| {c['engine']} | {mode} | {c['label']} | failed: {msg} "
                          "| | | | | | |")
                    continue
                tps = [r["tps"] for r in runs if r]
                ratios = [r["tps"] / b["tps"] for r, b in zip(runs, base) if r and b]
                same = [(r["tokens"] or r.get("text")) == (b["tokens"] or b.get("text"))
                        for r, b in zip(runs, base) if r and b]
                dr = [r["drafted"] for r in runs if r and r["drafted"] is not None]
                acc = [r["accepted"] or 0 for r in runs if r and r["drafted"] is not None]
                cell_acc = "-" if mode == "plain" or not dr else fmt_rate(sum(acc), sum(dr))
                per_acc = "-" if mode == "plain" or not dr else " / ".join(
                    f"{x}/{y}" for x, y in zip(acc, dr))
                ratio = "-" if mode == "plain" or not ratios else f"{statistics.median(ratios):.2f}x"
                per_ratio = "-" if mode == "plain" else " / ".join(f"{x:.2f}" for x in ratios)
                same_cell = "-" if mode == "plain" else f"{sum(same)}/{len(same)}"
                note = " (failed in a later round)" if fail else ""
                print(f"| {c['engine']} | {mode} | {c['label']} | {statistics.median(tps):.1f}{note} "
                      f"| {ratio} | {cell_acc} | {' / '.join('%.1f' % x for x in tps)} "
                      f"| {per_ratio} | {per_acc} | {same_cell} |")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("kvforge")
    ap.add_argument("peer", help="llama.cpp build folder with llama-server")
    ap.add_argument("--model", default=os.path.join(SHARED_MODELS, "tinystories-h64.gguf"),
                    help="GGUF path or shape (110m, 1b, induction, tiny)")
    ap.add_argument("--draft-model", default=None,
                    help="GGUF path or shape (default: tests/data/models/stories260K.gguf for a "
                         "file target, the tiny shape for a shape target)")
    ap.add_argument("--vocab-from", default=os.path.join(
        REPO, "tests/data/tokenizer-tests/ggml-vocab-llama-spm.gguf"))
    ap.add_argument("--dtype", default="f16", help="weights of the models the script writes")
    ap.add_argument("--workloads", default="copy,stories")
    ap.add_argument("--modes", default="plain,ngram,draft")
    ap.add_argument("--engines", default="kvforge,llama")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=128, help="tokens generated per run")
    ap.add_argument("--k", type=int, default=4, help="speculative tokens per step")
    ap.add_argument("--lookup-max", type=int, default=4)
    ap.add_argument("--lookup-min", type=int, default=2)
    ap.add_argument("--peer-ngram", default="ngram-simple:2,ngram-simple:4",
                    help="llama-server n-gram configurations, TYPE:N each (N: lookup length)")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--ctx", type=int, default=2048, help="llama-server -c")
    ap.add_argument("--text", default=os.path.join(SHARED_MODELS, "tinystories-h64-heldout.txt"))
    ap.add_argument("--copy-words", type=int, default=200,
                    help="passage length for copy and repeat, before trimming to the context")
    ap.add_argument("--stories-prompt",
                    default="Once upon a time, there was a little girl named Lily.")
    ap.add_argument("--stop-at-eos", action="store_true",
                    help="stop at end-of-sequence (default: generate --tokens regardless)")
    ap.add_argument("--server-timeout", type=float, default=120,
                    help="seconds for llama-server to answer /health")
    ap.add_argument("--run-timeout", type=float, default=600, help="seconds per engine run")
    ap.add_argument("--json", default="", help="also write the raw results here")
    a = ap.parse_args()
    for name in ("workloads", "modes", "engines", "peer_ngram"):
        setattr(a, name, [x for x in getattr(a, name).split(",") if x])
    for m in a.modes:
        if m not in MODES:
            raise SystemExit(f"unknown mode {m!r} ({', '.join(MODES)})")
    a.modes = [m for m in MODES if m in a.modes]
    for e in a.engines:
        if e not in ("kvforge", "llama"):
            raise SystemExit(f"unknown engine {e!r} (kvforge, llama)")

    print("command: " + " ".join(shlex.quote(x) for x in [sys.executable] + sys.argv))
    print("CPU: " + cpu_model())
    a.model_file = model_path(a.kvforge, a.model, a.vocab_from, a.dtype)
    a.draft_file = None
    if "draft" in a.modes:
        d = a.draft_model or ("tiny" if SHAPE_ALIASES.get(a.model, a.model) in
                              list(SHAPES) + ["induction"]
                              else os.path.join(REPO, "tests/data/models/stories260K.gguf"))
        a.draft_file = model_path(a.kvforge, d, a.vocab_from, a.dtype)
    print(f"model: {a.model_file}" + (f"; draft: {a.draft_file}" if a.draft_file else ""))
    print(f"peer: {os.path.abspath(a.peer)}; {a.rounds} rounds, {a.tokens} tokens, K={a.k}, "
          f"{a.threads} threads; passage from {a.text}", flush=True)
    prompts = workloads(a)

    cfgs = configs(a)
    results = {}  # (workload, config key) -> per round: run dict, or None
    failures = {}  # (workload, config key) -> message
    warned = set()
    tmp = tempfile.mkdtemp(prefix="spec-bench-")

    def fail(ws, c, msg):
        for w in ws:
            failures[(w, key(c))] = msg
        seen = msg in printed
        printed.add(msg)
        print(f"FAILED {', '.join(ws)}: {c['engine']} {c['mode']} ({c['label']})"
              + (": the same error as above" if seen else f":\n{msg}"), file=sys.stderr,
              flush=True)
    printed = set()

    def record(w, c, r, rnd):
        runs = results.setdefault((w, key(c)), [])
        runs += [None] * (rnd - len(runs))
        runs.append(r)
        if r:
            acc = "" if r["drafted"] is None or c["mode"] == "plain" else \
                f", accepted {r['accepted']}/{r['drafted']}"
            print(f"  {w}: {c['engine']} {c['mode']} ({c['label']}): {r['tps']:.1f} tokens/s, "
                  f"{r['gen']} tokens{acc}", flush=True)

    for rnd in range(a.rounds):
        print(f"round {rnd + 1}", flush=True)
        for mode in a.modes:
            group = cfgs[mode] if rnd % 2 == 0 else list(reversed(cfgs[mode]))
            for c in group:
                todo = {w: p for w, p in prompts.items() if (w, key(c)) not in failures}
                if not todo:
                    continue
                if c["engine"] == "kvforge":
                    for w, p in todo.items():
                        try:
                            record(w, c, kvforge_run(a, c, p), rnd)
                        except RunError as e:
                            fail([w], c, str(e))
                    continue
                try:
                    server = LlamaServer(a, c["flags"], tmp)
                except RunError as e:
                    fail(list(todo), c, str(e))
                    continue
                try:
                    n_ctx = server.meta.get("n_ctx_train")
                    for w, p in todo.items():
                        try:
                            r = server.complete(a, p, c["mode"] != "plain")
                        except RunError as e:
                            fail([w], c, str(e))
                            continue
                        if n_ctx and r["prompt_n"] and r["prompt_n"] + a.tokens > n_ctx \
                                and w not in warned:
                            warned.add(w)
                            print(f"warning: {w}: {r['prompt_n']} prompt + {a.tokens} tokens "
                                  f"exceed the model's trained context {n_ctx}", file=sys.stderr)
                        record(w, c, r, rnd)
                finally:
                    server.stop()
    if KERNELS:
        print(f"\nkvforge kernels: {', '.join(sorted(KERNELS))}")
    report(a, cfgs, prompts, results, failures)
    write_json(a.json, a, cpu=cpu_model(), prompts=prompts, failures={
        f"{w} | " + " | ".join(k): v for (w, k), v in failures.items()}, results=[
        dict(workload=w, engine=k[0], mode=k[1], config=k[2],
             rounds=[{x: y for x, y in r.items() if x != "tokens"} if r else None for r in runs])
        for (w, k), runs in results.items()])
    if failures:
        print(f"\n{len(failures)} run(s) failed: "
              + "; ".join(f"{w}: {k[0]} {k[1]} ({k[2]})" for w, k in failures), file=sys.stderr)
        sys.exit(1)


if __name__ == "__main__":
    main()
