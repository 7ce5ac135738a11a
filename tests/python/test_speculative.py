"""Speculative decoding from Python (vLLM's speculative_config): greedy outputs equal plain
decoding for prompt lookup and for a draft model, the statistics count drafts, and bad configs
raise as vLLM's LLM() does."""
import os

import pytest

import kvforge
from conftest import DATA_DIR

STORIES = os.path.join(DATA_DIR, "models", "stories260K.gguf")
PROMPTS = ["Once upon a time, there was a little girl named Lily. She liked to play with her "
           "ball. Once upon a time, there was a little girl named",
           "The cat sat on the mat. The dog sat on the log. The cat sat on the"]


def greedy_tokens(llm):
    params = kvforge.SamplingParams(temperature=0, max_tokens=48, ignore_eos=True)
    return [o.outputs[0].token_ids for o in llm.generate(PROMPTS, params)]


@pytest.fixture(scope="module")
def plain():
    with kvforge.LLM(STORIES, max_model_len=512, threads=2) as llm:
        yield greedy_tokens(llm)


@pytest.mark.parametrize("config", [
    {"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4,
     "prompt_lookup_min": 2, "adaptive": False},
    {"model": STORIES, "num_speculative_tokens": 4, "kv_cache_dtype": "q4_0"},
])
def test_greedy_output_equals_plain_decoding(plain, config):
    with kvforge.LLM(STORIES, max_model_len=512, threads=2, speculative_config=config) as llm:
        assert greedy_tokens(llm) == plain
        stats = llm.stats()
        assert stats["spec_method"] == ("ngram" if "method" in config else "draft_model")
        assert stats["spec_draft_tokens"] > 0
        assert 0 <= stats["spec_accepted_tokens"] <= stats["spec_draft_tokens"]
        out = llm.generate(PROMPTS[0], kvforge.SamplingParams(temperature=0, max_tokens=16))
        assert out[0].metrics.spec_verify_steps >= 0
        assert llm.config["speculative_method"] == stats["spec_method"]


def test_bad_speculative_configs_raise():
    with pytest.raises(TypeError, match="unexpected key"):
        kvforge.engine_config(speculative_config={"method": "ngram", "lookahead": 3})
    with pytest.raises(ValueError, match="method"):
        kvforge.engine_config(speculative_config={"num_speculative_tokens": 3})
    with pytest.raises(ValueError):
        kvforge.engine_config(speculative_config={"method": "eagle"})
    with pytest.raises(ValueError, match="num_speculative_tokens"):
        kvforge.LLM(STORIES, speculative_config={"method": "ngram", "num_speculative_tokens": 0})
    with pytest.raises(ValueError, match="vocabulary"):
        kvforge.LLM(STORIES, speculative_config={
            "model": os.path.join(DATA_DIR, "models", "tiny-random-qwen2.gguf")})
    cfg = kvforge.engine_config(speculative_config={"model": STORIES})
    assert cfg["speculative_method"] == "draft_model"
    assert cfg["speculative_model"] == STORIES
