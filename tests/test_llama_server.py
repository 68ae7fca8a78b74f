"""The LLM stand-in is a real OpenAI-compatible server: llama.cpp on CPU with a tiny random model.

The ``openai`` SDK talks to it over HTTP exactly as it talks to ``vllm serve``; answers are
garbage text, but well-formed responses with usage counts, with or without ``tools``.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import openai
import pytest
from llama_server import MODEL_ALIAS, start_llama_server
from tiny_gguf import write_tiny_gguf

pytestmark = pytest.mark.llama

BASH_TOOL: dict[str, Any] = {
    "type": "function",
    "function": {
        "name": "bash",
        "description": "Run a shell command in the repository and return its output.",
        "parameters": {
            "type": "object",
            "properties": {"command": {"type": "string", "description": "The command."}},
            "required": ["command"],
        },
    },
}


@pytest.fixture
def client(llama_endpoint: dict[str, str]) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=llama_endpoint["base_url"], api_key="not-needed", max_retries=0, timeout=60
    )


def test_plain_chat_completion(client: openai.OpenAI) -> None:
    response = client.chat.completions.create(
        model=MODEL_ALIAS,
        messages=[
            {"role": "system", "content": "You are a helpful assistant."},
            {"role": "user", "content": "Say hello in one word."},
        ],
        max_tokens=32,
        temperature=1.0,
        seed=0,
    )
    choice = response.choices[0]
    assert isinstance(choice.message.content, str)
    assert choice.finish_reason in {"stop", "length"}
    assert response.usage is not None
    assert response.usage.prompt_tokens > 0
    assert 0 < response.usage.completion_tokens <= 32


def test_chat_with_tools_is_well_formed(client: openai.OpenAI) -> None:
    """A request with ``tools`` (as the rollout agent sends) gets a parsed answer, not a 500."""
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "You fix bugs. Use the bash tool."},
        {"role": "user", "content": "The test test_add fails; find out why and fix it."},
        {
            "role": "assistant",
            "content": "",
            "tool_calls": [
                {
                    "id": "call_1",
                    "type": "function",
                    "function": {"name": "bash", "arguments": '{"command": "pytest -x"}'},
                }
            ],
        },
        {"role": "tool", "tool_call_id": "call_1", "content": "FAILED test_calc.py::test_add"},
    ]
    for tool_choice in ("auto", None):
        request: dict[str, Any] = {
            "model": MODEL_ALIAS,
            "messages": messages,
            "tools": [BASH_TOOL],
            "max_tokens": 32,
            "temperature": 0.7,
            "seed": 1,
        }
        if tool_choice:
            request["tool_choice"] = tool_choice
        response = client.chat.completions.create(**request)
        choice = response.choices[0]
        assert choice.finish_reason
        assert choice.message.content is not None or choice.message.tool_calls
        assert response.usage is not None and response.usage.prompt_tokens > 0


def test_long_prompt_and_concurrent_requests(client: openai.OpenAI) -> None:
    """Rollout prompts run to thousands of tokens and several workers share one endpoint."""
    source = "def add(a, b):\n    return a - b  # the bug: should be a + b\n\n" * 120

    def ask(seed: int) -> int:
        response = client.chat.completions.create(
            model=MODEL_ALIAS,
            messages=[{"role": "user", "content": f"Fix this module:\n{source}"}],
            tools=[BASH_TOOL],  # type: ignore[list-item]
            max_tokens=16,
            temperature=1.0,
            seed=seed,
        )
        assert response.choices[0].finish_reason
        assert response.usage is not None
        return response.usage.prompt_tokens

    with ThreadPoolExecutor(max_workers=3) as pool:
        prompt_tokens = list(pool.map(ask, range(3)))
    assert min(prompt_tokens) > 2000


def test_startup_and_latency(tmp_path: Path) -> None:
    """Its own server (the context manager starts and stops it); figures are printed (-s)."""
    model = write_tiny_gguf(tmp_path / "tiny.gguf", seed=1)
    started = time.perf_counter()
    with start_llama_server(model, log_path=tmp_path / "server.log") as (base_url, process):
        startup_s = time.perf_counter() - started
        client = openai.OpenAI(base_url=base_url, api_key="not-needed", max_retries=0)
        timings = []
        for seed in range(3):
            started = time.perf_counter()
            response = client.chat.completions.create(
                model=MODEL_ALIAS,
                messages=[{"role": "user", "content": "Write a haiku about tests."}],
                max_tokens=32,
                temperature=1.0,
                seed=seed,
            )
            timings.append(time.perf_counter() - started)
            assert response.choices[0].finish_reason
        assert process.poll() is None
    assert process.poll() is not None, "the server outlived its context manager"
    print(
        f"\nllama.cpp server: startup {startup_s:.2f}s; 32-token completions "
        + ", ".join(f"{t * 1000:.0f}ms" for t in timings)
    )
