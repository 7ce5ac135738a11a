"""kvforge — an LLM inference engine whose heart is the KV cache, with vLLM's Python API.

    from kvforge import LLM, SamplingParams
    llm = LLM()                                   # the embedded TinyStories model; or model="x.gguf"
    outputs = llm.generate(["Once upon a time"], SamplingParams(temperature=0.8, max_tokens=64))
    print(outputs[0].outputs[0].text)

Engine options are EngineConfig's fields by name (``kvforge.engine_options()`` lists them), plus
vLLM's spellings where they differ (gpu_memory_utilization, swap_space, enable_chunked_prefill,
calculate_kv_scales, seed). The engine runs on its own thread; Python waits with the GIL released.
"""
from .calc import calc, calc_kv_cache_gb
from .llm import LLM, Tokenizer, engine_config, engine_options, kv_cache_dtypes
from .outputs import CompletionOutput, Logprob, RequestMetrics, RequestOutput
from .sampling_params import SamplingParams, StructuredOutputsParams

__all__ = [
    "LLM",
    "SamplingParams",
    "StructuredOutputsParams",
    "RequestOutput",
    "CompletionOutput",
    "Logprob",
    "RequestMetrics",
    "Tokenizer",
    "calc",
    "calc_kv_cache_gb",
    "engine_config",
    "engine_options",
    "kv_cache_dtypes",
]
