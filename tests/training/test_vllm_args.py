"""vLLM under torchrun, without a GPU: the engine arguments each rank builds."""

import pytest

from mars_eval.models.base import ConfigError
from training.engines.vllm_engine import engine_kwargs


def test_one_process_uses_the_in_process_executor():
    kw = engine_kwargs("m", seed=3)
    assert "distributed_executor_backend" not in kw
    assert kw["tensor_parallel_size"] == 1 and kw["seed"] == 3 and kw["enable_sleep_mode"]


def test_torchrun_ranks_use_external_launcher_one_gpu_each():
    # 8 ranks, tensor parallel 2: 4 independent engines of 2 GPUs; every rank passes the same
    # seed (vLLM's requirement) and vLLM places each rank on its LOCAL_RANK device. No
    # data_parallel_size: vLLM's DP all-reduces in every engine step across the DP ranks, which
    # deadlocks a generate that one rank makes alone (an evaluation) or unequal call counts
    per_rank = [engine_kwargs("m", seed=7, world_size=8, tensor_parallel=2) for _ in range(8)]
    for kw in per_rank:
        assert kw["distributed_executor_backend"] == "external_launcher"
        assert kw["tensor_parallel_size"] == 2 and "data_parallel_size" not in kw
        assert kw["seed"] == 7
    kw1 = engine_kwargs("m", world_size=8)
    assert kw1["tensor_parallel_size"] == 1 and "data_parallel_size" not in kw1
    with pytest.raises(ConfigError, match="does not divide"):
        engine_kwargs("m", world_size=8, tensor_parallel=3)


def test_trainer_rollout_plan_per_tensor_parallel_group():
    from training.config import build_config, derived

    cfg = build_config("qwen3-4b", overrides={"vllm_tensor_parallel": "2"})
    d = derived(cfg, world_size=8)
    assert d["trajectories_per_rank"] == 96  # 384 over 4 engines
    assert d["trajectories_per_game_and_rank"] is None  # oversample: no fixed split per game


def test_compile_cache_off_unless_the_user_chose(monkeypatch):
    from training.engines.vllm_engine import vllm_environment

    monkeypatch.delenv("VLLM_DISABLE_COMPILE_CACHE", raising=False)
    monkeypatch.delenv("VLLM_ENABLE_V1_MULTIPROCESSING", raising=False)
    assert vllm_environment() == {"VLLM_ENABLE_V1_MULTIPROCESSING": "0", "VLLM_DISABLE_COMPILE_CACHE": "1"}
    monkeypatch.setenv("VLLM_DISABLE_COMPILE_CACHE", "0")  # a user's own choice is kept
    assert vllm_environment()["VLLM_DISABLE_COMPILE_CACHE"] == "0"


def test_vllm_extra_is_pinned_to_one_minor_release():
    import re
    import tomllib
    from pathlib import Path

    meta = tomllib.loads((Path(__file__).resolve().parents[2] / "pyproject.toml").read_text())
    (spec,) = meta["project"]["optional-dependencies"]["vllm"]
    assert re.fullmatch(r"vllm>=0\.33,<0\.34", spec)  # an upper bound: no untested release
