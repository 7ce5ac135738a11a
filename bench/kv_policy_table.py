#!/usr/bin/env python3
"""KV eviction quality table (kv-methods.md Part E) from `kvforge eval kv --kv-policy`.

For each model, policy and budget (a fraction of each scored chunk) it runs one `eval kv` with
f32 KV on both sides, so the difference is the eviction's alone, and prints a markdown table:
perplexity delta, KL(full || evicted) mean / p99 and top-1 agreement in the streaming regime
(one token per step: the policy runs after every token) and the compress_continue regime (a
prefill compressed once, then a continuation), and the fraction of the chunk's KV held at the
end. Usage: bench/kv_policy_table.py KVFORGE [--models m1.gguf:text1,...] [--ctx 256]
[--policies snapkv,h2o] [--budgets 0.1,0.2] [--heads shared,per_head,adaptive]
(--heads: KV head selection, docs/kv_cache.md; more than one adds a column).
"""
import argparse
import json
import subprocess
import sys

POLICIES = ["streaming", "h2o", "tova", "knorm", "snapkv", "pyramidkv", "random"]
BUDGETS = [0.05, 0.1, 0.2, 0.5]


def run(kvf, model, text, policy, budget, ctx, chunks, heads="shared"):
    cmd = [kvf, "eval", "kv", "--text", text, "--ctx", str(ctx), "--chunks", str(chunks),
           "--prompts", "0", "--kv-dtype", "f32", "--json"]
    if model:
        cmd += ["--model", model]
    if policy != "none":
        cmd += ["--kv-policy", policy, "--kv-budget", str(budget), "--kv-heads", heads]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("kvforge")
    ap.add_argument("--models", default=":tests/data/models/tinystories-val-head.txt",
                    help="comma-separated MODEL:TEXT pairs (empty MODEL: the embedded one)")
    ap.add_argument("--ctx", type=int, default=256)
    ap.add_argument("--chunks", type=int, default=4)
    ap.add_argument("--policies", default=",".join(POLICIES))
    ap.add_argument("--budgets", default=",".join(str(b) for b in BUDGETS))
    ap.add_argument("--heads", default="shared")
    a = ap.parse_args()
    heads_list = a.heads.split(",")
    head_col = len(heads_list) > 1
    print("| model | policy |" + (" heads |" if head_col else "") + " budget | streaming ΔPPL | KL mean | KL p99 | top-1 | kept | "
          "compress_continue ΔPPL | KL mean | top-1 | kept |")
    print("|---|---|" + ("---|" if head_col else "") + "---|---|---|---|---|---|---|---|---|---|")
    for pair in a.models.split(","):
        model, text = pair.split(":", 1)
        name = model.rsplit("/", 1)[-1] or "stories260K (embedded)"
        for policy in a.policies.split(","):
            for budget in (float(b) for b in a.budgets.split(",")):
                for heads in heads_list:
                    d = run(a.kvforge, model, text, policy, budget, a.ctx, a.chunks, heads)
                    s, c = d["regimes"]["streaming"], d["regimes"]["compress_continue"]
                    k = d["kept_fraction"]
                    hc = f" {heads} |" if head_col else ""
                    print(f"| {name} | {policy} |{hc} {budget:g} | "
                          f"{s['ppl'] - s['baseline_ppl']:+.3f} ({s['baseline_ppl']:.3f}) | "
                          f"{s['kl_mean']:.4f} | {s['kl_p99']:.3f} | {s['top1_agreement']:.3f} | "
                          f"{k['streaming']:.3f} | "
                          f"{c['ppl'] - c['baseline_ppl']:+.3f} ({c['baseline_ppl']:.3f}) | "
                          f"{c['kl_mean']:.4f} | {c['top1_agreement']:.3f} | "
                          f"{k['compress_continue']:.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
