"""Result types, shaped like vLLM's (vllm.outputs)."""
from dataclasses import dataclass, field
from typing import Dict, List, Optional


@dataclass
class Logprob:
    """One candidate token's log-probability (vllm.sequence.Logprob)."""

    logprob: float
    rank: Optional[int] = None  # 1 = the most likely token
    decoded_token: Optional[str] = None


@dataclass
class CompletionOutput:
    """One completion of a prompt. ``text`` and ``token_ids`` are cumulative; while streaming,
    ``delta_text`` / ``delta_token_ids`` hold what the latest step added."""

    index: int
    text: str
    token_ids: List[int]
    cumulative_logprob: Optional[float]
    logprobs: Optional[List[Dict[int, Logprob]]]
    finish_reason: Optional[str] = None  # "stop" | "length" | "abort" | None while running
    stop_reason: Optional[object] = None
    delta_text: str = ""
    delta_token_ids: List[int] = field(default_factory=list)

    def finished(self) -> bool:
        return self.finish_reason is not None


@dataclass
class RequestMetrics:
    """Timings (milliseconds) and counts of one request, measured by the engine."""

    queue_ms: float = 0.0
    ttft_ms: float = 0.0
    e2e_ms: float = 0.0
    itl_ms: List[float] = field(default_factory=list)
    prompt_tokens: int = 0
    generated_tokens: int = 0
    num_preemptions: int = 0
    cached_tokens: int = 0
    kv_evicted_tokens: int = 0  # KV eviction (kv_policy): tokens evicted from the first sequence
    kv_peak_tokens: int = 0  # and the most KV slots it held
    spec_draft_tokens: int = 0  # speculative decoding: tokens drafted and verified
    spec_accepted_tokens: int = 0  # drafts kept
    spec_verify_steps: int = 0  # steps that verified drafts


@dataclass
class RequestOutput:
    """All completions of one prompt (vllm.RequestOutput)."""

    request_id: str
    prompt: Optional[str]
    prompt_token_ids: List[int]
    outputs: List[CompletionOutput]
    finished: bool
    metrics: RequestMetrics
    num_cached_tokens: int = 0
