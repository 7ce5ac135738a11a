"""LLM: vLLM's offline-inference class over kvforge's continuous-batching engine."""
import json
import sys
from typing import Dict, Iterator, List, Optional, Sequence, Union

from . import _kvforge
from .outputs import CompletionOutput, Logprob, RequestMetrics, RequestOutput
from .sampling_params import SamplingParams

# How long one wait for engine output lasts before Python gets control back (to notice Ctrl-C).
_WAIT_S = 0.05

# EngineConfig's fields: name -> {"kind", "help", "choices", "default", "group", "byte_size",
# "per_request", "flag"}, from the C++ table.
_FIELDS = {f["name"]: f for f in _kvforge.config_fields()}


def engine_options() -> Dict[str, dict]:
    """Every engine option LLM() accepts by its EngineConfig name, with kind, help and default."""
    return {name: dict(f) for name, f in _FIELDS.items()}


def engine_config(model: Optional[str] = None, **kwargs) -> Dict[str, str]:
    """The configuration LLM(model, **kwargs) would run with (every option by name, text form),
    without loading anything. Bad names raise TypeError, bad values ValueError, as LLM() does."""
    options, _ = _engine_options(dict(kwargs))
    if model:
        options["model"] = model
    return dict(_kvforge.resolve_config(options))


def kv_cache_dtypes() -> List[str]:
    """The names kv_cache_dtype (and kv_cache_dtype_k / _v) accept."""
    return list(_FIELDS["kv_cache_dtype"]["choices"])


def _option_text(name: str, value) -> str:
    """A Python value as the engine option's text form; TypeError for the wrong type."""
    kind = _FIELDS[name]["kind"]
    if kind == "bool":
        if not isinstance(value, bool):
            raise TypeError(f"{name} must be a bool, not {type(value).__name__}")
        return "true" if value else "false"
    if kind in ("int", "uint"):
        if _FIELDS[name]["byte_size"] and isinstance(value, str):
            return value  # "8GiB", "512MiB": the engine parses the unit
        if isinstance(value, bool) or not isinstance(value, int):
            raise TypeError(f"{name} must be an int, not {type(value).__name__}")
        return str(value)
    if kind == "float":
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise TypeError(f"{name} must be a number, not {type(value).__name__}")
        return repr(float(value))
    if not isinstance(value, str):
        raise TypeError(f"{name} must be a str, not {type(value).__name__}")
    return value


def _engine_options(kwargs: dict) -> (Dict[str, str], Optional[int]):
    """vLLM's keyword arguments -> the engine's options (text), and the default request seed."""
    options: Dict[str, str] = {}
    seed = kwargs.pop("seed", None)
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, int)):
        raise TypeError(f"seed must be an int or None, not {type(seed).__name__}")
    if "gpu_memory_utilization" in kwargs:
        if "memory_utilization" in kwargs:
            raise TypeError("give memory_utilization or gpu_memory_utilization, not both")
        print("kvforge: gpu_memory_utilization is read as memory_utilization (the fraction of "
              "available RAM for the KV cache)", file=sys.stderr)
        kwargs["memory_utilization"] = kwargs.pop("gpu_memory_utilization")
    if "swap_space" in kwargs:  # vLLM: GiB of CPU swap space per GPU
        gib = kwargs.pop("swap_space")
        if isinstance(gib, bool) or not isinstance(gib, (int, float)) or gib < 0:
            raise ValueError(f"swap_space must be a non-negative number of GiB (got {gib!r})")
        kwargs["swap_space_bytes"] = int(gib * 2**30)
    if "speculative_config" in kwargs:
        kwargs.update(_speculative_options(kwargs.pop("speculative_config"), kwargs))
    if "enable_chunked_prefill" in kwargs:
        kwargs["chunked_prefill"] = kwargs.pop("enable_chunked_prefill")
    if "calculate_kv_scales" in kwargs:
        flag = kwargs.pop("calculate_kv_scales")
        if not isinstance(flag, bool):
            raise TypeError(f"calculate_kv_scales must be a bool, not {type(flag).__name__}")
        if flag:
            if kwargs.get("kv_scales"):
                raise ValueError("calculate_kv_scales=True and kv_scales name two scale sources")
            kwargs["kv_scales"] = "calibrate"
    for name, value in kwargs.items():
        if name not in _FIELDS:
            raise TypeError(f"LLM() got an unexpected keyword argument '{name}'")
        if value is None:
            continue  # the engine's default
        options[name] = _option_text(name, value)
    return options, seed


# vLLM's speculative_config keys -> engine options (method "ngram" or a draft "model").
_SPEC_KEYS = {"method": "speculative_method", "model": "speculative_model",
              "num_speculative_tokens": "num_speculative_tokens",
              "prompt_lookup_max": "prompt_lookup_max", "prompt_lookup_min": "prompt_lookup_min",
              "kv_cache_dtype": "speculative_kv_cache_dtype", "adaptive": "speculative_adaptive"}


def _speculative_options(config, kwargs: dict) -> dict:
    """vLLM's LLM(speculative_config={...}) as engine options; TypeError / ValueError as LLM()."""
    if config is None:
        return {}
    if not isinstance(config, dict):
        raise TypeError(f"speculative_config must be a dict, not {type(config).__name__}")
    out = {}
    for key, value in config.items():
        if key not in _SPEC_KEYS:
            raise TypeError(f"speculative_config got an unexpected key '{key}' "
                            f"(accepted: {', '.join(sorted(_SPEC_KEYS))})")
        name = _SPEC_KEYS[key]
        if name in kwargs:
            raise TypeError(f"speculative_config['{key}'] and {name}= name the same option")
        if key == "method" and value in ("draft_model", "draft"):
            value = "draft_model"
        out[name] = value
    if out.get("speculative_model") and "speculative_method" not in out:
        out["speculative_method"] = "draft_model"
    if "speculative_method" not in out:
        raise ValueError("speculative_config needs a 'method' (\"ngram\") or a draft 'model'")
    return out


def _text(b: bytes) -> str:
    return b.decode("utf-8", errors="replace")


class Tokenizer:
    """The model's tokenizer (llama.cpp-exact): encode / decode, as vLLM's get_tokenizer()."""

    def __init__(self, engine, info):
        self._engine = engine
        self.vocab_size = info["vocab_size"]
        self.bos_token = info["bos_text"] or None
        self.eos_token = info["eos_text"] or None

    def encode(self, text: str, add_special_tokens: bool = True,
               parse_special: bool = False) -> List[int]:
        return self._engine.tokenize(text, add_special_tokens, parse_special)

    def decode(self, token_ids: Sequence[int], skip_special_tokens: bool = True) -> str:
        return _text(self._engine.detokenize(list(token_ids), skip_special_tokens))

    def __call__(self, text: str, add_special_tokens: bool = True) -> Dict[str, List[int]]:
        return {"input_ids": self.encode(text, add_special_tokens)}

    def __len__(self) -> int:
        return self.vocab_size


class LLM:
    """An engine for offline batched inference, with vLLM's constructor and methods.

    ``model``: a GGUF path, or None for the embedded TinyStories model. Keyword arguments are
    the engine options (``kvforge.engine_options()``: max_model_len, kv_cache_memory_bytes,
    memory_utilization, max_num_batched_tokens, max_num_seqs, block_size,
    enable_prefix_caching, prefix_cache_mode, kv_cache_dtype, preemption_mode, ...) and vLLM's
    aliases gpu_memory_utilization, swap_space (GiB), enable_chunked_prefill, speculative_config
    ({"method": "ngram", "num_speculative_tokens": 5, "prompt_lookup_max": 4, ...} or
    {"model": "draft.gguf", "num_speculative_tokens": 4}),
    calculate_kv_scales and seed. Unknown names raise TypeError, bad values ValueError.
    """

    def __init__(self, model: Optional[str] = None, **kwargs):
        if model is not None and not isinstance(model, str):
            raise TypeError(f"model must be a path (str) or None, not {type(model).__name__}")
        options, self._seed = _engine_options(dict(kwargs))
        if model:
            options["model"] = model
        self._engine = _kvforge.Engine(options)
        self._info = self._engine.info()
        self._tokenizer = Tokenizer(self._engine, self._info)
        self._next_request = 0

    # --- lifetime --------------------------------------------------------------------------

    def close(self) -> None:
        """Stops the engine thread (aborting anything still running). Idempotent."""
        if getattr(self, "_engine", None) is not None:
            self._engine.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __del__(self):
        self.close()

    # --- facts ---------------------------------------------------------------------------------

    def get_tokenizer(self) -> Tokenizer:
        return self._tokenizer

    @property
    def max_model_len(self) -> int:
        return self._info["max_model_len"]

    @property
    def config(self) -> Dict[str, str]:
        """The engine configuration in effect, every option by name (text form)."""
        return dict(self._info["config"])

    def stats(self) -> dict:
        """Engine statistics: running / waiting sequences, KV usage, prefix-cache hits, ..."""
        return self._engine.stats()

    # --- generation ----------------------------------------------------------------------------

    def generate(self, prompts, sampling_params=None, use_tqdm: bool = False) -> List[RequestOutput]:
        """Runs every prompt concurrently; returns one RequestOutput per prompt, in order.

        ``prompts``: a string, a list of strings, a list of token ids, a list of such lists, or
        vLLM's {"prompt": ...} / {"prompt_token_ids": [...]} dicts. ``sampling_params``: one
        SamplingParams for all, a list with one per prompt, or None (the defaults).
        Ctrl-C (KeyboardInterrupt) aborts every request of the call and frees its KV.
        """
        items = self._prompts(prompts)
        params = self._params_per_prompt(sampling_params, len(items))
        ids = self._engine.submit_batch([tokens for _, tokens in items],
                                        [self._engine_params(tokens, p)
                                         for (_, tokens), p in zip(items, params)])
        finals: Dict[int, dict] = {}
        try:
            pending = list(ids)
            while pending:
                for out in self._engine.wait(pending, _WAIT_S):
                    if out["finished"]:
                        finals[out["request_id"]] = out
                pending = [i for i in ids if i not in finals]
        except BaseException:
            self._abort(i for i in ids if i not in finals)
            raise
        return [self._request_output(finals[i], text, rid)
                for i, (text, _), rid in zip(ids, items, self._names(ids))]

    def stream(self, prompt, sampling_params: Optional[SamplingParams] = None
               ) -> Iterator[RequestOutput]:
        """Yields a RequestOutput each time the request advances (cumulative ``text``, and the
        step's ``delta_text`` per completion); the last one has ``finished`` True. Closing the
        generator early (break, an exception, Ctrl-C) aborts the request and frees its KV."""
        items = self._prompts(prompt)
        if len(items) != 1:
            raise ValueError("stream() takes one prompt")
        params = self._params_per_prompt(sampling_params, 1)
        tokens = items[0][1]
        ids = [self._engine.submit(tokens, self._engine_params(tokens, params[0]))]
        rid = self._names(ids)[0]
        finished = False
        try:
            while not finished:
                for out in self._engine.wait(ids, _WAIT_S):
                    finished = finished or out["finished"]
                    yield self._request_output(out, items[0][0], rid)
        finally:
            if not finished:
                self._abort(ids)

    def chat(self, messages, sampling_params=None, chat_template: Optional[str] = None,
             add_generation_prompt: bool = True, use_tqdm: bool = False) -> List[RequestOutput]:
        """Renders ``messages`` (a list of {"role", "content"} dicts, or a list of such lists)
        with the model's chat template (or ``chat_template``; ChatML when the model has none)
        and generates a reply for each conversation."""
        if not isinstance(messages, (list, tuple)) or not messages:
            raise ValueError("messages must be a non-empty list of {'role', 'content'} dicts")
        conversations = messages if isinstance(messages[0], (list, tuple)) else [messages]
        prompts = []
        for conv in conversations:
            text = self.render_chat(conv, chat_template, add_generation_prompt)
            bos = self._info["bos_text"]
            add_bos = not bos or not text.startswith(bos)  # templates may write BOS themselves
            ids = self._engine.tokenize(text, add_bos, True)
            prompts.append({"prompt": text, "prompt_token_ids": ids})
        return self.generate(prompts, sampling_params, use_tqdm)

    def render_chat(self, messages, chat_template: Optional[str] = None,
                    add_generation_prompt: bool = True) -> str:
        """The prompt text ``chat`` would generate from."""
        for m in messages:
            if not isinstance(m, dict) or "role" not in m:
                raise ValueError("each message must be a dict with a 'role' (and 'content')")
        source = chat_template if chat_template is not None else self._info["chat_template"]
        return _text(_kvforge.render_chat(source, json.dumps(list(messages)),
                                          self._info["bos_text"], self._info["eos_text"],
                                          add_generation_prompt))

    # --- helpers -------------------------------------------------------------------------------

    def _prompts(self, prompts) -> List[tuple]:
        """-> [(prompt text or None, token ids)]."""
        if isinstance(prompts, (str, dict)):
            prompts = [prompts]
        elif isinstance(prompts, (list, tuple)) and prompts and all(
                isinstance(t, int) and not isinstance(t, bool) for t in prompts):
            prompts = [list(prompts)]
        if not isinstance(prompts, (list, tuple)) or not prompts:
            raise ValueError("prompts must be a string, a list of strings or token-id lists")
        items = []
        for p in prompts:
            if isinstance(p, dict):
                if "prompt_token_ids" in p:
                    items.append((p.get("prompt"), self._token_list(p["prompt_token_ids"])))
                elif "prompt" in p:
                    items.append((p["prompt"], self._engine.tokenize(p["prompt"], True, False)))
                else:
                    raise ValueError("a prompt dict needs 'prompt' or 'prompt_token_ids'")
            elif isinstance(p, str):
                items.append((p, self._engine.tokenize(p, True, False)))
            else:
                items.append((None, self._token_list(p)))
        return items

    @staticmethod
    def _token_list(ids) -> List[int]:
        if not isinstance(ids, (list, tuple)) or not all(
                isinstance(t, int) and not isinstance(t, bool) for t in ids):
            raise TypeError("token ids must be a list of ints")
        return list(ids)

    @staticmethod
    def _params_per_prompt(sampling_params, n: int) -> List[SamplingParams]:
        if sampling_params is None:
            return [SamplingParams()] * n
        if isinstance(sampling_params, SamplingParams):
            return [sampling_params] * n
        if isinstance(sampling_params, (list, tuple)):
            if len(sampling_params) != n:
                raise ValueError(f"{len(sampling_params)} sampling params for {n} prompts")
            for p in sampling_params:
                if not isinstance(p, SamplingParams):
                    raise TypeError("sampling_params must be SamplingParams objects")
            return list(sampling_params)
        raise TypeError("sampling_params must be a SamplingParams or a list of them")

    def _engine_params(self, tokens: List[int], params: SamplingParams) -> dict:
        """The engine's form of ``params`` for one request: max_tokens=None is the rest of the
        context, and seed=None the LLM's seed plus the request's number (when it has one)."""
        seed = None if self._seed is None else self._seed + self._next_request
        self._next_request += 1
        return params._to_engine(max(1, self.max_model_len - len(tokens)), seed)

    def _abort(self, ids) -> None:
        ids = list(ids)
        for i in ids:
            self._engine.abort(i)
        self._engine.discard(ids)

    @staticmethod
    def _names(ids) -> List[str]:
        return [str(i) for i in ids]

    def _request_output(self, out: dict, prompt: Optional[str], rid: str) -> RequestOutput:
        completions = []
        for c in out["outputs"]:
            logprobs = None
            if c["token_logprobs"]:
                logprobs = []
                for tok, lp, top in zip(c["token_ids"], c["token_logprobs"], c["top_logprobs"]):
                    entry = {tok: Logprob(lp, None, self._piece(tok))}
                    for rank, (alt, alt_lp) in enumerate(top, start=1):
                        if alt == tok:
                            entry[tok].rank = rank
                        else:
                            entry.setdefault(alt, Logprob(alt_lp, rank, self._piece(alt)))
                    logprobs.append(entry)
            completions.append(CompletionOutput(
                index=c["index"], text=_text(c["text"]), token_ids=list(c["token_ids"]),
                cumulative_logprob=c["cumulative_logprob"], logprobs=logprobs,
                finish_reason=c["finish_reason"], delta_text=_text(c["delta_text"]),
                delta_token_ids=list(c["delta_token_ids"])))
        m = out["metrics"]
        metrics = RequestMetrics(**m)
        return RequestOutput(request_id=rid, prompt=prompt,
                             prompt_token_ids=list(out["prompt_token_ids"]), outputs=completions,
                             finished=out["finished"], metrics=metrics,
                             num_cached_tokens=m["cached_tokens"])

    def _piece(self, token: int) -> str:
        return _text(self._engine.detokenize([token]))
