"""The LLM judge in-process on a real model, SmolLM2-135M-Instruct: a judged run (the system on
the scripted server), its resume and a rescore (issue 42, item 1). Marked real_model."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.support.cli import mas_args, run_cli
from tests.support.datasets import write_aime_set
from tests.support.real_model import NAME, pull_real_model, real_env

pytestmark = [pytest.mark.real_model, pytest.mark.slow]
N = 3
JUDGE = ["--judge-model", NAME, "--judge-max-tokens", "8", "--dtype", "float32"]
VERDICTS = {"correct", "incorrect", "unreadable"}


def test_smollm2_judges_a_run_resumes_and_rescores(tmp_path: Path, scripted_server) -> None:
    folder = pull_real_model()
    aime = write_aime_set(tmp_path / "aime.jsonl", n=N, wrong=(1,))
    srv = scripted_server(aime.policy)
    base = mas_args(
        model="scripted-model", base_urls=[srv.base_url], output=tmp_path / "runs", data_files=aime.path
    )
    env = real_env()
    res = run_cli([*base, "--scorer", "judge", *JUDGE], env=env, timeout=900)
    assert res.returncode == 0, res.describe()
    s = res.summary
    judge = s["scorer"]["judge"]
    assert (
        judge["engine"] == "transformers" and judge["model"] == str(folder.resolve()) and judge["fingerprint"]
    )
    assert s["judge_calls_sent"] == N and len(srv.entries()) == N  # the judge's calls never reach the server
    rows = [json.loads(ln) for ln in (Path(s["run_dir"]) / "samples.jsonl").read_text().splitlines()]
    assert all(r["score"]["verdict"] in VERDICTS and isinstance(r["score"]["reply"], str) for r in rows)
    assert all(r["correct"] == (r["score"]["verdict"] == "correct") for r in rows)
    again = run_cli([*base, "--scorer", "judge", *JUDGE], env=env, timeout=900)
    assert again.returncode == 0, again.describe()
    assert again.summary["judge_calls_sent"] == 0 and again.summary["judge_calls_reused"] == 0  # all done

    plain = run_cli(base, env=env, timeout=300)
    assert plain.returncode == 0, plain.describe()
    sent = len(srv.entries())
    rescored = run_cli(
        ["rescore", plain.summary["run_dir"], "--scorer", "judge", *JUDGE, "--json"], env=env, timeout=900
    )
    assert rescored.returncode == 0, rescored.describe()
    r = rescored.summary
    assert len(srv.entries()) == sent and r["judge_calls_sent"] == N
    assert r["rescored_from"] == plain.summary["run_dir"] and r["run_dir"] != plain.summary["run_dir"]
    # the same judge on the same replies: the same verdicts as the judged run
    by_key = {x["key"]: x["score"]["verdict"] for x in rows}
    rows2 = [json.loads(ln) for ln in (Path(r["run_dir"]) / "samples.jsonl").read_text().splitlines()]
    assert {x["key"]: x["score"]["verdict"] for x in rows2} == by_key
