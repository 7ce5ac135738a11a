"""Survey example 11.3, an FP8 KV cache with calculated scales, as written for vLLM.

Adapted: the import line and the embedded model. kvforge addition: the bytes per token of the
cache, from the engine configuration actually in effect.
"""
from kvforge import LLM, SamplingParams

llm = LLM(model=None, kv_cache_dtype="fp8", calculate_kv_scales=True)
sampling_params = SamplingParams(temperature=0.7, top_p=0.8, max_tokens=64)
outputs = llm.generate(["Once upon a time,"], sampling_params)

for output in outputs:
    print(f"Prompt: {output.prompt!r}, Generated text: {output.outputs[0].text!r}")
print(f"KV cache dtype: {llm.config['kv_cache_dtype']}, scales: {llm.config['kv_scales']}")
