#!/usr/bin/env python3
"""Plots `kvforge eval stream --json` runs as an SVG: window perplexity (top) and KV slots held
(bottom) against tokens scored, one line per run, log-scaled token axis. No plotting library:
the SVG is written by hand so the script runs on a bare Debian python3.
Usage: bench/stream_plot.py OUT.svg LABEL=run1.json [LABEL=run2.json ...]
"""
import json
import math
import sys

W, H, PAD = 760, 520, 60
COLORS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd"]


def scale(v, lo, hi, a, b):
    return a + (v - lo) / (hi - lo) * (b - a) if hi > lo else (a + b) / 2


def panel(runs, key, top, height, title, log_x):
    xs = [w["tokens"] for _, r in runs for w in r["windows"]]
    ys = [w[key] for _, r in runs for w in r["windows"]]
    x_lo, x_hi = (math.log10(min(xs)), math.log10(max(xs))) if log_x else (min(xs), max(xs))
    y_lo, y_hi = min(ys), max(ys)
    margin = (y_hi - y_lo) * 0.1 or 1
    y_lo, y_hi = y_lo - margin, y_hi + margin
    out = [f'<text x="{PAD}" y="{top - 8}" font-size="14">{title}</text>',
           f'<rect x="{PAD}" y="{top}" width="{W - 2 * PAD}" height="{height}" fill="none" '
           f'stroke="#888"/>']
    for frac in (0, 0.5, 1):
        v = y_lo + frac * (y_hi - y_lo)
        y = scale(v, y_lo, y_hi, top + height, top)
        out.append(f'<text x="{PAD - 6}" y="{y + 4:.1f}" font-size="11" text-anchor="end">'
                   f'{v:.2f}</text>')
    for i, (label, r) in enumerate(runs):
        pts = []
        for w in r["windows"]:
            xv = math.log10(w["tokens"]) if log_x else w["tokens"]
            pts.append(f'{scale(xv, x_lo, x_hi, PAD, W - PAD):.1f},'
                       f'{scale(w[key], y_lo, y_hi, top + height, top):.1f}')
        out.append(f'<polyline fill="none" stroke="{COLORS[i % len(COLORS)]}" stroke-width="1.5" '
                   f'points="{" ".join(pts)}"/>')
    return out, (x_lo, x_hi)


def main():
    if len(sys.argv) < 3:
        print(__doc__)
        return 2
    runs = []
    for arg in sys.argv[2:]:
        label, path = arg.split("=", 1)
        with open(path) as f:
            runs.append((label, json.load(f)))
    body = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" '
            f'font-family="sans-serif"><rect width="{W}" height="{H}" fill="white"/>']
    p1, (x_lo, x_hi) = panel(runs, "window_ppl", 40, 230, "perplexity per window", True)
    p2, _ = panel(runs, "kv_slots_max", 320, 130, "KV slots held (most in the window)", True)
    body += p1 + p2
    for e in range(math.ceil(x_lo), math.floor(x_hi) + 1):
        x = scale(e, x_lo, x_hi, PAD, W - PAD)
        body.append(f'<text x="{x:.1f}" y="{470}" font-size="11" text-anchor="middle">'
                    f'1e{e}</text>')
    body.append(f'<text x="{W / 2}" y="{492}" font-size="12" text-anchor="middle">tokens scored'
                f' (log scale)</text>')
    for i, (label, _) in enumerate(runs):
        y = 506
        x = PAD + i * 200
        body.append(f'<rect x="{x}" y="{y - 9}" width="12" height="3" '
                    f'fill="{COLORS[i % len(COLORS)]}"/><text x="{x + 16}" y="{y - 4}" '
                    f'font-size="12">{label}</text>')
    body.append("</svg>")
    with open(sys.argv[1], "w") as f:
        f.write("\n".join(body) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
