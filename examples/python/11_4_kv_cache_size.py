"""Survey example 11.4, the KV-cache size calculator.

Adapted: calc_kv_cache_gb comes from kvforge (the same formula; kvforge.calc is the full
calculator, the same as `kvforge calc`). GB here is 2**30 bytes.
"""
from kvforge import calc_kv_cache_gb

# Llama-2-7B (MHA: 32 KV heads), 8 sequences of 4096 tokens, f16.
print(f"Llama-2-7B, batch 8 x 4096 tokens: {calc_kv_cache_gb(32, 8, 4096, 32):.2f} GB")
# Llama-3-8B (GQA: 8 KV heads), 8 sequences of 8192 tokens, f16: twice the tokens, a quarter of
# the heads.
print(f"Llama-3-8B, batch 8 x 8192 tokens: {calc_kv_cache_gb(32, 8, 8192, 8):.2f} GB")
