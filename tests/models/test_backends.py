"""The model backend registry (models.backends): the built-in backends' names and identity names
are what they were, and a backend declared in a test alone is an `--engine` choice, is built by
`make_client`, and names the engine of a run's identity, with no other file edited."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from mars_eval.models import ChatResponse, ConfigError, make_client
from mars_eval.models.backends import (
    Backend,
    ClientSettings,
    backends,
    engine_choices,
    identity_name,
    register_backend,
    select,
    unregister_backend,
)
from mars_eval.run.identity import engine_kind, model_identity
from mars_eval.run.options import checked


class ToyClient:
    """A model that answers every question with 0, built by the toy backend."""

    def __init__(self, settings: ClientSettings) -> None:
        self.model = settings.model or "toy"
        self.settings = settings
        self.calls = 0

    async def chat(self, messages, params) -> ChatResponse:
        self.calls += 1
        return ChatResponse(content="So the answer is $\\boxed{0}$.")

    async def check(self) -> None: ...

    async def aclose(self) -> None: ...


@pytest.fixture
def toy() -> Iterator[Backend]:
    backend = register_backend(Backend("toy", ToyClient, ("ToyClient",), "a test's toy model"))
    try:
        yield backend
    finally:
        unregister_backend("toy")


def test_the_built_in_backends_keep_their_names() -> None:
    assert [b.name for b in backends()] == ["http", "transformers", "vllm"]
    assert engine_choices() == ("auto", "transformers", "vllm")
    vllm = next(b for b in backends() if b.name == "vllm")
    assert vllm.gpu and vllm.extra == "vllm" and not next(b for b in backends() if b.name == "http").gpu
    names = {"HTTPClient": "http", "TransformersEngine": "transformers", "VLLMEngine": "vllm"}
    for cls, name in names.items():
        assert identity_name(type(cls, (), {})()) == name
    assert identity_name(type("ScriptedClient", (), {})()) == "scriptedclient"  # undeclared: as before


def test_auto_picks_vllm_only_where_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    import mars_eval.models.vllm_engine as vllm_engine

    monkeypatch.setattr(vllm_engine, "vllm_available", lambda: False)
    assert select("auto", remote=False).name == "transformers"
    monkeypatch.setattr(vllm_engine, "vllm_available", lambda: True)
    assert select("auto", remote=False).name == "vllm"
    assert select("transformers", remote=False).name == "transformers"
    assert select("auto", remote=True).name == "http" == select("vllm", remote=True).name
    with pytest.raises(ConfigError, match="choose one of: auto, transformers, vllm"):
        select("tranformers", remote=False)


def test_a_backend_declared_here_is_a_choice_is_built_and_names_the_identity(
    toy: Backend, tmp_path: Path
) -> None:
    assert engine_choices()[-1] == "toy"
    assert checked({"engine": "toy"})["engine"] == "toy"
    client = make_client("toy-model", engine="toy", concurrency=3)
    assert isinstance(client, ToyClient) and client.settings.concurrency == 3
    assert engine_kind(client) == "toy"
    assert model_identity("toy-model", "toy") == {"engine": "toy", "model": "toy-model"}

    from mars_eval.api import evaluate

    checkpoint = tmp_path / "toy-checkpoint"  # an in-process model is checked to be a checkpoint
    checkpoint.mkdir()
    (checkpoint / "config.json").write_text("{}", encoding="utf-8")
    (checkpoint / "model.safetensors").write_bytes(b"")
    runs = tmp_path / "runs"
    result = evaluate("single", "arith", str(checkpoint), engine="toy", limit=2, output=str(runs))
    config = json.loads((result.run_dir / "config.json").read_text(encoding="utf-8"))
    assert config["engine"] == "toy" and config["fingerprint"]
    assert config["model"] == str(checkpoint.resolve())
    assert len(result.samples) == 2 and result.summary["calls_sent"] == 2


def test_an_unregistered_engine_is_refused_in_one_line() -> None:
    with pytest.raises(ConfigError, match="unknown --engine 'toy'; choose one of: auto, transformers, vllm"):
        checked({"engine": "toy"})
