"""Survey example 11.1, basic offline inference, as written for vLLM.

Adapted: the import line, and model=None (the TinyStories model embedded in kvforge; give a GGUF
path for another). gpu_memory_utilization is read as the fraction of available RAM for the KV
cache (kvforge says so on stderr); max_model_len 8192 is beyond this model's trained 512 tokens,
which kvforge allows as vLLM does with an explicit max_model_len.
"""
from kvforge import LLM, SamplingParams

prompts = [
    "Once upon a time,",
    "The little dog",
    "Lily wanted to",
]
sampling_params = SamplingParams(temperature=0.8, max_tokens=512)

llm = LLM(model=None, gpu_memory_utilization=0.90, max_model_len=8192)
outputs = llm.generate(prompts, sampling_params)

for output in outputs:
    prompt = output.prompt
    generated_text = output.outputs[0].text
    print(f"Prompt: {prompt!r}, Generated text: {generated_text!r}")
