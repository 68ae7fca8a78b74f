"""One client for any OpenAI-compatible endpoint (``vllm serve``, llama.cpp, hosted APIs).

Every stage that talks to a model goes through ``LLMClient.chat``, which adds what batch data
generation needs and the SDK does not: a process-wide bound on requests in flight per endpoint, an
on-disk cache keyed by the request's hash (a rerun makes no new calls, and any worker can reuse any
answer), token usage counted per call, and one error type with a reason code so a stage can record
the item as failed and go on. Retries with exponential backoff on 429, 5xx, timeouts and dropped
connections are the SDK's own (``max_retries``).

The API key is read from the variable named in params at call time; it is sent only as the
request's bearer token and never written to the cache, a record or a log.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass
from typing import Any

from trajforge.schemas.errors import UserError
from trajforge.schemas.params import LLMParams
from trajforge.schemas.records import content_id
from trajforge.schemas.storage import ContentCache

CACHE_VERSION = "llm-v1"
_SLOTS: dict[str, threading.BoundedSemaphore] = {}
_SLOTS_LOCK = threading.Lock()


class LLMError(UserError):
    """The endpoint could not give a usable answer; the item fails, the run goes on."""

    reason = "llm_error"


@dataclass(frozen=True)
class ChatResult:
    message: dict[str, Any]  # OpenAI's assistant message: role, content, tool_calls
    finish_reason: str
    usage: dict[str, int]  # prompt_tokens, completion_tokens
    cached: bool


def endpoint_configured(params: LLMParams) -> bool:
    return bool(params.base_url and params.model)


def _slots(base_url: str, concurrency: int) -> threading.BoundedSemaphore:
    """One bound per endpoint per process, shared by every stage and thread that calls it."""
    with _SLOTS_LOCK:
        if base_url not in _SLOTS:
            _SLOTS[base_url] = threading.BoundedSemaphore(concurrency)
        return _SLOTS[base_url]


class LLMClient:
    def __init__(self, params: LLMParams, cache_dir: str) -> None:
        if not endpoint_configured(params):
            raise LLMError(
                "llm: no endpoint configured; set llm.base_url and llm.model in params "
                "(e.g. http://localhost:8000/v1 for `vllm serve`)",
                reason="no_endpoint",
            )
        assert params.base_url is not None and params.model is not None
        self.params = params
        self.model: str = params.model
        self.cache = ContentCache(cache_dir, "llm") if params.cache else None
        self.slots = _slots(params.base_url, params.concurrency)
        import openai  # here, not at the top: a stage that never asks a model skips its 0.6 s

        self.client = openai.OpenAI(
            base_url=params.base_url,
            api_key=os.environ.get(params.api_key_env) or "not-needed",
            max_retries=params.max_retries,
            timeout=params.timeout_s,
        )
        self.calls = 0  # requests that reached the endpoint (cache misses)
        self.cache_hits = 0
        self.usage = {"prompt_tokens": 0, "completion_tokens": 0}
        self._lock = threading.Lock()

    def chat(
        self,
        messages: list[dict[str, Any]],
        tools: list[dict[str, Any]] | None = None,
        temperature: float | None = None,
        max_tokens: int | None = None,
        seed: int | None = None,
    ) -> ChatResult:
        """One chat completion; ``seed`` also salts the cache key, so k samples stay k samples."""
        request: dict[str, Any] = {
            "model": self.model,
            "messages": messages,
            "temperature": self.params.temperature if temperature is None else temperature,
            "max_tokens": max_tokens or self.params.max_tokens,
        }
        if tools:
            request["tools"] = tools
        if seed is not None:
            request["seed"] = seed
        key = content_id(CACHE_VERSION, self.params.base_url, request, length=32)
        if self.cache is not None and (hit := self.cache.get(key)) is not None:
            with self._lock:
                self.cache_hits += 1
            return ChatResult(hit["message"], hit["finish_reason"], hit["usage"], cached=True)
        result = self._call(request)
        if self.cache is not None:
            self.cache.put(
                key,
                {
                    "message": result.message,
                    "finish_reason": result.finish_reason,
                    "usage": result.usage,
                },
            )
        return result

    def _call(self, request: dict[str, Any]) -> ChatResult:
        import openai  # loaded by __init__ already

        with self.slots:
            try:
                response = self.client.chat.completions.create(**request)
            except openai.APITimeoutError:
                raise LLMError(
                    f"llm: {self.params.base_url} timed out after {self.params.max_retries} "
                    "retries; raise llm.timeout_s or lower llm.concurrency",
                    reason="llm_timeout",
                ) from None
            except openai.APIConnectionError:
                raise LLMError(
                    f"llm: cannot reach {self.params.base_url}; is the server running?",
                    reason="llm_unreachable",
                ) from None
            except openai.APIStatusError as exc:
                raise LLMError(
                    f"llm: {self.params.base_url} answered HTTP {exc.status_code}: "
                    f"{_first_line(exc.message)}",
                    reason=f"llm_http_{exc.status_code}",
                ) from None
            except (openai.OpenAIError, ValueError) as exc:  # unparsable body, bad JSON
                raise LLMError(
                    f"llm: unusable answer from {self.params.base_url}: {_first_line(str(exc))}",
                    reason="llm_bad_response",
                ) from None
        if not getattr(response, "choices", None):
            raise LLMError(
                f"llm: {self.params.base_url} answered with no choices", reason="llm_bad_response"
            )
        choice = response.choices[0]
        message = choice.message.model_dump(exclude_none=True, include={"role", "content"})
        message.setdefault("role", "assistant")
        message.setdefault("content", "")
        calls = [
            call.model_dump(include={"id", "type", "function"})
            for call in choice.message.tool_calls or []
        ]
        if calls:
            message["tool_calls"] = calls
        usage = {
            "prompt_tokens": int(getattr(response.usage, "prompt_tokens", 0) or 0),
            "completion_tokens": int(getattr(response.usage, "completion_tokens", 0) or 0),
        }
        with self._lock:
            self.calls += 1
            for name, value in usage.items():
                self.usage[name] += value
        return ChatResult(message, choice.finish_reason or "unknown", usage, cached=False)


def _first_line(text: str) -> str:
    lines = (text or "").strip().splitlines()
    return lines[0][:200] if lines else "(empty)"
