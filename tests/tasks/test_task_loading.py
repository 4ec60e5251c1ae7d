"""Loading benchmark rows: local JSON/JSONL/CSV/Parquet copies, errors, the offline hub path."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from mars_eval.models.base import ConfigError
from mars_eval.tasks import make_task

SHARED_DATA = Path(__file__).resolve().parents[3] / "shared" / "data"
AIME_ROWS = [
    {"id": 60, "problem": "Compute $1+1$.", "solution": "2", "answer": "002", "url": "u", "year": "2024"},
    {"id": 61, "problem": "Compute $2+3$.", "solution": "5", "answer": "5", "url": "u", "year": "2024"},
]


def _write(path: Path, rows: list[dict]) -> Path:
    import datasets

    suffix = path.suffix
    if suffix == ".jsonl":
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    elif suffix == ".json":
        path.write_text(json.dumps(rows))
    elif suffix == ".csv":
        datasets.Dataset.from_list(rows).to_csv(str(path), index=False)
    elif suffix == ".parquet":
        datasets.Dataset.from_list(rows).to_parquet(str(path))
    return path


@pytest.mark.parametrize("suffix", [".jsonl", ".json", ".csv", ".parquet"])
def test_local_file_formats(tmp_path: Path, suffix: str) -> None:
    path = _write(tmp_path / f"aime{suffix}", AIME_ROWS)
    problems = make_task("aime").load(data_files=str(path))
    assert [p.id for p in problems] == ["60", "61"]
    assert [p.gold for p in problems] == ["002", "5"]
    assert problems[0].question == "Compute $1+1$."
    assert problems[0].prompt.endswith("put your final answer within \\boxed{}.")
    assert problems[0].prompt.startswith(problems[0].question)


def test_ids_fall_back_to_a_stable_hash(tmp_path: Path) -> None:
    rows = [{"problem": "What is 6 times 7?", "answer": "42"}, {"problem": "What is 2+2?", "answer": "4"}]
    path = _write(tmp_path / "aime25.jsonl", rows)
    first = make_task("aime25").load(data_files=str(path))
    again = make_task("aime25").load(data_files=str(path))
    assert [p.id for p in first] == [p.id for p in again]
    assert len({p.id for p in first}) == 2 and all(p.id.startswith("aime25-") for p in first)


def test_missing_columns_are_listed(tmp_path: Path) -> None:
    path = _write(tmp_path / "bad.jsonl", [{"question": "2+2?", "solution": "4"}])
    with pytest.raises(ConfigError) as err:
        make_task("math500").load(data_files=str(path))
    msg = str(err.value)
    assert "needs columns problem, answer" in msg and "missing problem, answer" in msg
    assert "found question, solution" in msg and "\n" not in msg


def test_gpqa_missing_columns(tmp_path: Path) -> None:
    path = _write(tmp_path / "gpqa.csv", [{"Question": "q", "Correct Answer": "a"}])
    missing = "missing Incorrect Answer 1, Incorrect Answer 2, Incorrect Answer 3"
    with pytest.raises(ConfigError, match=missing):
        make_task("gpqa").load(data_files=str(path))


def test_missing_unsupported_and_unreadable_files(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="no such file"):
        make_task("aime").load(data_files=str(tmp_path / "nope.jsonl"))
    (tmp_path / "data.txt").write_text("hello")
    with pytest.raises(ConfigError, match="unsupported file type"):
        make_task("aime").load(data_files=str(tmp_path / "data.txt"))
    (tmp_path / "broken.parquet").write_bytes(b"not parquet at all")
    with pytest.raises(ConfigError, match="cannot read it as parquet"):
        make_task("aime").load(data_files=str(tmp_path / "broken.parquet"))
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(ConfigError):
        make_task("aime").load(data_files=str(tmp_path / "empty.jsonl"))


_OFFLINE_SCRIPT = """
from mars_eval.models.base import ConfigError
from mars_eval.tasks import make_task
for name in ("aime24", "gpqa"):
    try:
        make_task(name).load()
    except ConfigError as e:
        print(f"{name}|{e}")
"""


@pytest.mark.parametrize("offline_env", ["1", ""])
def test_hub_without_network_fails_fast_in_one_line(tmp_path: Path, offline_env: str) -> None:
    # A fresh process with an empty cache: nothing can be served, the hub cannot be reached
    # (HF_ENDPOINT points at a closed local port when HF_HUB_OFFLINE is unset).
    env = {
        **os.environ,
        "HF_HOME": str(tmp_path / "hf"),
        "HF_HUB_OFFLINE": offline_env,
        "HF_ENDPOINT": "http://127.0.0.1:9",
    }
    # The timeout only guards against a hang (retrying an unreachable hub for minutes); how
    # fast it fails is a benchmark's business, not a unit test's.
    out = subprocess.run(
        [sys.executable, "-c", _OFFLINE_SCRIPT], env=env, capture_output=True, text=True, timeout=300
    )
    lines = [ln for ln in out.stdout.splitlines() if "|" in ln]
    assert [ln.split("|", 1)[0] for ln in lines] == ["aime24", "gpqa"], out.stdout + out.stderr
    for line in lines:
        msg = line.split("|", 1)[1]
        assert "--data-files" in msg and "HF_TOKEN" in msg
    gpqa_msg = lines[1].split("|", 1)[1]
    assert "gated" in gpqa_msg and "huggingface-cli login" in gpqa_msg
    assert "huggingface.co/datasets/Idavidrein/gpqa" in gpqa_msg


@pytest.mark.skipif(not (SHARED_DATA / "aime24.jsonl").exists(), reason="shared benchmark data absent")
def test_shared_aime24_copy() -> None:
    problems = make_task("aime").load(data_files=str(SHARED_DATA / "aime24.jsonl"))
    assert len(problems) == 30 and len({p.id for p in problems}) == 30
    assert all(p.gold.isdigit() and 0 <= int(p.gold) <= 999 for p in problems)
    assert any(p.gold.startswith("0") for p in problems)  # "073"-style golds exist in the data


@pytest.mark.skipif(not (SHARED_DATA / "aime25.jsonl").exists(), reason="shared benchmark data absent")
def test_shared_aime25_copy() -> None:
    problems = make_task("aime25").load(data_files=str(SHARED_DATA / "aime25.jsonl"))
    assert len(problems) == 30 and all(p.gold.isdigit() for p in problems)


@pytest.mark.skipif(not (SHARED_DATA / "math500.jsonl").exists(), reason="shared benchmark data absent")
def test_shared_math500_reference_solutions_score_correct() -> None:
    task = make_task("math500")
    problems = task.load(data_files=str(SHARED_DATA / "math500.jsonl"))
    assert len(problems) == 500 and len({p.id for p in problems}) == 500
    rows = [json.loads(line) for line in (SHARED_DATA / "math500.jsonl").read_text().splitlines()]
    sample = rows[::10]  # 50 reference solutions: their last \boxed{} must score as the gold
    wrong = [r["unique_id"] for r in sample if not task.score(task.extract(r["solution"]), r["answer"])]
    assert wrong == []


def test_hub_errors_when_reachable(monkeypatch: pytest.MonkeyPatch) -> None:
    import datasets

    from mars_eval.tasks import loading

    monkeypatch.delenv("HF_HUB_OFFLINE", raising=False)
    monkeypatch.delenv("HF_DATASETS_OFFLINE", raising=False)
    monkeypatch.setattr(loading, "_hub_reachable", lambda timeout_s=3.0: True)
    calls: list[tuple] = []

    def gated(*args, **kwargs):
        calls.append((args, kwargs))
        raise ConnectionError("401 Client Error: this dataset is gated\nsecond line")

    monkeypatch.setattr(datasets, "load_dataset", gated)
    with pytest.raises(ConfigError) as err:
        make_task("gpqa").load()
    assert calls[0][0] == ("Idavidrein/gpqa", "gpqa_diamond") and calls[0][1]["split"] == "train"
    assert "huggingface-cli login" in str(err.value) and "--data-files" in str(err.value)

    def missing(*args, **kwargs):
        raise FileNotFoundError("Dataset 'HuggingFaceH4/MATH-500' doesn't exist on the Hub\nmore")

    monkeypatch.setattr(datasets, "load_dataset", missing)
    with pytest.raises(ConfigError) as err:
        make_task("math500").load()
    msg = str(err.value)
    assert "doesn't exist on the Hub" in msg and "\n" not in msg and "HF_TOKEN" in msg


def test_offline_mode_flags_are_restored() -> None:
    import datasets.config
    import huggingface_hub.constants

    from mars_eval.tasks.loading import _offline_mode

    before = (datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE)
    with _offline_mode():
        assert datasets.config.HF_HUB_OFFLINE and huggingface_hub.constants.HF_HUB_OFFLINE
    assert (datasets.config.HF_HUB_OFFLINE, huggingface_hub.constants.HF_HUB_OFFLINE) == before
