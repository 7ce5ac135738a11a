"""The option table (include/kvforge/config_names.h) is the only list of engine options: every
field is settable, by its own name, from the CLI (--name with '-' for '_'), from Python (a keyword
of LLM / kvforge.engine_config) and, where it is a request's own, over HTTP; every engine command's
--help lists it with its default; a command that does not use a field refuses it."""
import json
import os
import re
import subprocess
import urllib.error
import urllib.request

import pytest

import kvforge

# The commands whose flags come from the option table (bench latency and batched list them all
# and refuse the ones their forward passes do not use).
ENGINE_COMMANDS = [["run"], ["serve"], ["bench", "throughput"], ["bench", "memory"],
                   ["bench", "latency"], ["bench", "batched"], ["eval", "ppl"], ["eval", "kv"],
                   ["eval", "stream"], ["eval", "passkey"]]

# A value other than the default for each kind of field, as (text for the CLI, Python value,
# the text form the engine reports back).
SPECIAL = {
    "model": ("x.gguf", "x.gguf", "x.gguf"),
    "kv_scales": ("calibrate", "calibrate", "calibrate"),
    "kv_offload_disk": ("/tmp/kvforge-tier", "/tmp/kvforge-tier", "/tmp/kvforge-tier"),
    "kv_offload_redis": ("redis://127.0.0.1:1", "redis://127.0.0.1:1", "redis://127.0.0.1:1"),
    "kv_pool_kernel": ("9", 9, "9"),  # odd
    "kv_window": ("3", 3, "3"),
    "kv_policy": ("h2o", "h2o", "h2o"),
    "kv_budget": ("0.5", 0.5, "0.5"),
    "kv_heads": ("per_head", "per_head", "per_head"),
}


def cli():
    path = os.environ.get("KVF_CLI")
    if not path:
        pytest.skip("KVF_CLI (the kvforge executable) is not set; ctest sets it")
    return path


def other_value(name, f):
    if name in SPECIAL:
        return SPECIAL[name]
    kind, default = f["kind"], f["default"]
    if kind == "bool":
        v = default != "true"
        return ("true" if v else "false", v, "true" if v else "false")
    if kind == "choice":
        choice = next(c for c in f["choices"] if c != default and c != "auto")
        return (choice, choice, choice)
    if kind in ("int", "uint"):
        if f["byte_size"]:
            return ("3MiB", "3MiB", str(3 << 20))
        v = int(default) + 1
        return (str(v), v, str(v))
    if kind == "float":
        v = float(default) + 0.5 if float(default) < 1 else float(default) + 1
        return (repr(v), v, "%g" % v)
    return ("x", "x", "x")


def companions(name):
    """Fields the value needs beside it to be a valid config (a KV policy needs its budget)."""
    f = kvforge.engine_options()[name]
    if not f["per_request"]:
        return {}
    if name == "kv_policy":
        return {"kv_budget": ("8", 8)}
    if name == "kv_budget":
        return {"kv_policy": ("h2o", "h2o")}
    return {"kv_policy": ("h2o", "h2o"), "kv_budget": ("8", 8)}


def test_every_field_has_a_flag_named_after_it():
    for name, f in kvforge.engine_options().items():
        assert f["flag"] == "--" + name.replace("_", "-"), name
        assert f["group"], name


@pytest.mark.parametrize("name", sorted(kvforge.engine_options()))
def test_every_field_is_settable_from_the_cli_and_python(name):
    f = kvforge.engine_options()[name]
    text, value, reported = other_value(name, f)
    assert reported != f["default"], name
    extra = companions(name)
    args = [cli(), "run", f"{f['flag']}={text}", "--print-engine-config"]
    for other, (t, _) in extra.items():
        args += [f"--{other.replace('_', '-')}", t]
    r = subprocess.run(args, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    from_cli = json.loads(r.stdout)
    assert from_cli[name] == reported, (name, from_cli[name])
    from_python = kvforge.engine_config(**{name: value}, **{k: v for k, (_, v) in extra.items()})
    assert from_python[name] == reported, (name, from_python[name])
    # Everything else stays at its default in both.
    for other, g in kvforge.engine_options().items():
        if other != name and other not in extra:
            assert from_cli[other] == g["default"], (name, other)
            assert from_python[other] == g["default"], (name, other)


def test_switches_take_no_value_a_bool_or_a_no_prefix():
    base = [cli(), "run", "--print-engine-config"]
    out = lambda *a: json.loads(subprocess.run(base + list(a), capture_output=True, text=True,
                                               check=True, timeout=60).stdout)
    assert out("--mlock")["mlock"] == "true"
    assert out("--no-enable-prefix-caching")["enable_prefix_caching"] == "false"
    assert out("--chunked-prefill=false")["chunked_prefill"] == "false"
    assert out("--kv-f32")["kv_f16"] == "false"  # an alias with its own value
    assert out("--prefix-cache", "off")["enable_prefix_caching"] == "false"
    assert out("--prefix-cache", "radix")["prefix_cache_mode"] == "radix"
    assert out("--ctx", "99", "--kivi-residual", "64")["max_model_len"] == "99"
    assert out("--kv-offload-disk", "/tmp/t:2GiB")["kv_offload_disk_bytes"] == str(2 << 30)


@pytest.mark.parametrize("command", ENGINE_COMMANDS, ids=" ".join)
def test_help_lists_every_field_with_its_default(command):
    r = subprocess.run([cli()] + command + ["--help"], capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    lines = r.stdout.splitlines()
    for name, f in kvforge.engine_options().items():
        pattern = re.compile(r"^  " + re.escape(f["flag"]) + r"[ \[]")
        line = next((l for l in lines if pattern.match(l)), None)
        assert line is not None, f"{' '.join(command)} --help does not list {f['flag']}"
        assert "[default: " in line, line


def test_bad_values_and_unused_fields_are_refused_with_exit_2():
    def run(*a):
        return subprocess.run([cli()] + list(a), capture_output=True, text=True, timeout=60)
    r = run("run", "--prompt", "x", "--kv-offload-compression", "gzip")
    assert r.returncode == 2 and "--kv-offload-compression" in r.stderr, r.stderr
    r = run("run", "--prompt", "x", "--kv-budget", "8")
    assert r.returncode == 2 and "kv_policy" in r.stderr, r.stderr
    r = run("run", "--prompt", "x", "--kv-cache-memory-bytes", "lots")
    assert r.returncode == 2 and "byte size" in r.stderr, r.stderr
    r = run("bench", "latency", "--max-num-seqs", "3", "--n-prompt", "4", "--n-gen", "2")
    assert r.returncode == 2 and "does not use --max-num-seqs" in r.stderr, r.stderr


def test_python_reads_byte_sizes_and_refuses_wrong_types():
    assert kvforge.engine_config(kv_cache_memory_bytes="64MiB")["kv_cache_memory_bytes"] == \
        str(64 << 20)
    assert kvforge.engine_config(kv_cache_memory_bytes=1000)["kv_cache_memory_bytes"] == "1000"
    with pytest.raises(TypeError):
        kvforge.engine_config(block_size="16")
    with pytest.raises(TypeError):
        kvforge.engine_config(no_such_option=1)
    with pytest.raises(ValueError):
        kvforge.engine_config(kv_offload_compression="gzip")


def test_every_per_request_field_is_settable_over_http():
    """One server; a completion whose kv_policy object sets every per-request field by its request
    name (the table's request_key) is accepted, and a misspelt one is a 400 naming it."""
    proc = subprocess.Popen([cli(), "serve", "--port", "0", "--max-model-len", "256"],
                            stderr=subprocess.PIPE, text=True)
    try:
        url = None
        for line in proc.stderr:
            m = re.search(r"listening on (http://\S+)", line)
            if m:
                url = m.group(1)
                break
        assert url, "the server printed no address"
        policy = {}
        for name, f in kvforge.engine_options().items():
            if f["per_request"]:
                policy[f["request_key"]] = other_value(name, f)[1]
        policy["budget"] = 8

        def post(body):
            req = urllib.request.Request(url + "/v1/completions", json.dumps(body).encode(),
                                         {"Content-Type": "application/json"})
            try:
                with urllib.request.urlopen(req, timeout=60) as resp:
                    return resp.status, json.loads(resp.read())
            except urllib.error.HTTPError as e:
                return e.code, json.loads(e.read())
        status, body = post({"prompt": "Once upon a time", "max_tokens": 4, "kv_policy": policy})
        assert status == 200, body
        status, body = post({"prompt": "Once", "max_tokens": 4,
                             "kv_policy": {"name": "h2o", "budget": 8, "sinkz": 2}})
        assert status == 400 and "kv_policy.sinkz" in json.dumps(body), body
    finally:
        proc.terminate()
        proc.wait(timeout=30)
