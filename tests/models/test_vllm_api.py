"""Every vLLM call we make, checked against vLLM's real API (issue 41): each method called as it
is declared (def, async def or an async generator) with keywords it takes, each record built with
fields it has. Where vllm is installed, against the installed package (inspect); elsewhere against
tests/data/vllm_api.json, recorded from the pinned wheel's sources by scripts/record_vllm_api.py,
so a drift fails in CI on a CPU machine too. Also: the pins our docs state are the wheel's."""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.util
import inspect
import json
import re
import sys
import tomllib
import types
from pathlib import Path
from typing import Any

import pytest

from mars_eval.models.base import SamplingParams
from mars_eval.models.vllm_engine import VLLMEngine, vllm_kwargs
from training.engines import GenSettings
from training.engines.vllm_engine import engine_kwargs, sampling_kwargs

REPO = Path(__file__).resolve().parents[2]
RECORDED = json.loads((REPO / "tests" / "data" / "vllm_api.json").read_text())

# How our code calls each method: as a plain call ("sync"), awaited ("async"), iterated with
# `async for` ("asyncgen"); "either": our code handles a plain value and an awaitable alike.
# With the keywords we pass (checked against the method's parameters).
CALLS: dict[str, tuple[str, tuple[str, ...]]] = {
    "AsyncLLM.from_engine_args": ("sync", ()),  # mars_eval/models/vllm_engine.py
    "AsyncLLM.get_tokenizer": ("either", ()),
    "AsyncLLM.generate": ("asyncgen", ("request_id",)),
    "AsyncLLM.shutdown": ("sync", ()),
    "LLM.__init__": ("sync", ()),  # training/engines/vllm_engine.py (keywords: below)
    "LLM.generate": ("sync", ("use_tqdm",)),
    "LLM.collective_rpc": ("sync", ("args",)),
    "LLM.reset_prefix_cache": ("sync", ()),
    "LLM.sleep": ("sync", ("level",)),
    "LLM.wake_up": ("sync", ("tags",)),  # the weights alone for a push, then the KV cache
}


def live_table() -> dict[str, Any]:
    """The same table as the recorded one, from the installed vllm."""
    import vllm
    from vllm.engine.arg_utils import AsyncEngineArgs, EngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM

    def method(owner: type, name: str) -> dict[str, Any]:
        fn = inspect.getattr_static(owner, name)
        fn = fn.__func__ if isinstance(fn, classmethod | staticmethod) else fn
        kind = (
            "asyncgen"
            if inspect.isasyncgenfunction(fn)
            else "async"
            if inspect.iscoroutinefunction(fn)
            else "sync"
        )
        params = inspect.signature(fn).parameters
        return {
            "kind": kind,
            "params": list(params),
            "varkw": any(p.kind is p.VAR_KEYWORD for p in params.values()),
        }

    owners = {"AsyncLLM": AsyncLLM, "LLM": vllm.LLM}
    sampling = vllm.SamplingParams
    fields = getattr(sampling, "__struct_fields__", None) or [f.name for f in dataclasses.fields(sampling)]
    return {
        "version": vllm.__version__,
        "methods": {key: method(owners[key.split(".")[0]], key.split(".")[1]) for key in CALLS},
        "records": {
            "EngineArgs": [f.name for f in dataclasses.fields(EngineArgs)],
            "AsyncEngineArgs": [f.name for f in dataclasses.fields(AsyncEngineArgs)],
            "SamplingParams": list(fields),
            "TokensPrompt": list(getattr(vllm.TokensPrompt, "__annotations__", {})),
        },
    }


@pytest.fixture(scope="module")
def api() -> dict[str, Any]:
    if importlib.util.find_spec("vllm") is not None:
        return live_table()
    return RECORDED


@pytest.mark.parametrize("key", list(CALLS))
def test_each_method_is_called_as_declared(key, api) -> None:
    how, keywords = CALLS[key]
    declared = api["methods"][key]
    if how != "either":
        assert declared["kind"] == how, (
            f"vLLM {api['version']}: {key} is {declared['kind']}, we call it {how}"
        )
    missing = [k for k in keywords if k not in declared["params"]]
    assert not missing or declared["varkw"], f"{key} takes no {missing}"


def test_engine_args_we_pass_are_fields(api) -> None:
    ours = VLLMEngine("m", tensor_parallel_size=2, max_model_len=4096)._args
    assert set(ours) <= set(api["records"]["AsyncEngineArgs"])
    llm = engine_kwargs("m", max_model_len=4096, world_size=2, tensor_parallel=2, external_launcher=True)
    init = api["methods"]["LLM.__init__"]
    unknown = set(llm) - set(init["params"]) - (set(api["records"]["EngineArgs"]) if init["varkw"] else set())
    assert not unknown, f"LLM(...) takes no {sorted(unknown)}"


def test_sampling_keywords_we_pass_are_fields(api) -> None:
    fields = set(api["records"]["SamplingParams"])
    every = dataclasses.replace(SamplingParams(), seed=3)
    assert set(vllm_kwargs(every)) <= fields
    stop = GenSettings(stop=("</answer>",))
    assert set(sampling_kwargs(stop, 16, 0, 1)) <= fields
    assert "prompt_token_ids" in api["records"]["TokensPrompt"]


def test_the_in_process_engine_works_against_the_recorded_kinds(monkeypatch) -> None:
    """A vllm module shaped by the recorded table (get_tokenizer a plain method in 0.33): the
    engine loads and answers (before the fix it awaited the tokenizer: 'cannot load model')."""
    kinds = RECORDED["methods"]

    class Tokenizer:
        def apply_chat_template(self, messages: Any, **kw: Any) -> str:
            return "p"

    class Engine:
        @classmethod
        def from_engine_args(cls, args: Any) -> Engine:
            return cls()

        if kinds["AsyncLLM.get_tokenizer"]["kind"] == "sync":

            def get_tokenizer(self) -> Tokenizer:
                return Tokenizer()
        else:

            async def get_tokenizer(self) -> Tokenizer:
                return Tokenizer()

        async def generate(self, prompt: str, sampling: Any, request_id: str) -> Any:
            out = types.SimpleNamespace(text="4", finish_reason="stop", token_ids=[1])
            yield types.SimpleNamespace(outputs=[out], prompt_token_ids=[1])

    fake = types.ModuleType("vllm")
    fake.AsyncLLMEngine, fake.AsyncEngineArgs = Engine, dict
    fake.SamplingParams = lambda **kw: kw
    monkeypatch.setitem(sys.modules, "vllm", fake)
    reply = asyncio.run(
        VLLMEngine("m").chat([{"role": "user", "content": "2+2"}], SamplingParams(thinking=False))
    )
    assert reply.content == "4"


def test_the_pins_we_state_are_the_wheels() -> None:
    """pyproject's vllm extra admits the recorded version, and what pyproject and
    training/README.md say that version pins is what its metadata pins."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    (spec,) = project["project"]["optional-dependencies"]["vllm"]
    low, high = re.fullmatch(r"vllm>=([\d.]+),<([\d.]+)", spec).groups()
    version = tuple(int(x) for x in RECORDED["version"].split("."))
    assert tuple(map(int, low.split("."))) <= version < tuple(map(int, high.split(".")))
    pins = {r.split("=")[0].split("<")[0].split(">")[0]: r for r in RECORDED["requires"]}
    torch_pin = pins["torch"].removeprefix("torch==")
    lo, hi = re.fullmatch(r"transformers<([\d.]+),>=([\d.]+)", pins["transformers"]).groups()[::-1]
    for text in ((REPO / "pyproject.toml").read_text(), (REPO / "training" / "README.md").read_text()):
        assert f"torch {torch_pin}" in text and f"transformers >={lo},<{hi}" in text
