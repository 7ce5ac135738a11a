"""KV-cache memory arithmetic: the survey's one-line helper, and `kvforge calc` itself."""
import json

from . import _kvforge


def calc_kv_cache_gb(num_layers, batch_size, seq_len, num_kv_heads, head_dim=128, dtype_bytes=2):
    """KV cache size in GB (GiB, 2**30 bytes): K and V, every layer, every sequence and token.

    2 x num_layers x batch_size x seq_len x num_kv_heads x head_dim x dtype_bytes / 2**30.
    For dtype_bytes 2 (f16) it equals ``calc(...)["kv_cache_gib"]`` of the same shape.
    """
    for name, value in (("num_layers", num_layers), ("batch_size", batch_size),
                        ("seq_len", seq_len), ("num_kv_heads", num_kv_heads),
                        ("head_dim", head_dim)):
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        if value <= 0:
            raise ValueError(f"{name} must be positive (got {value})")
    if isinstance(dtype_bytes, bool) or not isinstance(dtype_bytes, (int, float)) or dtype_bytes <= 0:
        raise ValueError(f"dtype_bytes must be a positive number (got {dtype_bytes!r})")
    return 2 * num_layers * batch_size * seq_len * num_kv_heads * head_dim * dtype_bytes / 2**30


def calc(preset=None, *, seq_len, num_layers=0, num_heads=0, num_kv_heads=0, head_dim=0,
         mla_rank=0, rope_dim=0, batch_size=1, kv_cache_dtype="f16", block_tokens=0):
    """``kvforge calc --json`` as a dict: bytes per token, KV cache bytes for ``batch_size``
    sequences of ``seq_len`` tokens, the paged total, and the MHA / GQA / MQA (/ MLA) variants.

    Give a ``preset`` name (e.g. "llama-3-70b", "deepseek-v3") or a custom shape
    (``num_layers`` with ``num_kv_heads`` and ``head_dim``, or ``mla_rank`` and ``rope_dim``).
    """
    text = _kvforge.calc(preset or "", num_layers, num_heads, num_kv_heads, head_dim, mla_rank,
                         rope_dim, seq_len, batch_size, kv_cache_dtype, block_tokens)
    return json.loads(text)
