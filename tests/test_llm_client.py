"""The LLM client against a real HTTP server: cache, retries, concurrency bound, errors, secrets."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import pytest
from scripted_llm import Reply, ScriptedLLM, tool_call
from trajforge.generators.llm import client as llm_client
from trajforge.generators.llm.client import LLMClient, LLMError
from trajforge.schemas.params import LLMParams

HELLO = [{"role": "user", "content": "hello"}]


def _params(base_url: str, **overrides) -> LLMParams:
    values = {"base_url": base_url, "model": "scripted", "max_retries": 2, "timeout_s": 5.0}
    return LLMParams(**{**values, **overrides})


@pytest.fixture(autouse=True)
def _fresh_slots():
    """Each test's server has its own port, but the bound is per URL: start clean anyway."""
    llm_client._SLOTS.clear()


def test_answer_usage_and_tool_calls_are_returned(tmp_path: Path):
    call = tool_call("bash", command="ls")
    with ScriptedLLM(lambda r: {"content": "", "tool_calls": [call]}) as server:
        client = LLMClient(_params(server.base_url), str(tmp_path))
        result = client.chat(HELLO, tools=[{"type": "function", "function": {"name": "bash"}}])
    assert result.message["tool_calls"][0]["function"] == call["function"]
    assert result.usage == {"prompt_tokens": 100, "completion_tokens": 20}
    assert client.usage == {"prompt_tokens": 100, "completion_tokens": 20}
    assert server.requests[0]["tools"][0]["function"]["name"] == "bash"


def test_a_rerun_is_answered_from_the_cache(tmp_path: Path):
    with ScriptedLLM(lambda r: {"content": "hi"}) as server:
        first = LLMClient(_params(server.base_url), str(tmp_path))
        first.chat(HELLO)
        second = LLMClient(_params(server.base_url), str(tmp_path))
        again = second.chat(HELLO)
        other_seed = second.chat(HELLO, seed=1)
    assert again.cached and again.message["content"] == "hi"
    assert not other_seed.cached  # k samples stay k samples
    assert len(server.requests) == 2 and second.calls == 1 and second.cache_hits == 1


def test_server_errors_are_retried_with_backoff(tmp_path: Path):
    answers = iter([Reply(status=503, body='{"error": "busy"}'), Reply(status=429, body="{}")])

    def respond(request):
        return next(answers, {"content": "finally"})

    with ScriptedLLM(respond) as server:
        client = LLMClient(_params(server.base_url), str(tmp_path))
        result = client.chat(HELLO)
    assert result.message["content"] == "finally"
    assert len(server.requests) == 3


def test_persistent_errors_end_with_a_reason(tmp_path: Path):
    with ScriptedLLM(lambda r: Reply(status=500, body='{"error": "down"}')) as server:
        client = LLMClient(_params(server.base_url, max_retries=1), str(tmp_path))
        with pytest.raises(LLMError) as caught:
            client.chat(HELLO)
    assert caught.value.reason == "llm_http_500"
    assert len(server.requests) == 2  # the first try and one retry


def test_unreachable_and_slow_endpoints_end_with_a_reason(tmp_path: Path):
    down = LLMClient(_params("http://127.0.0.1:9/v1", max_retries=0), str(tmp_path))
    with pytest.raises(LLMError) as caught:
        down.chat(HELLO)
    assert caught.value.reason == "llm_unreachable"
    assert "cannot reach http://127.0.0.1:9/v1" in str(caught.value)
    with ScriptedLLM(lambda r: Reply(message={"content": "late"}, delay_s=2.0)) as server:
        slow = LLMClient(_params(server.base_url, timeout_s=0.5, max_retries=0), str(tmp_path))
        with pytest.raises(LLMError) as caught:
            slow.chat(HELLO)
    assert caught.value.reason == "llm_timeout"


def test_a_body_that_is_not_json_is_an_error_not_a_crash(tmp_path: Path):
    with ScriptedLLM(lambda r: Reply(body="<html>gateway</html>")) as server:
        client = LLMClient(_params(server.base_url, max_retries=0), str(tmp_path))
        with pytest.raises(LLMError) as caught:
            client.chat(HELLO)
    assert caught.value.reason == "llm_bad_response"


def test_requests_in_flight_stay_within_the_bound(tmp_path: Path):
    with ScriptedLLM(lambda r: Reply(message={"content": "ok"}, delay_s=0.2)) as server:
        client = LLMClient(_params(server.base_url, concurrency=2, cache=False), str(tmp_path))
        prompts = [[{"role": "user", "content": f"q{i}"}] for i in range(8)]
        with ThreadPoolExecutor(max_workers=8) as pool:
            results = list(pool.map(client.chat, prompts))
    assert len(results) == 8
    assert server.max_in_flight == 2


def test_the_api_key_is_sent_but_never_stored(tmp_path: Path, monkeypatch):
    secret = "sk-trajforge-test-secret-123"
    monkeypatch.setenv("TRAJFORGE_TEST_KEY", secret)
    with ScriptedLLM(lambda r: {"content": "ok"}) as server:
        client = LLMClient(
            _params(server.base_url, api_key_env="TRAJFORGE_TEST_KEY"), str(tmp_path)
        )
        client.chat(HELLO)
    assert server.headers[0]["authorization"] == f"Bearer {secret}"
    stored = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert stored and secret.encode() not in stored


def test_no_endpoint_is_one_line_naming_the_params(tmp_path: Path):
    with pytest.raises(LLMError) as caught:
        LLMClient(LLMParams(), str(tmp_path))
    assert caught.value.reason == "no_endpoint"
    assert "llm.base_url" in str(caught.value)


def test_the_bound_is_shared_by_clients_of_one_endpoint(tmp_path: Path):
    gate = threading.Event()

    def respond(request):
        gate.wait(5)
        return {"content": "ok"}

    with ScriptedLLM(respond) as server:
        params = _params(server.base_url, concurrency=1, cache=False)
        clients = [LLMClient(params, str(tmp_path)) for _ in range(3)]
        with ThreadPoolExecutor(max_workers=3) as pool:
            futures = [pool.submit(c.chat, HELLO) for c in clients]
            threading.Timer(0.5, gate.set).start()
            assert all(f.result().message["content"] == "ok" for f in futures)
    assert server.max_in_flight == 1
