"""Survey example 11.2, automatic prefix caching, as written for vLLM.

Adapted: the import line and the embedded model. kvforge addition: the last line prints how many
prompt tokens were served from the prefix cache (vLLM reports it in RequestOutput too).
"""
from kvforge import LLM, SamplingParams

# A long shared prefix (a system prompt or a document), then different questions.
long_prefix = (
    "Once upon a time, there was a little girl named Lily. She loved to play outside in the "
    "park with her friends. One day, she found a big red ball under a tree. "
)
prompts = [long_prefix + q for q in ("Who found the ball?", "Where did Lily play?",
                                     "What color was the ball?")]

llm = LLM(model=None, enable_prefix_caching=True, max_num_batched_tokens=16384)
sampling_params = SamplingParams(temperature=0.0, max_tokens=32)

# The first request computes the prefix; the later ones reuse its KV blocks.
outputs = llm.generate(prompts[:1], sampling_params)
outputs += llm.generate(prompts[1:], sampling_params)

for output in outputs:
    print(f"Prompt: {output.prompt!r}, Generated text: {output.outputs[0].text!r}")
print(f"Cached prompt tokens: {[o.num_cached_tokens for o in outputs]}")
