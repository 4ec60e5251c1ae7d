"""`--dtype auto|float32|bfloat16` (issue 39 item 1): declared once as a run option, resolved by
the hardware and a measurement (never the flags alone), named in the summary, in the identity
only when given."""

from __future__ import annotations

import json

import pytest

import mars_eval
from mars_eval.models import dtypes
from mars_eval.models.base import ConfigError
from tests.support.cli import run_cli


@pytest.fixture
def fresh_probe():
    dtypes.cpu_has_native_bf16.cache_clear()
    dtypes.cpu_bf16_is_faster.cache_clear()
    yield
    dtypes.cpu_has_native_bf16.cache_clear()
    dtypes.cpu_bf16_is_faster.cache_clear()


def test_explicit_dtypes_are_kept() -> None:
    assert dtypes.resolve_dtype("float32", "cpu") == "float32"
    assert dtypes.resolve_dtype("bfloat16", "cpu") == "bfloat16"


def test_auto_on_a_cpu_goes_by_flags_and_measurement(fresh_probe, monkeypatch) -> None:
    monkeypatch.setattr(dtypes, "cpu_has_native_bf16", lambda: False)
    assert dtypes.resolve_dtype("auto", "cpu") == "float32"  # no bf16 instructions: emulated, slow
    dtypes.cpu_bf16_is_faster.cache_clear()
    monkeypatch.setattr(dtypes, "cpu_has_native_bf16", lambda: True)
    measured = dtypes.cpu_bf16_is_faster()  # this machine's own measurement
    assert dtypes.resolve_dtype("auto", "cpu") == ("bfloat16" if measured else "float32")
    monkeypatch.setattr(dtypes, "cpu_bf16_is_faster", lambda: False)  # flags claim it, speed does not
    assert dtypes.resolve_dtype("auto", "cpu") == "float32"


def test_flags_are_read_from_cpuinfo(fresh_probe, tmp_path, monkeypatch) -> None:
    from pathlib import Path

    real = Path.read_text
    fake = {"/proc/cpuinfo": "processor\t: 0\nflags\t\t: fpu sse avx2 fma\n"}

    def read_text(self, *a, **k):
        return fake[str(self)] if str(self) in fake else real(self, *a, **k)

    monkeypatch.setattr(Path, "read_text", read_text)
    assert dtypes.cpu_has_native_bf16() is False
    dtypes.cpu_has_native_bf16.cache_clear()
    fake["/proc/cpuinfo"] = "flags\t\t: fpu avx2 avx512f avx512_bf16\n"
    assert dtypes.cpu_has_native_bf16() is True


def test_the_summary_names_the_dtype_and_the_identity_holds_it_only_when_given(tmp_path) -> None:
    out = tmp_path / "runs"
    base = ["mas", "--task", "arith", "--limit", "2", "--output", str(out), "--json"]
    auto = run_cli(base)
    assert auto.returncode == 0, auto.describe()
    assert auto.summary["dtype"] in ("float32", "bfloat16")
    stats = auto.summary["engine_stats"]
    assert stats["requests"] >= 2 and 0.0 <= stats["prefix_hit_rate"] <= 1.0
    config = json.loads((out / auto.summary["run_dir"].split("/")[-1] / "config.json").read_text())
    assert config["dtype"] == "auto"  # recorded in full, not in the hash at its default
    fp32 = run_cli([*base, "--dtype", "float32"])
    assert fp32.returncode == 0 and fp32.summary["dtype"] == "float32"
    assert fp32.summary["run_dir"] != auto.summary["run_dir"]
    bad = run_cli([*base, "--dtype", "fp16"])
    assert bad.returncode == 2 and "unknown --dtype 'fp16'" in bad.stderr
    games = run_cli(
        ["games", "--games", "tic_tac_toe", "--opponents", "random", "--episodes", "1", "--output", str(out)]
        + ["--dtype", "float32", "--max-tokens", "8", "--json"]
    )
    assert games.returncode in (0, 3), games.describe()
    written = json.loads((out / games.summary["run_dir"].split("/")[-1] / "summary.json").read_text())
    assert written["dtype"] == "float32" and "engine_stats" in written


def test_the_api_checks_dtype() -> None:
    with pytest.raises(ConfigError, match="unknown --dtype 'half'"):
        mars_eval.evaluate(task="arith", dtype="half", limit=1)
