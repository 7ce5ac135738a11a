#!/usr/bin/env python3
"""Decode speed with a JSON Schema constraint against none, for kvforge and llama.cpp's
llama-completion, alternating and repeated in one run (docs: BENCHMARKS.md, "Structured outputs").

  bench/structured_decode.py KVFORGE PEER_DIR [--rounds 3] [--tokens 128]

A random-weight 110M-shape f16 model with the 32000-token Llama vocabulary is written with
`kvforge make-model`; both engines decode greedily from the same prompt, 2 threads. The mask's
cost is the constrained decode time over the free one, per engine.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import tempfile

SCHEMA = {"type": "object", "properties": {
    "items": {"type": "array", "minItems": 40, "maxItems": 40,
              "items": {"type": "object", "properties": {
                  "name": {"type": "string", "maxLength": 12},
                  "n": {"type": "integer", "minimum": 0, "maximum": 999}},
                  "required": ["name", "n"]}}}, "required": ["items"]}


def run(cmd):
    return subprocess.run(cmd, check=True, capture_output=True, text=True)


def kvforge_tps(kvf, model, schema_file, tokens):
    cmd = [kvf, "run", "--model", model, "--prompt", "Once upon a time", "--max-tokens",
           str(tokens), "--temperature", "0", "--threads", "2", "--json"]
    if schema_file:
        cmd += ["--json-schema", schema_file]
    else:
        cmd += ["--ignore-eos"]
    line = next(l for l in run(cmd).stdout.split("\n") if l.startswith('{"prompt_tokens"'))
    out = json.loads(line)
    return out["decode_tokens_per_s"], len(out["tokens"])


def llama_tps(peer, model, schema_file, tokens):
    cmd = [os.path.join(peer, "llama-completion"), "-m", model, "-p", "Once upon a time", "-n",
           str(tokens), "--temp", "0", "-t", "2", "--no-display-prompt", "-no-cnv", "--ignore-eos"]
    if schema_file:
        cmd += ["-jf", schema_file]
    err = run(cmd).stderr
    m = re.search(r"eval time =\s*[\d.]+ ms /\s*(\d+) runs.*?([\d.]+) tokens per second", err)
    if not m:
        raise SystemExit("cannot read llama-completion's eval time:\n" + err[-2000:])
    return float(m.group(2)), int(m.group(1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kvforge")
    ap.add_argument("peer")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--tokens", type=int, default=128)
    ap.add_argument("--vocab-from", default="tests/data/tokenizer-tests/ggml-vocab-llama-spm.gguf")
    a = ap.parse_args()
    tmp = tempfile.mkdtemp()
    model = os.path.join(tmp, "m110.gguf")
    run([a.kvforge, "make-model", "--dim", "768", "--layers", "12", "--heads", "12", "--ffn",
         "2048", "--dtype", "f16", "--ctx", "4096", "--seed", "1", "--vocab-from", a.vocab_from,
         "--out", model])
    schema_file = os.path.join(tmp, "schema.json")
    with open(schema_file, "w") as f:
        json.dump(SCHEMA, f)
    rows = {k: [] for k in ("kvf_free", "kvf_json", "llama_free", "llama_json")}
    lengths = {}
    for r in range(a.rounds):
        for key, fn, schema in (("kvf_free", kvforge_tps, None), ("kvf_json", kvforge_tps, schema_file),
                                ("llama_free", llama_tps, None), ("llama_json", llama_tps, schema_file)):
            tps, n = fn(a.kvforge if fn is kvforge_tps else a.peer, model, schema, a.tokens)
            rows[key].append(tps)
            lengths[key] = n
        print(f"round {r + 1}: " + ", ".join(f"{k} {v[-1]:.1f}" for k, v in rows.items()), flush=True)
    med = {k: statistics.median(v) for k, v in rows.items()}
    print(json.dumps({"median_tokens_per_s": med, "tokens": lengths,
                      "kvforge_json_over_free": med["kvf_json"] / med["kvf_free"],
                      "llama_json_over_free": med["llama_json"] / med["llama_free"],
                      "kvforge_json_over_llama_json": med["kvf_json"] / med["llama_json"]}, indent=1))


if __name__ == "__main__":
    main()
