"""The vLLM-shaped API end to end on the embedded model: generation equal to the C++ engine's,
batches, n > 1, stop strings, logprobs, prefix caching, every KV dtype, errors, streaming and
aborts freeing their KV."""
import json
import os
import subprocess

import pytest

import kvforge
from conftest import DATA_DIR, wait_until
from kvforge import LLM, SamplingParams

GREEDY = dict(temperature=0.0, max_tokens=24)


def reference_greedy():
    """llama.cpp's greedy ids for stories260K (tests/data/reference), up to the first near-tie."""
    with open(os.path.join(DATA_DIR, "reference", "stories260K-greedy.json")) as f:
        ref = json.load(f)
    cases = []
    for c in ref["cases"]:
        ids = c["gen_ids"]
        cut = c["first_step_with_margin_below_1e-2"]
        cases.append((c["prompt_ids"], ids[:cut] if cut is not None else ids))
    return cases


def test_greedy_ids_match_llama_cpp_and_the_cpp_engine(llm):
    cases = reference_greedy()
    outs = llm.generate([p for p, _ in cases], SamplingParams(temperature=0, max_tokens=64))
    assert len(outs) == len(cases)
    for out, (prompt, want) in zip(outs, cases):
        assert out.prompt_token_ids == prompt
        got = out.outputs[0].token_ids
        assert got[:len(want)] == want
        assert out.outputs[0].finish_reason == "length"
        assert out.finished


def cli_path():
    cli = os.environ.get("KVF_CLI")
    if not cli:
        pytest.skip("KVF_CLI (the kvforge executable) is not set; ctest sets it")
    return cli


def test_greedy_ids_match_the_cpp_engine(llm):
    # The same as the `kvforge run --json` (C++ Engine) greedy ids for a text prompt.
    r = subprocess.run([cli_path(), "run", "--prompt", "Once upon a time", "--max-tokens", "24",
                        "--temperature", "0", "--json"], capture_output=True, text=True,
                       check=True)
    want = json.loads(r.stdout)["tokens"]
    got = llm.generate("Once upon a time", SamplingParams(**GREEDY))[0]
    assert got.outputs[0].token_ids == want


def test_batch_of_prompts_keeps_order_and_text(llm):
    prompts = ["Once upon a time", "The little dog", "Lily and Tom"]
    outs = llm.generate(prompts, SamplingParams(**GREEDY))
    assert [o.prompt for o in outs] == prompts
    for o, p in zip(outs, prompts):
        single = llm.generate(p, SamplingParams(**GREEDY))[0]
        assert o.outputs[0].token_ids == single.outputs[0].token_ids
        assert o.outputs[0].text == llm.get_tokenizer().decode(o.outputs[0].token_ids)
        assert len(o.outputs[0].token_ids) == 24


def test_parallel_sampling_n(llm):
    out = llm.generate("Once upon a time",
                       SamplingParams(n=3, temperature=1.0, seed=7, max_tokens=16))[0]
    assert [c.index for c in out.outputs] == [0, 1, 2]
    texts = {c.text for c in out.outputs}
    assert len(texts) > 1, "three samples at temperature 1 should not all agree"
    again = llm.generate("Once upon a time",
                         SamplingParams(n=3, temperature=1.0, seed=7, max_tokens=16))[0]
    assert [c.token_ids for c in again.outputs] == [c.token_ids for c in out.outputs]


def test_stop_strings_and_stop_token_ids(llm):
    free = llm.generate("Once upon a time", SamplingParams(**GREEDY))[0].outputs[0]
    word = free.text.split()[3]
    cut = llm.generate("Once upon a time", SamplingParams(stop=[word], **GREEDY))[0].outputs[0]
    assert cut.finish_reason == "stop"
    assert word not in cut.text
    assert free.text.startswith(cut.text)
    stop_id = free.token_ids[5]
    by_id = llm.generate("Once upon a time",
                         SamplingParams(stop_token_ids=[stop_id], **GREEDY))[0].outputs[0]
    assert by_id.finish_reason == "stop"
    assert stop_id not in by_id.token_ids


def test_logprobs(llm):
    out = llm.generate("Once upon a time",
                       SamplingParams(logprobs=3, **GREEDY))[0].outputs[0]
    assert len(out.logprobs) == len(out.token_ids)
    total = 0.0
    for tok, entry in zip(out.token_ids, out.logprobs):
        assert tok in entry
        assert entry[tok].logprob <= 0
        assert entry[tok].rank == 1  # greedy picks the most likely token
        assert len(entry) >= 3
        total += entry[tok].logprob
    assert out.cumulative_logprob == pytest.approx(total, abs=1e-3)


def test_prefix_caching_hits():
    with LLM(max_model_len=512, enable_prefix_caching=True, block_size=16) as llm:
        prefix = "Once upon a time, there was a little girl named Lily. She loved to play "
        before = llm.stats()["prefix_cache_hit_tokens"]
        first = llm.generate(prefix + "outside.", SamplingParams(**GREEDY))[0]
        second = llm.generate(prefix + "with her dog.", SamplingParams(**GREEDY))[0]
        assert llm.stats()["prefix_cache_hit_tokens"] - before >= 16
        assert second.num_cached_tokens >= 16
        assert first.num_cached_tokens == 0
    with LLM(max_model_len=512, enable_prefix_caching=False) as off:
        off.generate(prefix + "x", SamplingParams(**GREEDY))
        assert not off.stats()["prefix_caching"]


def test_stats_after_generate_count_the_last_step():
    # generate() returns once the last request's output arrives, which happens inside the
    # engine's last step; stats() waits for that step to end, so every request is counted (the
    # engine used to refresh its counters only after the step, and stats() could miss it).
    prompts = ["Once upon a time", "The little dog", "A big red ball"]
    for _ in range(5):
        with LLM(max_model_len=256, max_num_seqs=1, enable_prefix_caching=True) as llm:
            llm.generate(prompts, SamplingParams(temperature=0.0, max_tokens=1))
            st = llm.stats()
            assert st["prefix_cache_queries"] == len(prompts), st
            assert st["num_running"] == 0 and st["num_waiting"] == 0, st


def test_kv_offload_disk_tier_serves_a_restarted_engine(tmp_path):
    # A pool of 6 blocks cannot keep the prompt between the two engines; the disk tier can.
    opts = dict(max_model_len=256, enable_prefix_caching=True, block_size=16,
                kv_cache_memory_bytes=640 * 16 * 6, kv_offload_disk=str(tmp_path),
                kv_offload_chunk_tokens=32, kv_offload_compression="zstd")
    prompt = "Once upon a time, there was a little girl named Lily. She loved to play outside " \
             "in the park with her friends and her big red ball."
    with LLM(**opts) as cold:
        want = cold.generate(prompt, SamplingParams(**GREEDY))[0].outputs[0].token_ids
        assert cold.stats()["kv_offload"]
        assert cold.stats()["kv_offload_stored_chunks"] >= 1
    assert list(tmp_path.rglob("*.kvc")), "the engine wrote its chunks before it closed"
    with LLM(**opts) as warm:
        out = warm.generate(prompt, SamplingParams(**GREEDY))[0]
        assert out.outputs[0].token_ids == want
        assert out.num_cached_tokens >= 32
        st = warm.stats()
        assert st["kv_offload_loaded_tokens"] >= 32
        assert [t["name"] for t in st["kv_tiers"]] == ["disk"]
        assert st["kv_tiers"][0]["hits"] >= 1
    with pytest.raises(ValueError, match="multiple of block_size"):
        LLM(**dict(opts, kv_offload_chunk_tokens=24))
    with pytest.raises(ValueError, match="kv_offload_compression"):
        LLM(**dict(opts, kv_offload_compression="gzip"))


def test_kv_offload_write_back_defers_until_the_engine_closes(tmp_path):
    # A pool that keeps the prompt: write-back holds its chunks in the pool (nothing on disk),
    # and the closing engine writes them; a restarted one loads them.
    opts = dict(max_model_len=256, enable_prefix_caching=True, block_size=16,
                kv_offload_disk=str(tmp_path), kv_offload_chunk_tokens=32,
                kv_offload_write="back")
    prompt = "Once upon a time, there was a little girl named Lily. She loved to play outside " \
             "in the park with her friends and her big red ball."
    with LLM(**opts) as first:
        want = first.generate(prompt, SamplingParams(**GREEDY))[0].outputs[0].token_ids
        st = first.stats()
        assert st["kv_offload_stored_chunks"] == 0
        assert st["kv_offload_deferred_chunks"] >= 1
        assert not list(tmp_path.rglob("*.kvc"))
    assert list(tmp_path.rglob("*.kvc")), "the closing engine wrote back what it held"
    with LLM(**opts) as second:
        out = second.generate(prompt, SamplingParams(**GREEDY))[0]
        assert out.outputs[0].token_ids == want
        assert second.stats()["kv_offload_loaded_tokens"] >= 32
    with pytest.raises(ValueError, match="kv_offload_write"):
        LLM(**dict(opts, kv_offload_write="sideways"))


def test_kv_offload_dtype_stores_smaller_chunks(tmp_path):
    # q8_0 chunks below an f16 pool: the files hold about half the bytes of untranscoded ones,
    # and a restarted engine loads them back into its f16 pool.
    opts = dict(max_model_len=256, enable_prefix_caching=True, block_size=16,
                kv_cache_memory_bytes=640 * 16 * 6, kv_offload_chunk_tokens=32,
                kv_offload_compression="none")
    prompt = "Once upon a time, there was a little girl named Lily. She loved to play outside " \
             "in the park with her friends and her big red ball."
    sizes = {}
    for dtype in ("auto", "q8_0"):
        d = tmp_path / dtype
        with LLM(**opts, kv_offload_disk=str(d), kv_offload_dtype=dtype) as cold:
            want = cold.generate(prompt, SamplingParams(**GREEDY))[0].outputs[0].token_ids
        sizes[dtype] = sum(f.stat().st_size for f in d.rglob("*.kvc"))
        with LLM(**opts, kv_offload_disk=str(d), kv_offload_dtype=dtype) as warm:
            out = warm.generate(prompt, SamplingParams(**GREEDY))[0]
            assert warm.stats()["kv_offload_loaded_tokens"] >= 32
            if dtype == "auto":
                assert out.outputs[0].token_ids == want
    assert 0.45 < sizes["q8_0"] / sizes["auto"] < 0.6, sizes
    with pytest.raises(ValueError, match="not smaller"):
        LLM(**opts, kv_offload_ram_bytes=1 << 20, kv_offload_dtype="bf16")


@pytest.mark.skipif(not os.environ.get("KVF_REDIS_URL"),
                    reason="needs KVF_REDIS_URL (scripts/with_redis.sh starts a redis-server)")
def test_kv_offload_redis_tier_is_shared_by_two_engines():
    # Database 5 of the suite's server: apart from the CLI checks' keys.
    url = os.environ["KVF_REDIS_URL"] + "/5"
    opts = dict(max_model_len=256, enable_prefix_caching=True, block_size=16,
                kv_cache_memory_bytes=640 * 16 * 6, kv_offload_redis=url,
                kv_offload_chunk_tokens=32, kv_offload_redis_timeout_ms=500)
    prompt = "One day, a little boy named Tim found a shiny red ball under a big green tree " \
             "near his house, and he ran to show his mom."
    with LLM(**opts) as first:
        want = first.generate(prompt, SamplingParams(**GREEDY))[0].outputs[0].token_ids
        assert first.config["kv_offload_redis"] == url
    with LLM(**opts) as second:
        out = second.generate(prompt, SamplingParams(**GREEDY))[0]
        assert out.outputs[0].token_ids == want
        st = second.stats()
        assert st["kv_offload_loaded_tokens"] >= 32
        assert st["kv_offload_load_waits"] >= 0  # steps it waited past the first 2 ms
        assert st["kv_offload_load_timeouts"] == 0
        assert [t["name"] for t in st["kv_tiers"]] == ["redis"]
        assert st["kv_tiers"][0]["hits"] >= 1
    with pytest.raises(ValueError, match="redis://"):
        LLM(**dict(opts, kv_offload_redis="localhost:6379"))
    with pytest.raises(ValueError, match="kv_offload_load_timeout_ms"):
        LLM(**dict(opts, kv_offload_load_timeout_ms=0))


@pytest.mark.parametrize("dtype", [d for d in kvforge.kv_cache_dtypes()])
def test_every_kv_dtype_is_accepted(dtype):
    with LLM(max_model_len=128, kv_cache_dtype=dtype, kv_cache_memory_bytes=8 << 20) as llm:
        out = llm.generate("Once upon a time", SamplingParams(temperature=0, max_tokens=8))[0]
        assert len(out.outputs[0].token_ids) == 8
        assert llm.config["kv_cache_dtype"] == dtype


def test_vllm_aliases_and_options(capfd):
    with LLM(gpu_memory_utilization=0.05, max_model_len=256, swap_space=0.01,
             enable_chunked_prefill=True, calculate_kv_scales=True, kv_cache_dtype="fp8",
             preemption_mode="swap", max_num_batched_tokens=512, max_num_seqs=8,
             seed=3) as llm:
        cfg = llm.config
        assert cfg["memory_utilization"] == "0.05"
        assert cfg["kv_scales"] == "calibrate"
        assert cfg["kv_cache_dtype"] == "fp8_e4m3"
        assert cfg["preemption_mode"] == "swap"
        assert int(cfg["swap_space_bytes"]) == int(0.01 * 2**30)
        a = llm.generate(["Once upon a time"] * 2, SamplingParams(temperature=1.0, max_tokens=8))
    assert "gpu_memory_utilization is read as memory_utilization" in capfd.readouterr().err
    # seed=3: request i gets seed 3 + i, so a new engine repeats the same samples.
    with LLM(max_model_len=256, seed=3, kv_cache_dtype="fp8", calculate_kv_scales=True) as llm:
        b = llm.generate(["Once upon a time"] * 2, SamplingParams(temperature=1.0, max_tokens=8))
    assert [o.outputs[0].token_ids for o in a] == [o.outputs[0].token_ids for o in b]
    assert "kv_cache_dtype" in kvforge.engine_options()


def test_bad_arguments_raise():
    with pytest.raises(TypeError, match="unexpected keyword argument 'tensor_parallel_sizes'"):
        LLM(tensor_parallel_sizes=2)
    with pytest.raises(TypeError, match="max_num_seqs must be an int"):
        LLM(max_num_seqs="8")
    with pytest.raises(ValueError, match="unknown KV cache dtype 'fp9'"):
        LLM(kv_cache_dtype="fp9")
    with pytest.raises(ValueError, match="preemption_mode must be one of recompute, swap"):
        LLM(preemption_mode="sometimes")
    with pytest.raises(ValueError, match="memory_utilization must be a number in"):
        LLM(gpu_memory_utilization=1.5)
    with pytest.raises(FileNotFoundError):
        LLM("/nonexistent/model.gguf")
    with pytest.raises(TypeError):
        SamplingParams(temperature="hot")
    with pytest.raises(TypeError):
        SamplingParams(best_of_everything=2)
    with pytest.raises(ValueError, match="top_p"):
        SamplingParams(top_p=1.5)
    with pytest.raises(ValueError):
        SamplingParams(n=0)


def test_requests_that_cannot_fit_raise(llm):
    with pytest.raises(ValueError):
        llm.generate([999999], SamplingParams(max_tokens=4))
    with pytest.raises(ValueError):
        llm.generate("Once upon a time", SamplingParams(max_tokens=100000))
    # The engine still serves.
    assert llm.generate("Hi", SamplingParams(max_tokens=2))[0].outputs[0].token_ids


def test_tokenizer_and_chat(llm):
    tok = llm.get_tokenizer()
    ids = tok.encode("Hello world")
    assert ids[0] == 1  # BOS
    assert tok.decode(ids).strip() == "Hello world"
    assert len(tok) == 512
    messages = [{"role": "system", "content": "Tell stories."},
                {"role": "user", "content": "Once upon a time"}]
    text = llm.render_chat(messages)
    assert text.startswith("<|im_start|>system\nTell stories.<|im_end|>\n")  # ChatML default
    assert text.endswith("<|im_start|>assistant\n")
    out = llm.chat(messages, SamplingParams(**GREEDY))[0]
    assert out.prompt == text
    assert len(out.outputs[0].token_ids) == 24
    with pytest.raises(ValueError):
        llm.chat([{"content": "no role"}])


def test_streaming_deltas_add_up(llm):
    pieces, last = [], None
    for out in llm.stream("Once upon a time", SamplingParams(**GREEDY)):
        pieces.append(out.outputs[0].delta_text)
        last = out
    assert last.finished
    assert "".join(pieces) == last.outputs[0].text
    full = llm.generate("Once upon a time", SamplingParams(**GREEDY))[0]
    assert last.outputs[0].token_ids == full.outputs[0].token_ids


def test_streaming_aborted_halfway_frees_its_kv(llm):
    chunks = 0
    for out in llm.stream("Once upon a time",
                          SamplingParams(temperature=0, max_tokens=400, ignore_eos=True)):
        chunks += 1
        assert not out.finished
        if chunks == 3:
            assert llm.stats()["kv_usage"] > 0
            break  # closing the generator aborts the request
    wait_until(lambda: llm.stats()["kv_usage"] == 0 and llm.stats()["num_running"] == 0,
               "the aborted stream's KV blocks to be freed")
    wait_until(lambda: llm._engine.queued_requests() == 0, "the aborted stream's queue to go")
    assert llm.generate("Hi", SamplingParams(max_tokens=2))[0].finished


def test_keyboard_interrupt_aborts_the_batch(llm):
    import _thread
    import threading
    timer = threading.Timer(0.05, _thread.interrupt_main)
    timer.start()
    with pytest.raises(KeyboardInterrupt):
        llm.generate(["Once upon a time"] * 4,
                     SamplingParams(temperature=0, max_tokens=400, ignore_eos=True))
    timer.cancel()
    wait_until(lambda: llm.stats()["kv_usage"] == 0 and llm.stats()["num_running"] == 0,
               "the interrupted batch's KV blocks to be freed")


def test_calc_helpers_agree_with_kvforge_calc():
    assert kvforge.calc_kv_cache_gb(32, 8, 4096, 32) == 16.0
    assert kvforge.calc_kv_cache_gb(32, 8, 8192, 8) == 8.0
    r = kvforge.calc(num_layers=32, num_kv_heads=8, head_dim=128, seq_len=8192, batch_size=8)
    assert r["kv_cache_gib"] == pytest.approx(kvforge.calc_kv_cache_gb(32, 8, 8192, 8))
    with pytest.raises(ValueError):
        kvforge.calc("no-such-model", seq_len=10)
    with pytest.raises(ValueError):
        kvforge.calc_kv_cache_gb(0, 1, 1, 1)


def test_calc_equals_the_cli():
    out = subprocess.run([cli_path(), "calc", "--preset", "llama-3-70b", "--seq-len", "8192",
                          "--json"], capture_output=True, text=True, check=True).stdout
    assert kvforge.calc("llama-3-70b", seq_len=8192) == json.loads(out)


LONG_PROMPT = "Once upon a time, there was a little girl named Lily. " * 6


def test_kv_policy_per_engine_and_per_request():
    # Engine-wide StreamingLLM: generation far past the context in bounded KV.
    streaming = LLM(max_model_len=128, kv_policy="streaming", kv_budget=48)
    out = streaming.generate(["Once upon a time"],
                             SamplingParams(temperature=0, max_tokens=600, ignore_eos=True))[0]
    assert len(out.outputs[0].token_ids) == 600
    assert out.metrics.kv_evicted_tokens > 500
    assert out.metrics.kv_peak_tokens <= 48 + 16
    # Per request: SnapKV keeps 25% of the prompt; a budget holding everything changes nothing.
    llm = LLM(max_model_len=512)
    plain = llm.generate([LONG_PROMPT], SamplingParams(**GREEDY))[0]
    roomy = llm.generate([LONG_PROMPT], SamplingParams(**GREEDY, kv_policy="snapkv",
                                                       kv_budget=4096))[0]
    assert roomy.outputs[0].token_ids == plain.outputs[0].token_ids
    assert roomy.metrics.kv_evicted_tokens == 0
    snap = llm.generate([LONG_PROMPT], SamplingParams(**GREEDY, kv_policy={
        "name": "snapkv", "budget": 0.25, "window": 8, "pool_kernel": 5}))[0]
    assert snap.metrics.kv_evicted_tokens > 0
    assert len(snap.outputs[0].token_ids) == GREEDY["max_tokens"]
    # Per-KV-head sets: every head keeps the same count, so the same tokens leave the table.
    per_head = llm.generate([LONG_PROMPT], SamplingParams(**GREEDY, kv_policy={
        "name": "snapkv", "budget": 0.25, "window": 8, "pool_kernel": 5, "heads": "per_head"}))[0]
    assert per_head.metrics.kv_evicted_tokens == snap.metrics.kv_evicted_tokens
    assert len(per_head.outputs[0].token_ids) == GREEDY["max_tokens"]


@pytest.mark.parametrize("kwargs, error", [
    (dict(kv_policy="bogus", kv_budget=8), ValueError),
    (dict(kv_policy="h2o"), ValueError),                  # no budget
    (dict(kv_budget=8), ValueError),                      # budget without a policy
    (dict(kv_policy="h2o", kv_budget=2.5), ValueError),   # neither tokens nor a fraction
    (dict(kv_policy={"name": "snapkv", "budget": 8, "pool_kernel": 4}), ValueError),
    (dict(kv_policy={"name": "h2o", "budget": 8, "colour": 1}), TypeError),
    (dict(kv_policy=3), TypeError),
    (dict(kv_policy={"name": "snapkv", "budget": 8, "heads": "bogus"}), ValueError),
    (dict(kv_policy={"name": "streaming", "budget": 8, "heads": "per_head"}), ValueError),
])
def test_bad_kv_policies_raise(kwargs, error):
    with pytest.raises(error):
        SamplingParams(**kwargs)


def test_bad_engine_kv_policy_raises():
    with pytest.raises(ValueError):
        LLM(kv_policy="snapkv", kv_budget=0)
    with pytest.raises(ValueError):
        LLM(kv_policy="nope", kv_budget=10)


def test_sparse_decode_policies():
    # Quest reading every block gives the dense tokens; a small budget reads fewer, evicts none.
    plain = LLM(max_model_len=512)
    want = plain.generate([LONG_PROMPT], SamplingParams(**GREEDY))[0].outputs[0].token_ids
    covering = LLM(max_model_len=512, kv_policy="quest", kv_budget=4096)
    assert covering.generate([LONG_PROMPT], SamplingParams(**GREEDY))[0].outputs[0].token_ids == want
    nsa = LLM(max_model_len=512, kv_policy="nsa", kv_budget=64, kv_window=16)
    out = nsa.generate([LONG_PROMPT], SamplingParams(**GREEDY))[0]
    assert len(out.outputs[0].token_ids) == GREEDY["max_tokens"]
    assert out.metrics.kv_evicted_tokens == 0
    # An engine without block summaries refuses a sparse request.
    with pytest.raises(ValueError):
        plain.generate([LONG_PROMPT], SamplingParams(**GREEDY, kv_policy="quest", kv_budget=64))


@pytest.mark.parametrize("form", ["absorbed", "naive", "auto"])
def test_deepseek2_follows_llama_cpp_under_each_mla_form(form):
    # The MoE fixture's llama.cpp greedy ids, prompts as token ids, for each mla_attention form.
    with open(os.path.join(DATA_DIR, "reference", "tiny-random-deepseek2-moe-greedy.json")) as f:
        ref = json.load(f)
    model = os.path.join(DATA_DIR, "models", "tiny-random-deepseek2-moe.gguf")
    llm = LLM(model=model, mla_attention=form, kv_cache_dtype="f32", max_model_len=256)
    assert llm.config["mla_attention"] == form
    cases = ref["cases"]
    prompts = [{"prompt_token_ids": c["prompt_ids"]} for c in cases]
    n = len(cases[0]["gen_ids"])
    outs = llm.generate(prompts, SamplingParams(temperature=0, max_tokens=n))
    for out, c in zip(outs, cases):
        assert out.outputs[0].token_ids == c["gen_ids"]
    llm.close()


def test_bad_mla_attention_raises():
    with pytest.raises(ValueError, match="mla_attention"):
        LLM(mla_attention="sideways")
