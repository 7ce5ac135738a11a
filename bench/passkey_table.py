#!/usr/bin/env python3
"""Passkey retrieval under KV policies, from `kvforge eval passkey --json`.

For each model, context length, policy and budget (a fraction of the prompt; quest/nsa: the
tokens a decode step reads) it runs one `eval passkey` and prints a markdown row: exact-key
accuracy, digit accuracy (leading digits right), accuracy by needle depth (first / middle /
last third of the depths) and the KV slots held at the end. The induction-head model
(`kvforge make-model --induction`) retrieves every key with the full KV, so each loss is the
policy's. Usage:
  bench/passkey_table.py KVFORGE --models /tmp/ind.gguf [--contexts 1024,4096] [--trials 3]
      [--policies streaming,h2o,...] [--budgets 0.05,0.1,0.2,0.5] [--extra "--kv-pool-kernel 15"]
"""
import argparse
import json
import subprocess
import sys

POLICIES = ["none", "streaming", "h2o", "tova", "knorm", "snapkv", "pyramidkv", "random",
            "quest", "nsa"]
BUDGETS = [0.05, 0.1, 0.2, 0.5]


def run(kvf, model, context, trials, policy, budget, extra):
    cmd = [kvf, "eval", "passkey", "--context-tokens", str(context), "--trials", str(trials),
           "--json"] + extra
    if model:
        cmd += ["--model", model]
    if policy != "none":
        cmd += ["--kv-policy", policy, "--kv-budget", str(budget)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def thirds(depths):
    """Exact accuracy over the first, middle and last third of the depths."""
    n = len(depths)
    parts = [depths[: n // 3], depths[n // 3: n - n // 3], depths[n - n // 3:]]
    out = []
    for p in parts:
        c = sum(d["correct"] for d in p)
        t = sum(d["trials"] for d in p)
        out.append(f"{c / t:.2f}" if t else "-")
    return " / ".join(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kvforge")
    ap.add_argument("--models", required=True, help="comma-separated GGUF paths")
    ap.add_argument("--contexts", default="1024")
    ap.add_argument("--trials", type=int, default=3)
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--budgets", default=",".join(str(b) for b in BUDGETS))
    ap.add_argument("--extra", default="", help="more eval passkey flags, e.g. --kv-pool-kernel 15")
    a = ap.parse_args()
    extra = a.extra.split()
    print("| model | context | policy | budget | accuracy | digits | by depth (0-33% / mid / "
          "67-100%) | KV kept |")
    print("|---|---|---|---|---|---|---|---|")
    for model in a.models.split(","):
        name = model.rsplit("/", 1)[-1] or "stories260K (embedded)"
        for context in (int(c) for c in a.contexts.split(",")):
            for policy in a.policies.split(","):
                budgets = [0] if policy == "none" else [float(b) for b in a.budgets.split(",")]
                for budget in budgets:
                    d = run(a.kvforge, model, context, a.trials, policy, budget, extra)
                    kept = sum(x["kv_final_tokens"] for x in d["depths"]) / len(d["depths"])
                    shown = "full" if policy == "none" else f"{budget:g}"
                    print(f"| {name} | {context} | {policy} | {shown} | {d['accuracy']:.3f} | "
                          f"{d['digit_accuracy']:.3f} | {thirds(d['depths'])} | {kept:.0f} |",
                          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
