"""Model layer: thinking split, sampling defaults, the endpoint pool's retries and balancing."""

from __future__ import annotations

import asyncio
import time

import httpx
import pytest

from mars_eval.models.base import SamplingParams, split_thinking
from mars_eval.models.http import EndpointPool, HTTPClient, normalize_base_url


@pytest.mark.parametrize(
    ("text", "reasoning", "content", "thinking"),
    [
        ("The answer is 5.", None, "The answer is 5.", ""),
        ("<think>maybe 7</think>\nThe answer is 5.", None, "The answer is 5.", "maybe 7"),
        ("maybe 7\n</think>\n\nThe answer is 5.", None, "The answer is 5.", "maybe 7"),
        ("The answer is 5.", "maybe 7", "The answer is 5.", "maybe 7"),
        ("<think>still thinking about 7", None, "", "still thinking about 7"),
        ("", "only thoughts", "", "only thoughts"),
        (None, None, "", ""),
    ],
)
def test_split_thinking(text, reasoning, content, thinking):
    assert split_thinking(text, reasoning) == (content, thinking)


def test_sampling_defaults_follow_qwen3_modes():
    think = SamplingParams.for_mode(True)
    assert (think.temperature, think.top_p, think.top_k, think.min_p) == (0.6, 0.95, 20, 0.0)
    plain = SamplingParams.for_mode(False, max_tokens=100)
    assert (plain.temperature, plain.top_p, plain.thinking, plain.max_tokens) == (0.7, 0.8, False, 100)


def test_request_kwargs_pass_thinking_switch_and_extras():
    kw = HTTPClient.request_kwargs(SamplingParams(thinking=False, seed=3))
    assert kw["extra_body"]["chat_template_kwargs"] == {"enable_thinking": False}
    assert kw["extra_body"]["top_k"] == 20 and kw["seed"] == 3


def test_normalize_base_url():
    assert normalize_base_url("localhost:8000") == "http://localhost:8000/v1"
    assert normalize_base_url("http://h:1/v1/") == "http://h:1/v1"


def _run(coro):
    return asyncio.run(coro)


OK_REPLY = {"choices": [{"message": {"content": "ok"}}]}


def test_pool_retries_5xx_and_429_then_succeeds():
    calls = []

    def handler(request: httpx.Request) -> httpx.Response:
        calls.append(str(request.url))
        if len(calls) == 1:
            return httpx.Response(503)
        if len(calls) == 2:
            return httpx.Response(429, headers={"Retry-After": "0"})
        return httpx.Response(200, json=OK_REPLY)

    pool = EndpointPool(["http://a:1"], backoff_base=0.001, transport=httpx.MockTransport(handler))

    async def go():
        async with httpx.AsyncClient(transport=pool) as c:
            return await c.post(f"{pool.base_url}/chat/completions", json={"x": 1})

    r = _run(go())
    assert r.status_code == 200 and r.json() == OK_REPLY
    assert len(calls) == 3 and all(u == "http://a:1/v1/chat/completions" for u in calls)
    assert pool.retries == 2


def test_pool_gives_up_after_bounded_attempts():
    def handler(request):
        raise httpx.ConnectError("refused", request=request)

    pool = EndpointPool(
        ["http://a:1"], max_attempts=3, backoff_base=0.001, transport=httpx.MockTransport(handler)
    )

    async def go():
        async with httpx.AsyncClient(transport=pool) as c:
            await c.get(f"{pool.base_url}/models")

    with pytest.raises(httpx.ConnectError):
        _run(go())
    assert pool.endpoints[0].sent == 3


def test_pool_honours_retry_after():
    seen = []

    def handler(request):
        seen.append(time.monotonic())
        return httpx.Response(429, headers={"Retry-After": "0.3"}) if len(seen) == 1 else httpx.Response(200)

    pool = EndpointPool(["http://a:1"], transport=httpx.MockTransport(handler))

    async def go():
        async with httpx.AsyncClient(transport=pool) as c:
            return await c.get(f"{pool.base_url}/models")

    assert _run(go()).status_code == 200
    assert seen[1] - seen[0] >= 0.28


def test_pool_spreads_by_least_in_flight():
    """Each request goes to an endpoint with the fewest requests in flight: sent one at a time,
    held open, they fill the endpoints evenly; once one endpoint's requests finish, the next ones
    all go there. (Random or round-robin routing fails the second half.)"""
    hosts = ["a", "b", "c"]
    held: dict[str, list[asyncio.Event]] = {h: [] for h in hosts}
    arrived = asyncio.Queue()

    async def handler(request):
        release = asyncio.Event()
        held[request.url.host].append(release)
        await arrived.put(request.url.host)
        await release.wait()
        return httpx.Response(200)

    pool = EndpointPool([f"http://{h}:1" for h in hosts], transport=httpx.MockTransport(handler))

    async def go():
        async with httpx.AsyncClient(transport=pool) as c:
            tasks, order = [], []

            async def send_one():
                tasks.append(asyncio.create_task(c.get(f"{pool.base_url}/models")))
                order.append(await asyncio.wait_for(arrived.get(), 30))

            for _ in range(9):
                await send_one()
                in_flight = [len(held[h]) for h in hosts]
                assert max(in_flight) - min(in_flight) <= 1, (order, in_flight)
            for release in held["b"]:
                release.set()
            while any(e.in_flight for e in pool.endpoints if e.base.startswith("http://b")):
                await asyncio.sleep(0.001)  # b's three replies are on their way back
            order.clear()
            for _ in range(3):
                await send_one()
            later = list(order)
            for h in hosts:
                for release in held[h]:
                    release.set()
            await asyncio.gather(*tasks)
            return later

    assert _run(go()) == ["b", "b", "b"]


def test_pool_bounds_concurrency():
    peak = 0
    live = 0

    async def handler(request):
        nonlocal peak, live
        live += 1
        peak = max(peak, live)
        await asyncio.sleep(0.01)
        live -= 1
        return httpx.Response(200)

    pool = EndpointPool(["http://a:1"], concurrency=5, transport=httpx.MockTransport(handler))

    async def go():
        async with httpx.AsyncClient(transport=pool) as c:
            await asyncio.gather(*(c.get(f"{pool.base_url}/models") for _ in range(40)))

    _run(go())
    assert peak == 5


def test_parse_completion_reads_reasoning_fields_and_rejects_malformed_replies():
    from mars_eval.models.base import ModelAccessError
    from mars_eval.models.http import parse_completion

    ok = {
        "choices": [
            {"message": {"content": "It is \\boxed{5}.", "reasoning": "maybe 7"}, "finish_reason": "stop"}
        ],
        "usage": {"prompt_tokens": 11, "completion_tokens": 4},
    }
    r = parse_completion(ok, 0.1)
    assert (r.content, r.thinking, r.prompt_tokens, r.completion_tokens, r.finish_reason) == (
        "It is \\boxed{5}.",
        "maybe 7",
        11,
        4,
        "stop",
    )
    no_usage = {"choices": [{"message": {"content": None, "reasoning_content": "cut off"}}]}
    assert (
        parse_completion(no_usage, 0.1).content == ""
        and parse_completion(no_usage, 0.1).thinking == "cut off"
    )
    for bad in (
        {},
        {"choices": []},
        {"choices": [{}]},
        [],
        "text",
        {"choices": [{"message": {"content": 5}}]},
    ):
        with pytest.raises(ModelAccessError):
            parse_completion(bad, 0.1)


def test_garbled_reply_is_asked_again_then_an_error():
    bodies = [b'{"choices": [{"mess', b"<html>oops</html>"]

    def handler(request: httpx.Request) -> httpx.Response:
        if bodies:
            return httpx.Response(200, content=bodies.pop(0), headers={"content-type": "application/json"})
        return httpx.Response(200, json={"choices": [{"message": {"content": "The answer is 3."}}]})

    client = HTTPClient("m", ["http://a:1"], backoff_base=0.001)
    client.pool._transport = httpx.MockTransport(handler)
    r = asyncio.run(client.chat([{"role": "user", "content": "q"}], SamplingParams()))
    assert r.content == "The answer is 3." and not bodies

    from mars_eval.models.base import ModelAccessError

    sent = []

    def not_json(request: httpx.Request) -> httpx.Response:
        sent.append(request)
        return httpx.Response(200, content=b"not json")

    always_bad = HTTPClient("m", ["http://a:1"], max_attempts=4, backoff_base=0.001)
    always_bad.pool._transport = httpx.MockTransport(not_json)
    with pytest.raises(ModelAccessError, match="malformed"):
        asyncio.run(always_bad.chat([{"role": "user", "content": "q"}], SamplingParams()))
    assert len(sent) == 4  # re-asked like a 5xx, as many times as --max-attempts allows
