"""Survey example 11.5, KV offload to CPU memory (LMCache's local-CPU backend in vLLM).

Spelled the kvforge way: kvforge has no LMCache connector. Its CPU offload today is swap space:
when the KV pool is full, preempted sequences move their KV blocks to host memory
(preemption_mode="swap", swap_space in GiB, vLLM's names) and come back instead of being
recomputed. The tiered RAM / disk / Redis store is separate work; this example will use it when it
lands. A deliberately small KV pool forces the offload here.
"""
from kvforge import LLM, SamplingParams

llm = LLM(model=None, kv_cache_memory_bytes=1 << 20, block_size=16, max_num_seqs=16,
          preemption_mode="swap", swap_space=0.25)
sampling_params = SamplingParams(temperature=0.0, max_tokens=200, ignore_eos=True)
prompts = [f"Story number {i}: once upon a time" for i in range(12)]
outputs = llm.generate(prompts, sampling_params)

preempted = sum(o.metrics.num_preemptions for o in outputs)
print(f"Requests: {len(outputs)}, generated tokens: "
      f"{sum(len(o.outputs[0].token_ids) for o in outputs)}, preemptions (KV swapped to CPU): "
      f"{preempted}")

# The same requests with room for all of them: the outputs do not change.
roomy = LLM(model=None)
same = roomy.generate(prompts, sampling_params)
print(f"Outputs equal to an unconstrained run: "
      f"{[o.outputs[0].token_ids for o in outputs] == [o.outputs[0].token_ids for o in same]}")
