"""Every vLLM call we make, checked against vLLM's real API (issue 41): each method called as it
is declared (def, async def or an async generator) with keywords it takes, each record built with
fields it has. Where vllm is installed, against the installed package (inspect); elsewhere against
tests/data/vllm_api.json, recorded from the pinned wheel's sources by scripts/record_vllm_api.py,
so a drift fails in CI on a CPU machine too. Also the streaming path (rollout_schedule=async)
through `LLM.llm_engine` (vLLM's v1 LLMEngine: add_request, step, has_unfinished_requests,
abort_request, SamplingParams.output_kind = RequestOutputKind.FINAL_ONLY) and the
`llm_engine.model_config.max_model_len` training/curve_engine.py reads, driven through our code
against an engine shaped by the table. Also: the pins our docs state are the wheel's."""

from __future__ import annotations

import asyncio
import dataclasses
import enum
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
from training.curve_engine import context_limit
from training.engines import GenSettings, Request
from training.engines.vllm_engine import VLLM_ENV, engine_kwargs, sampling_kwargs

REPO = Path(__file__).resolve().parents[2]
RECORDED = json.loads((REPO / "tests" / "data" / "vllm_api.json").read_text())
_spec = importlib.util.spec_from_file_location("record_vllm_api", REPO / "scripts" / "record_vllm_api.py")
RECORDER = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(RECORDER)

# How our code calls each method: as a plain call ("sync"), awaited ("async"), iterated with
# `async for` ("asyncgen"); "either": our code handles a plain value and an awaitable alike.
# With the arguments we pass by position, named as the parameters we mean them for (checked
# against the method's positional parameters, in order), and the keywords we pass (checked
# against its parameters); together they must cover the parameters without a default.
CALLS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "AsyncLLM.from_engine_args": ("sync", ("engine_args",), ()),  # mars_eval/models/vllm_engine.py
    "AsyncLLM.get_tokenizer": ("either", (), ()),
    "AsyncLLM.generate": ("asyncgen", ("prompt", "sampling_params"), ("request_id",)),
    "AsyncLLM.shutdown": ("sync", (), ()),
    "LLM.__init__": ("sync", (), ("model",)),  # training/engines/vllm_engine.py (keywords: below)
    "LLM.generate": ("sync", ("prompts", "sampling_params"), ("use_tqdm",)),  # and curve_engine.py
    "LLM.collective_rpc": ("sync", ("method",), ("args",)),
    "LLM.reset_prefix_cache": ("sync", (), ()),
    "LLM.sleep": ("sync", (), ("level",)),
    "LLM.wake_up": ("sync", (), ("tags",)),  # the weights alone for a push, then the KV cache
    # `LLM.llm_engine` (VLLMEngine.submit / advance / abort, rollout_schedule=async)
    "LLMEngine.add_request": ("sync", ("request_id", "prompt", "params"), ()),
    "LLMEngine.step": ("sync", (), ()),
    "LLMEngine.has_unfinished_requests": ("sync", (), ()),
    "LLMEngine.abort_request": ("sync", ("request_ids",), ()),  # our own (external) ids
}
# The attributes we read of what vLLM returns (RequestOutput from LLM.generate, LLMEngine.step
# and AsyncLLM.generate; its CompletionOutput; a log-prob's Logprob; the engine's ModelConfig).
READS = {
    "RequestOutput": {"request_id", "finished", "outputs", "prompt_token_ids"},
    "CompletionOutput": {"token_ids", "logprobs", "finish_reason", "text"},
    "Logprob": {"logprob"},
    "ModelConfig": {"max_model_len"},
}


def live_table() -> dict[str, Any]:
    """The same table as the recorded one, from the installed vllm: the recorder's reading of its
    sources, with the methods and the records we build inspected."""
    import vllm
    from vllm.engine.arg_utils import AsyncEngineArgs, EngineArgs
    from vllm.v1.engine.async_llm import AsyncLLM
    from vllm.v1.engine.llm_engine import LLMEngine

    root = Path(vllm.__file__).resolve().parents[1]
    table = RECORDER.table(lambda path: (root / path).read_text(encoding="utf-8"))

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
        plain = [p for p in params.values() if p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)]
        return {
            "kind": kind,
            "params": [p.name for p in plain],
            "positional": sum(p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD) for p in plain),
            "required": [p.name for p in plain[1:] if p.default is p.empty],
            "varkw": any(p.kind is p.VAR_KEYWORD for p in params.values()),
        }

    owners = {"AsyncLLM": AsyncLLM, "LLM": vllm.LLM, "LLMEngine": LLMEngine}
    sampling = vllm.SamplingParams
    fields = getattr(sampling, "__struct_fields__", None) or [f.name for f in dataclasses.fields(sampling)]
    table["version"] = vllm.__version__
    table["methods"].update({key: method(owners[key.split(".")[0]], key.split(".")[1]) for key in CALLS})
    table["records"].update(
        {
            "EngineArgs": [f.name for f in dataclasses.fields(EngineArgs)],
            "AsyncEngineArgs": [f.name for f in dataclasses.fields(AsyncEngineArgs)],
            "SamplingParams": list(fields),
            "TokensPrompt": list(getattr(vllm.TokensPrompt, "__annotations__", {})),
        }
    )
    return table


@pytest.fixture(scope="module")
def api() -> dict[str, Any]:
    if importlib.util.find_spec("vllm") is not None:
        return live_table()
    return RECORDED


@pytest.mark.parametrize("key", list(CALLS))
def test_each_method_is_called_as_declared(key, api) -> None:
    how, positional, keywords = CALLS[key]
    declared = api["methods"][key]
    if how != "either":
        assert declared["kind"] == how, (
            f"vLLM {api['version']}: {key} is {declared['kind']}, we call it {how}"
        )
    takes = declared["params"][1 : declared["positional"]]  # after self / cls
    assert takes[: len(positional)] == list(positional), (
        f"vLLM {api['version']}: {key} takes {takes} by position, we pass {list(positional)}"
    )
    missing = [k for k in keywords if k not in declared["params"]]
    assert not missing or declared["varkw"], f"{key} takes no {missing}"
    unpassed = set(declared["required"]) - set(positional) - set(keywords)
    assert not unpassed, f"{key} needs {sorted(unpassed)}, which we do not pass"


def test_what_we_follow_and_read_is_there(api) -> None:
    """`LLM.llm_engine` is the LLMEngine whose methods the table holds, its `model_config` a
    ModelConfig with `max_model_len`; RequestOutputKind.FINAL_ONLY is in vllm.sampling_params
    (where VLLMEngine.submit looks: `api.sampling_params`); the outputs have what we read."""
    attributes = api["attributes"]
    assert attributes["LLM.llm_engine"].startswith("LLMEngine."), attributes["LLM.llm_engine"]
    assert attributes["LLMEngine.model_config"] == "vllm_config.model_config"
    assert attributes["VllmConfig.model_config"] == "ModelConfig"
    kind = api["enums"]["RequestOutputKind"]
    assert kind["module"] == "vllm.sampling_params" and "FINAL_ONLY" in kind["members"]
    for record, names in READS.items():
        assert names <= set(api["records"][record]), (
            f"{record} has no {sorted(names - set(api['records'][record]))}"
        )


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


def _declared(entry: dict[str, Any], impl: Any) -> Any:
    """A method with the recorded signature (a call that binds to none fails) and kind (def,
    async def), doing `impl(**arguments)`."""
    names = entry["params"][1:]
    n_pos = entry["positional"] - 1
    plain = [
        inspect.Parameter(
            name,
            inspect.Parameter.POSITIONAL_OR_KEYWORD if i < n_pos else inspect.Parameter.KEYWORD_ONLY,
            **({} if name in entry["required"] else {"default": None}),
        )
        for i, name in enumerate(names)
    ]
    if entry["varkw"]:
        plain.append(inspect.Parameter("kwargs", inspect.Parameter.VAR_KEYWORD))
    signature = inspect.Signature(plain)

    def call(self: Any, *args: Any, **kwargs: Any) -> Any:
        bound = signature.bind(*args, **kwargs)  # TypeError: a wrong name, order or count
        return impl(**bound.arguments)

    if entry["kind"] == "sync":
        return call

    async def acall(self: Any, *args: Any, **kwargs: Any) -> Any:
        return call(self, *args, **kwargs)

    return acall


def _record(api: dict[str, Any], name: str, **values: Any) -> types.SimpleNamespace:
    """An output object with only fields vLLM's `name` has."""
    unknown = set(values) - set(api["records"][name])
    assert not unknown, f"vLLM's {name} has no {sorted(unknown)}"
    return types.SimpleNamespace(**values)


def test_the_streaming_engine_drives_vllms_llm_engine_as_declared(api, monkeypatch) -> None:
    """VLLMEngine.submit / advance / abort and curve_engine.context_limit against a vllm module
    shaped by the table: `LLM(...)` holds its engine at the recorded attribute, the engine has
    only the recorded methods with the recorded signatures and kinds, SamplingParams takes
    and sets only its fields, RequestOutputKind lives in the recorded module, the outputs carry
    only the recorded fields. A wrong name, argument order or attribute fails here."""
    for key, value in VLLM_ENV.items():
        monkeypatch.setenv(key, value)
    methods, records = api["methods"], api["records"]
    kind = api["enums"]["RequestOutputKind"]
    Kind = enum.Enum("RequestOutputKind", kind["members"])  # noqa: N806
    added: list[tuple[str, Any, Any]] = []
    aborted: list[Any] = []

    def add_request(request_id: str, prompt: Any, params: Any, **rest: Any) -> str:
        added.append((request_id, prompt, params))
        return request_id

    def step() -> list[Any]:
        out = []
        for request_id, prompt, params in added:
            n = params.max_tokens
            tokens = [prompt["prompt_token_ids"][0] + i for i in range(n)]
            logprobs = [{t: _record(api, "Logprob", logprob=-0.5, rank=1, decoded_token="t")} for t in tokens]
            comp = _record(
                api,
                "CompletionOutput",
                index=0,
                text="t" * n,
                token_ids=tokens,
                cumulative_logprob=-0.5 * n,
                logprobs=logprobs,
                finish_reason="stop",
            )
            final = params.output_kind is Kind.FINAL_ONLY
            out.append(
                _record(
                    api,
                    "RequestOutput",
                    request_id=request_id,
                    prompt=None,
                    outputs=[comp],
                    prompt_token_ids=prompt["prompt_token_ids"],
                    finished=final,
                )
            )  # not FINAL_ONLY: vLLM would stream partial outputs, never `finished` here
        added.clear()
        return out

    engine_methods = {
        "add_request": add_request,
        "step": step,
        "has_unfinished_requests": lambda: bool(added),
        "abort_request": lambda request_ids, internal=None: aborted.append(request_ids),
    }
    Engine = type(  # noqa: N806
        "LLMEngine",
        (),
        {
            name: _declared(methods[f"LLMEngine.{name}"], impl)
            for name, impl in engine_methods.items()
            if f"LLMEngine.{name}" in methods
        },
    )
    llm_engine_attr = next(
        k.split(".")[1]
        for k, v in api["attributes"].items()
        if k.startswith("LLM.") and v.startswith("LLMEngine.")
    )
    model_config_attr = next(k.split(".")[1] for k in api["attributes"] if k.startswith("LLMEngine."))

    class LLM:
        def __init__(self, **kwargs: Any) -> None:
            init = methods["LLM.__init__"]
            unknown = (
                set(kwargs) - set(init["params"]) - (set(records["EngineArgs"]) if init["varkw"] else set())
            )
            assert not unknown, f"LLM(...) takes no {sorted(unknown)}"
            engine = Engine()
            config = types.SimpleNamespace(
                **{"max_model_len": 321} if "max_model_len" in records["ModelConfig"] else {}
            )
            setattr(engine, model_config_attr, config)
            setattr(self, llm_engine_attr, engine)

    class Sampling:
        def __init__(self, **kwargs: Any) -> None:
            for key, value in kwargs.items():
                setattr(self, key, value)
            if "output_kind" in records["SamplingParams"]:
                object.__setattr__(self, "output_kind", Kind[kind["members"][0]])  # vLLM's default

        def __setattr__(self, key: str, value: Any) -> None:
            assert key in records["SamplingParams"], f"SamplingParams has no {key}"
            object.__setattr__(self, key, value)

    def tokens_prompt(**kwargs: Any) -> dict[str, Any]:
        assert set(kwargs) <= set(records["TokensPrompt"]), kwargs
        return dict(kwargs)

    fake = types.SimpleNamespace(LLM=LLM, SamplingParams=Sampling, TokensPrompt=tokens_prompt)
    *path, last = kind["module"].split(".")[1:]  # vllm.sampling_params: fake.sampling_params
    owner = fake
    for part in path:
        setattr(owner, part, types.SimpleNamespace())
        owner = getattr(owner, part)
    setattr(owner, last, types.SimpleNamespace(RequestOutputKind=Kind))

    from training.engines.vllm_engine import VLLMEngine as TrainEngine

    engine = TrainEngine("m", max_model_len=4096, api=fake)
    settings = GenSettings(stop=("</answer>",))
    engine.submit(
        [Request("a", [10], seed=1, max_tokens=3), Request("b", [20], seed=2, max_tokens=2)], settings
    )
    got = dict(engine.advance())
    assert sorted(got) == ["a", "b"], "no FINAL_ONLY reply came back finished"
    assert got["a"].token_ids == [10, 11, 12] and got["a"].logprobs == [-0.5] * 3 and got["a"].stopped
    engine.submit([Request("c", [30], seed=3, max_tokens=1)], settings)
    engine.abort()
    assert aborted == [[added[0][0]]], aborted  # our own request id, in a list
    policy = types.SimpleNamespace(config=types.SimpleNamespace(max_position_embeddings=999))
    assert context_limit(engine, policy) == 321  # vLLM's max_model_len, not the fallback


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
