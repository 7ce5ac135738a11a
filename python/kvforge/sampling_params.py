"""SamplingParams with vLLM's names and defaults (vllm.SamplingParams), and
StructuredOutputsParams (vllm.sampling_params.StructuredOutputsParams)."""
import json as _json
from typing import Dict, List, Optional, Union

from . import _kvforge

_RANDOM_SEED = 0xFFFFFFFF  # the engine picks a seed


def _check_type(name, value, types, what):
    if isinstance(value, bool) and bool not in types:
        raise TypeError(f"SamplingParams.{name} must be {what}, not bool")
    if not isinstance(value, types):
        raise TypeError(f"SamplingParams.{name} must be {what}, not {type(value).__name__}")


def _kv_policy_dict(kv_policy, kv_budget):
    """The engine's kv_policy dict from a name (+ kv_budget) or a dict; None when unset."""
    if kv_policy is None:
        if kv_budget is not None:
            raise ValueError("SamplingParams.kv_budget needs kv_policy")
        return None
    if isinstance(kv_policy, str):
        policy = {"name": kv_policy}
    elif isinstance(kv_policy, dict):
        policy = dict(kv_policy)
    else:
        raise TypeError("SamplingParams.kv_policy must be a policy name, a dict or None, not "
                        f"{type(kv_policy).__name__}")
    if kv_budget is not None:
        _check_type("kv_budget", kv_budget, (int, float), "a number")
        policy["budget"] = float(kv_budget)
    if policy.get("name", "none") != "none" and "budget" not in policy:
        raise ValueError(f"kv_policy {policy.get('name')!r} needs a budget (kv_budget)")
    return policy


class StructuredOutputsParams:
    """Constrains the output to a grammar: exactly one of ``json`` (a JSON Schema, as a dict or
    JSON text), ``json_object`` (any JSON object), ``regex`` (full match), ``choice`` (one of
    the strings) or ``grammar`` (GBNF, llama.cpp's syntax). The engine compiles it when the
    request is added: an invalid schema, regex or grammar raises ValueError with the position.
    """

    def __init__(self, json: Optional[Union[dict, str, bool]] = None, regex: Optional[str] = None,
                 choice: Optional[List[str]] = None, grammar: Optional[str] = None,
                 json_object: Optional[bool] = None):
        given = [name for name, v in (("json", json), ("regex", regex), ("choice", choice),
                                      ("grammar", grammar), ("json_object", json_object))
                 if v is not None and v is not False]
        if len(given) != 1:
            raise ValueError("StructuredOutputsParams takes exactly one of json, regex, choice, "
                             f"grammar, json_object (got {', '.join(given) or 'none'})")
        if json is not None and not isinstance(json, (dict, str, bool)):
            raise TypeError("StructuredOutputsParams.json must be a dict or a JSON string")
        for name, v in (("regex", regex), ("grammar", grammar)):
            if v is not None and not isinstance(v, str):
                raise TypeError(f"StructuredOutputsParams.{name} must be a string")
        if choice is not None:
            if not isinstance(choice, (list, tuple)) or not all(isinstance(c, str) for c in choice):
                raise TypeError("StructuredOutputsParams.choice must be a list of strings")
            choice = list(choice)
        self.json = json
        self.regex = regex
        self.choice = choice
        self.grammar = grammar
        self.json_object = bool(json_object)

    def _to_engine(self) -> dict:
        if self.json is not None:
            text = self.json if isinstance(self.json, str) else _json.dumps(self.json)
            return {"json": text}
        if self.json_object:
            return {"json_object": True}
        if self.regex is not None:
            return {"regex": self.regex}
        if self.choice is not None:
            return {"choice": self.choice}
        return {"grammar": self.grammar}

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items() if v not in (None, False))
        return f"StructuredOutputsParams({fields})"


class SamplingParams:
    """How to sample a request's tokens. Defaults are vLLM's (temperature 1.0, top_p 1.0, top_k
    disabled, max_tokens 16, penalties over the whole sequence); out-of-range values raise
    ValueError with the engine's message, wrong types TypeError.

    kvforge extensions: ``beam_width`` / ``length_penalty`` (beam search on shared KV blocks),
    ``cache_salt`` (prefix-cache isolation), ``penalty_last_n`` (-1: the whole sequence),
    ``kv_policy`` / ``kv_budget`` (KV eviction for this request: a policy name such as
    ``"snapkv"`` with ``kv_budget`` tokens or a fraction of the prompt, or a dict
    ``{"name", "budget", "sinks", "window", "pool_kernel", "beta", "seed", "heads"}``; None: the engine's).
    ``structured_outputs`` (a StructuredOutputsParams) constrains the output to a grammar;
    ``logit_bias`` (token id -> -100..100, OpenAI's semantics: -100 bans the token) shifts logits.
    """

    def __init__(self, n: int = 1, presence_penalty: float = 0.0, frequency_penalty: float = 0.0,
                 repetition_penalty: float = 1.0, temperature: float = 1.0, top_p: float = 1.0,
                 top_k: int = 0, min_p: float = 0.0, seed: Optional[int] = None,
                 stop: Optional[Union[str, List[str]]] = None,
                 stop_token_ids: Optional[List[int]] = None, ignore_eos: bool = False,
                 max_tokens: Optional[int] = 16, logprobs: Optional[int] = None,
                 skip_special_tokens: bool = True, beam_width: int = 0,
                 length_penalty: float = 1.0, cache_salt: Optional[str] = None,
                 penalty_last_n: int = -1, kv_policy: Optional[Union[str, dict]] = None,
                 kv_budget: Optional[float] = None,
                 structured_outputs: Optional[StructuredOutputsParams] = None,
                 logit_bias: Optional[Dict[int, float]] = None):
        _check_type("n", n, (int,), "an int")
        for name, value in (("presence_penalty", presence_penalty),
                            ("frequency_penalty", frequency_penalty),
                            ("repetition_penalty", repetition_penalty),
                            ("temperature", temperature), ("top_p", top_p), ("min_p", min_p),
                            ("length_penalty", length_penalty)):
            _check_type(name, value, (int, float), "a number")
        _check_type("top_k", top_k, (int,), "an int")
        _check_type("ignore_eos", ignore_eos, (bool,), "a bool")
        _check_type("skip_special_tokens", skip_special_tokens, (bool,), "a bool")
        _check_type("beam_width", beam_width, (int,), "an int")
        _check_type("penalty_last_n", penalty_last_n, (int,), "an int")
        if seed is not None:
            _check_type("seed", seed, (int,), "an int or None")
            if not 0 <= seed < _RANDOM_SEED:
                raise ValueError(f"seed must be in [0, {_RANDOM_SEED}) (got {seed})")
        if max_tokens is not None:
            _check_type("max_tokens", max_tokens, (int,), "an int or None")
        if logprobs is not None:
            _check_type("logprobs", logprobs, (int,), "an int or None")
            if logprobs < 0:
                raise ValueError(f"logprobs must be >= 0 (got {logprobs})")
        if isinstance(stop, str):
            stop = [stop]
        stop = list(stop or [])
        for s in stop:
            _check_type("stop", s, (str,), "a string or a list of strings")
        stop_token_ids = list(stop_token_ids or [])
        for t in stop_token_ids:
            _check_type("stop_token_ids", t, (int,), "a list of ints")
        if cache_salt is not None:
            _check_type("cache_salt", cache_salt, (str,), "a string or None")
        self.n = n
        self.presence_penalty = float(presence_penalty)
        self.frequency_penalty = float(frequency_penalty)
        self.repetition_penalty = float(repetition_penalty)
        self.temperature = float(temperature)
        self.top_p = float(top_p)
        self.top_k = top_k
        self.min_p = float(min_p)
        self.seed = seed
        self.stop = stop
        self.stop_token_ids = stop_token_ids
        self.ignore_eos = ignore_eos
        self.max_tokens = max_tokens
        self.logprobs = logprobs
        self.skip_special_tokens = skip_special_tokens
        self.beam_width = beam_width
        self.length_penalty = float(length_penalty)
        self.cache_salt = cache_salt
        self.penalty_last_n = penalty_last_n
        self.kv_policy = _kv_policy_dict(kv_policy, kv_budget)
        if structured_outputs is not None and not isinstance(structured_outputs,
                                                             StructuredOutputsParams):
            raise TypeError("SamplingParams.structured_outputs must be a StructuredOutputsParams")
        self.structured_outputs = structured_outputs
        if logit_bias is not None:
            if not isinstance(logit_bias, dict):
                raise TypeError("SamplingParams.logit_bias must be a dict of token id -> bias")
            for t, b in logit_bias.items():
                _check_type("logit_bias", t, (int,), "a dict with int keys")
                _check_type("logit_bias", b, (int, float), "a dict with number values")
            logit_bias = {int(t): float(b) for t, b in logit_bias.items()}
        self.logit_bias = logit_bias
        # The engine's own checks, with its messages (ValueError).
        _kvforge.check_sampling_params(self._to_engine(max_tokens or 16, None))

    def _to_engine(self, default_max_tokens: int, seed: Optional[int]) -> dict:
        """The engine's field names and conventions. ``default_max_tokens`` stands in for
        max_tokens=None (vLLM: the rest of the context); ``seed`` for seed=None."""
        chosen_seed = self.seed if self.seed is not None else seed
        return {
            "n": self.n,
            "presence_penalty": self.presence_penalty,
            "frequency_penalty": self.frequency_penalty,
            "repetition_penalty": self.repetition_penalty,
            "penalty_last_n": self.penalty_last_n,
            "temperature": self.temperature,
            "top_p": self.top_p,
            "top_k": self.top_k,
            "min_p": self.min_p,
            "seed": _RANDOM_SEED if chosen_seed is None else chosen_seed,
            "stop": self.stop,
            "stop_token_ids": self.stop_token_ids,
            "ignore_eos": self.ignore_eos,
            "skip_special_tokens": self.skip_special_tokens,
            "max_tokens": self.max_tokens if self.max_tokens is not None else default_max_tokens,
            # logprobs=0 in vLLM: only the chosen token's; the engine reports one alternative.
            "logprobs": 0 if self.logprobs is None else max(1, self.logprobs),
            "beam_width": self.beam_width,
            "length_penalty": self.length_penalty,
            "cache_salt": self.cache_salt or "",
            **({"kv_policy": self.kv_policy} if self.kv_policy is not None else {}),
            **({"structured_outputs": self.structured_outputs._to_engine()}
               if self.structured_outputs is not None else {}),
            **({"logit_bias": sorted(self.logit_bias.items())} if self.logit_bias else {}),
        }

    def __repr__(self) -> str:
        fields = ", ".join(f"{k}={v!r}" for k, v in vars(self).items())
        return f"SamplingParams({fields})"
