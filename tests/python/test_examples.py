"""The survey's examples (examples/python) run as written and print what they should."""
import os
import re
import subprocess
import sys

import pytest

from conftest import SOURCE_DIR

EXAMPLES = os.path.join(SOURCE_DIR, "examples", "python")


def run(name):
    r = subprocess.run([sys.executable, os.path.join(EXAMPLES, name)], capture_output=True,
                       text=True, timeout=600, env=os.environ.copy())
    assert r.returncode == 0, r.stderr
    return r.stdout, r.stderr


def test_11_1_basic_offline_inference():
    out, err = run("11_1_basic_offline_inference.py")
    lines = out.strip().splitlines()
    assert len(lines) == 3
    for line, prompt in zip(lines, ["Once upon a time,", "The little dog", "Lily wanted to"]):
        m = re.fullmatch(r"Prompt: '(.*)', Generated text: (['\"])(.+)\2", line)
        assert m, line
        assert m.group(1) == prompt
    assert "gpu_memory_utilization is read as memory_utilization" in err


def test_11_2_prefix_caching():
    out, _ = run("11_2_prefix_caching.py")
    cached = re.search(r"Cached prompt tokens: \[(\d+), (\d+), (\d+)\]", out)
    assert cached, out
    first, second, third = (int(g) for g in cached.groups())
    assert first == 0
    assert second >= 32 and third >= 32, out


def test_11_3_fp8_kv_cache():
    out, _ = run("11_3_fp8_kv_cache.py")
    assert "KV cache dtype: fp8_e4m3, scales: calibrate" in out
    assert out.startswith("Prompt: 'Once upon a time,', Generated text: ")


def test_11_4_kv_cache_size():
    out, _ = run("11_4_kv_cache_size.py")
    assert out.splitlines() == ["Llama-2-7B, batch 8 x 4096 tokens: 16.00 GB",
                                "Llama-3-8B, batch 8 x 8192 tokens: 8.00 GB"]


def test_11_5_cpu_offload():
    out, _ = run("11_5_cpu_offload.py")
    m = re.search(r"preemptions \(KV swapped to CPU\): (\d+)", out)
    assert m and int(m.group(1)) > 0, out
    assert "Outputs equal to an unconstrained run: True" in out
