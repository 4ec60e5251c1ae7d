"""`mars-eval mas` over real HTTP against the scripted server: faults must not change results.

Every test runs the real CLI in a subprocess and reads its `--json` line. The scripted "model"
answers 20 AIME-like problems, four of them wrongly, in varied reply styles (thinking in a
separate field, inline `<think>` with a decoy answer, markdown, ...), so the right accuracy is
known exactly: 16/20.
"""

from __future__ import annotations

import json
import socket
from pathlib import Path

import pytest

from tests.support.cli import mas_args, run_cli
from tests.support.datasets import ScriptedSet, write_aime_set, write_gpqa_set
from tests.support.scripted_policy import AnswerPolicy, FaultPlan

MODEL = "scripted-model"
WRONG = (3, 8, 15, 17)


@pytest.fixture
def aime(tmp_path: Path) -> ScriptedSet:
    return write_aime_set(tmp_path / "aime.jsonl", n=20, wrong=WRONG)


def run_mas(aime: ScriptedSet, urls: list[str], output: Path, *extra: str, model: str = MODEL):
    return run_cli(
        mas_args(model=model, base_urls=urls, output=output, data_files=aime.path, extra=list(extra))
    )


def sample_records(run_dir: str) -> list[dict]:
    return [json.loads(line) for line in (Path(run_dir) / "samples.jsonl").read_text().splitlines()]


def error_lines(stderr: str) -> list[str]:
    """Non-empty stderr lines, less the `datasets` library's progress bars."""
    return [ln for ln in stderr.splitlines() if ln.strip() and "examples/s]" not in ln]


def test_transient_faults_do_not_change_accuracy(aime, scripted_server, tmp_path):
    clean = scripted_server(aime.policy)
    res = run_mas(aime, [clean.base_url], tmp_path / "clean")
    assert res.returncode == 0, res.describe()
    base = res.summary
    assert base["accuracy"] == pytest.approx(aime.accuracy()) == pytest.approx(16 / 20)
    assert (base["n"], base["samples"], base["errors"], base["llm_calls"]) == (20, 1, 0, 20)
    assert base["prompt_tokens"] > 0 and base["completion_tokens"] > 0 and base["wall_seconds"] > 0

    # 500s, 503s, 429s with Retry-After, dropped sockets, and a hang past the client timeout; at
    # most two faults per distinct request, so each call succeeds within the client's attempts.
    faults = FaultPlan(
        rates={"500": 0.2, "503": 0.1, "429": 0.15, "drop": 0.15},
        schedule={2: "hang"},
        hang_s=30,
        retry_after_s=0.2,
        seed=7,
    )
    faulty = scripted_server(aime.policy, faults=faults)
    res = run_mas(aime, [faulty.base_url], tmp_path / "faulty", "--request-timeout", "2")
    assert res.returncode == 0, res.describe()
    got = res.summary
    assert got["accuracy"] == base["accuracy"]
    assert got["stderr"] == pytest.approx(base["stderr"])
    assert (got["errors"], got["llm_calls"]) == (0, 20)
    outcomes = faulty.stats()["outcomes"]
    for kind in ("500", "429", "drop", "hang"):
        assert outcomes.get(kind, 0) >= 1, outcomes  # the faults really happened
    # Each call was answered exactly once: retries only repeat failed attempts.
    assert sorted(faulty.ok_bodies().values()) == [1] * 20
    # Per-sample answers agree with the clean run, sample by sample.
    by_key = {r["key"]: (r["answer"], r["correct"]) for r in sample_records(base["run_dir"])}
    assert {r["key"]: (r["answer"], r["correct"]) for r in sample_records(got["run_dir"])} == by_key


def test_permanent_failure_is_an_error_not_a_wrong_answer(aime, scripted_server, tmp_path):
    # [Q05] is answered correctly when it gets through; every call for it fails with 500.
    srv = scripted_server(aime.policy, faults=FaultPlan(always={"[Q05]": "500"}))
    args = ("--max-attempts", "3")
    res = run_mas(aime, [srv.base_url], tmp_path / "runs", *args)
    assert res.returncode == 3, res.describe()  # finished, with an errored sample: rerun it
    s = res.summary
    assert s["errors"] == 1 and s["error_kinds"] == {"model access": 1}
    assert s["n"] == 20 and s["n_scored"] == 19
    # Accuracy is over the 19 scored problems (15/19), not 15/20 as if the error were wrong.
    assert s["accuracy"] == pytest.approx(aime.accuracy(excluding=["[Q05]"])) == pytest.approx(15 / 19)
    assert srv.count_for("[Q05]") == 3  # --max-attempts 3: three tries, then given up
    failed = [r for r in sample_records(s["run_dir"]) if r["error"]]
    assert len(failed) == 1 and failed[0]["key"] == "5#0" and "[Q05]" in failed[0]["messages"][0]["content"]
    assert failed[0]["correct"] is None and failed[0]["answer"] is None and "HTTP 500" in failed[0]["error"]

    # The fault clears; the same command reruns only the errored sample.
    srv.faults = FaultPlan()
    ok_before = srv.stats()["ok"]
    res = run_mas(aime, [srv.base_url], tmp_path / "runs", *args)
    assert res.returncode == 0, res.describe()
    s2 = res.summary
    assert s2["run_dir"] == s["run_dir"]
    assert (s2["errors"], s2["n_scored"], s2["llm_calls"]) == (0, 20, 20)
    assert s2["accuracy"] == pytest.approx(aime.accuracy()) == pytest.approx(16 / 20)
    assert srv.stats()["ok"] - ok_before == 1 and srv.count_for("[Q05]", outcome="ok") == 1


def test_two_endpoints_both_serve(aime, scripted_server, tmp_path):
    a = scripted_server(aime.policy, latency=0.1)
    b = scripted_server(aime.policy, latency=0.1)
    res = run_mas(aime, [a.base_url, b.base_url], tmp_path / "runs")
    assert res.returncode == 0, res.describe()
    assert res.summary["accuracy"] == pytest.approx(16 / 20) and res.summary["errors"] == 0
    served_a, served_b = a.stats()["ok"], b.stats()["ok"]
    assert served_a + served_b == 20
    # Least-in-flight balancing over 20 concurrent calls: neither endpoint is left idle.
    assert min(served_a, served_b) >= 5, (served_a, served_b)


def closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]  # closed again on exit: nothing listens there


def test_unreachable_endpoint_fails_before_any_work(tmp_path):
    out = tmp_path / "runs"
    res = run_cli(
        mas_args(model=MODEL, base_urls=[f"http://127.0.0.1:{closed_port()}/v1"], output=out, task="arith")
    )
    assert res.returncode == 2, res.describe()
    lines = error_lines(res.stderr)
    assert len(lines) == 1 and lines[0].startswith("error:") and "cannot reach" in lines[0], res.describe()
    assert not out.exists() or not any(out.iterdir())  # no run folder was made


def test_unknown_model_fails_before_any_work(scripted_server, tmp_path):
    srv = scripted_server(AnswerPolicy())
    out = tmp_path / "runs"
    res = run_cli(mas_args(model="no-such-model", base_urls=[srv.base_url], output=out, task="arith"))
    assert res.returncode == 2, res.describe()
    lines = error_lines(res.stderr)
    assert len(lines) == 1 and "no-such-model" in lines[0] and MODEL in lines[0], res.describe()
    assert srv.stats()["calls"] == 0  # only GET /v1/models was asked
    assert not out.exists() or not any(out.iterdir())


@pytest.mark.parametrize(
    "change, expected",
    [
        ({"task": "nope"}, "unknown task"),
        ({"system": "nope"}, "unknown system"),
        ({"data": "missing"}, "no such file"),
        ({"data": "bad"}, "answer"),  # rows without the needed columns
    ],
)
def test_bad_input_is_one_line(change, expected, aime, scripted_server, tmp_path):
    srv = scripted_server(aime.policy)
    data = aime.path
    if change.get("data") == "missing":
        data = tmp_path / "missing.jsonl"
    elif change.get("data") == "bad":
        data = tmp_path / "bad.jsonl"
        data.write_text('{"question": "no problem or answer columns"}\n')
    args = mas_args(
        model=MODEL,
        base_urls=[srv.base_url],
        output=tmp_path / "runs",
        task=change.get("task", "aime24"),
        system=change.get("system", "single"),
        data_files=data,
    )
    res = run_cli(args)
    assert res.returncode == 2, res.describe()
    lines = error_lines(res.stderr)
    assert len(lines) == 1 and lines[0].startswith("error:") and expected in lines[0], res.describe()
    assert srv.stats()["calls"] == 0


def test_gpqa_letters_with_faults(scripted_server, tmp_path):
    """Shuffled options, letters stated six ways, transient faults: accuracy is still exact."""
    gpqa = write_gpqa_set(tmp_path / "gpqa.jsonl", n=12, wrong=(2, 7))
    srv = scripted_server(gpqa.policy, faults=FaultPlan(rates={"500": 0.2, "drop": 0.2}, seed=3))
    args = mas_args(
        model=MODEL, base_urls=[srv.base_url], output=tmp_path / "runs", task="gpqa", data_files=gpqa.path
    )
    res = run_cli(args)
    assert res.returncode == 0, res.describe()
    s = res.summary
    assert (s["n"], s["errors"], s["llm_calls"]) == (12, 0, 12)
    assert s["accuracy"] == pytest.approx(gpqa.accuracy()) == pytest.approx(10 / 12)
    records = sample_records(s["run_dir"])
    assert len({r["gold"] for r in records}) >= 3  # the correct option is not always at one letter
    assert all(r["answer"] in ("A", "B", "C", "D") for r in records)


def test_model_name_defaults_to_the_one_served_model(tmp_path, scripted_server):
    data = write_aime_set(tmp_path / "aime.jsonl", n=4, wrong=[1])
    srv = scripted_server(data.policy, model=MODEL)
    args = ["mas", "--task", "aime", "--base-url", srv.base_url, "--data-files", str(data.path)]
    res = run_cli([*args, "--output", str(tmp_path / "runs"), "--json"])
    assert res.returncode == 0, res.describe()
    assert res.summary["model"] == MODEL and res.summary["accuracy"] == pytest.approx(0.75)


def test_an_always_failing_endpoint_prints_counts_and_the_servers_message(aime, scripted_server, tmp_path):
    """Issue 31: `2 sample(s) failed ({'model access': 2})`, a Python dict and no server message."""
    srv = scripted_server(aime.policy, faults=FaultPlan(rates={"500": 1.0}))
    res = run_mas(aime, [srv.base_url], tmp_path / "runs", "--limit", "2", "--max-attempts", "1")
    assert res.returncode == 3, res.describe()
    out = " ".join(res.stdout.split())  # the console may wrap a long line
    assert "2 sample(s) failed (model access: 2)" in out, res.describe()
    assert "{'" not in out
    first = res.summary["first_error"]
    assert "HTTP 500" in first and "Injected server error." in first
    assert f"first error: {first}" in out
