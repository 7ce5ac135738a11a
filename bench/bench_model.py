"""The random-weight f16 llama the offload, router and Redis benchmarks serve: heads of 64, the
FFN at 8/3 of the width rounded to 32, written by `kvforge make-model`."""
import subprocess


def make_llama(kvforge, dim, layers, out, ctx=None):
    cmd = [kvforge, "make-model", "--dim", str(dim), "--layers", str(layers),
           "--heads", str(dim // 64), "--kv-heads", str(dim // 64),
           "--ffn", str(dim * 8 // 3 // 32 * 32), "--dtype", "f16", "--out", out]
    if ctx is not None:
        cmd += ["--ctx", str(ctx)]
    subprocess.run(cmd, check=True, capture_output=True)
