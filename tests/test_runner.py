"""The evaluation loop in-process: exact accuracy, errors kept apart, resume, CLI bad input."""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
import sys

import pytest

from mars_eval.models.base import ChatResponse, ModelAccessError, SamplingParams
from mars_eval.run.runner import EvalConfig, run_eval
from mars_eval.tasks import make_task


class Oracle:
    """Answers arith problems: right for even-numbered problems, wrong for odd, fails on `broken`."""

    model = "oracle"

    def __init__(self, broken: set[str] | None = None):
        self.broken = broken or set()
        self.sent = 0
        self.task = make_task("arith")
        self.golds = {p.prompt: p.gold for p in self.task.load()}
        self.index = {p.prompt: i for i, p in enumerate(self.task.load())}

    async def chat(self, messages, params):
        self.sent += 1
        prompt = messages[-1]["content"]
        if str(self.index[prompt]) in self.broken:
            raise ModelAccessError("HTTP 500 after retries")
        gold = int(self.golds[prompt])
        answer = gold if self.index[prompt] % 2 == 0 else gold + 1
        return ChatResponse(
            content=f"Step by step... so the answer is \\boxed{{{answer}}}.",
            thinking=f"maybe \\boxed{{{gold + 7}}}",
            prompt_tokens=10,
            completion_tokens=5,
        )

    async def check(self): ...
    async def aclose(self): ...


def cfg(tmp_path, **kw):
    base = dict(task="arith", limit=10, output=str(tmp_path), params=SamplingParams(max_tokens=32))
    return EvalConfig(**{**base, **kw})


def test_exact_accuracy_and_summary_keys(tmp_path):
    summary = asyncio.run(run_eval(cfg(tmp_path, samples=2), client=Oracle(), progress=False))
    assert summary["accuracy"] == pytest.approx(0.5)
    assert summary["pass@2"] == pytest.approx(0.5) and summary["majority@2"] == pytest.approx(0.5)
    assert summary["n"] == 10 and summary["samples"] == 2 and summary["errors"] == 0
    assert (
        summary["llm_calls"] == 20 and summary["prompt_tokens"] == 200 and summary["completion_tokens"] == 100
    )
    for key in ("run_dir", "task", "system", "model", "stderr", "wall_seconds"):
        assert key in summary
    lines = [json.loads(x) for x in open(f"{summary['run_dir']}/samples.jsonl")]
    assert len(lines) == 20
    first = lines[0]
    assert first["transcript"][0]["thinking"].startswith("maybe")  # thinking kept in the transcript
    assert first["messages"][0]["role"] == "user"
    assert re.fullmatch(r"arith-single-oracle-[0-9a-f]{10}", summary["run_dir"].split("/")[-1])


def test_failed_samples_are_errors_not_wrong_and_rerun(tmp_path):
    client = Oracle(broken={"0", "2"})
    first = asyncio.run(run_eval(cfg(tmp_path), client=client, progress=False))
    assert first["errors"] == 2
    assert first["accuracy"] == pytest.approx(3 / 8)  # 8 scored problems, 3 of them even
    fixed = Oracle()
    second = asyncio.run(run_eval(cfg(tmp_path), client=fixed, progress=False))
    assert second["errors"] == 0 and second["accuracy"] == pytest.approx(0.5)
    assert fixed.sent == 2  # only the two errored samples were redone


def test_larger_limit_reuses_finished_samples(tmp_path):
    asyncio.run(run_eval(cfg(tmp_path, limit=4), client=Oracle(), progress=False))
    client = Oracle()
    summary = asyncio.run(run_eval(cfg(tmp_path, limit=10), client=client, progress=False))
    assert client.sent == 6 and summary["n"] == 10


def test_fresh_starts_over(tmp_path):
    asyncio.run(run_eval(cfg(tmp_path, limit=3), client=Oracle(), progress=False))
    client = Oracle()
    asyncio.run(run_eval(cfg(tmp_path, limit=3, fresh=True), client=client, progress=False))
    assert client.sent == 3


def cli(*args, **kw):
    return subprocess.run(
        [sys.executable, "-m", "mars_eval.cli", *args], capture_output=True, text=True, **kw
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["mas", "--task", "nope"], "unknown task"),
        (["mas", "--task", "arith", "--system", "nope"], "unknown system"),
        (["mas", "--task", "aime", "--data-files", "/nonexistent/x.jsonl"], "no such file"),
        (["mas", "--task", "arith", "--model", "m", "--base-url", "http://127.0.0.1:9"], "cannot reach"),
    ],
)
def test_bad_input_is_one_line_and_nonzero(args, message, tmp_path):
    r = cli(*args, "--output", str(tmp_path))
    assert r.returncode == 2
    assert message in r.stderr and len(r.stderr.strip().splitlines()) == 1
    assert not any(tmp_path.iterdir())  # nothing was started


def test_missing_columns_is_a_clear_error(tmp_path):
    data = tmp_path / "bad.jsonl"
    data.write_text('{"question": "1+1?", "solution": "2"}\n')
    r = cli("mas", "--task", "aime", "--data-files", str(data), "--output", str(tmp_path / "runs"))
    assert r.returncode == 2 and "answer" in r.stderr and len(r.stderr.strip().splitlines()) == 1


def test_vote_matches_the_calls_of_a_mad_run_of_the_same_configuration(tmp_path):
    from rich.console import Console

    from mars_eval.models.base import ConfigError
    from mars_eval.run.identity import model_identity
    from mars_eval.run.runner import matched_value
    from mars_eval.tasks.base import Problem

    def identity(system: str, model: str) -> dict:
        return cfg(tmp_path, system=system, model=model).identity(model_identity(model, "http"), "data")

    run = tmp_path / "arith-mad-oracle-abc"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({**identity("mad", "oracle"), "command": "c1"}))
    (run / "summary.json").write_text(json.dumps({"llm_calls_per_sample": 4.6, "n": 10, "samples": 1}))
    problems = [Problem(id=f"p{i}", prompt=f"q{i}", gold=str(i)) for i in range(10)]
    rows = [  # 4 samples of 4 calls, 6 of 5: 4.6 per sample
        {"key": f"{p.id}#0", "problem_id": p.id, "sample": 0, "gold": p.gold, "calls": 4 if i < 4 else 5}
        for i, p in enumerate(problems)
    ]
    (run / "samples.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    vote = cfg(tmp_path, system="vote", model="oracle")
    assert matched_value(vote, Console(quiet=True), identity("vote", "oracle"), problems, "votes") == 5
    assert vote.matched["run"] == "arith-mad-oracle-abc"
    with pytest.raises(ConfigError, match="closest, arith-mad-oracle-abc, differs in: model"):
        matched_value(vote, Console(quiet=True), identity("vote", "other"), problems, "votes")
    with pytest.raises(ConfigError, match=r"differs in: problems \(10 vs 4: 6 not among this run's"):
        matched_value(vote, Console(quiet=True), identity("vote", "oracle"), problems[:4], "votes")


# --- run lifecycle (issue 10): resume message, wall time, lazy model load, exit codes -----------


def test_rerun_says_what_it_resumes_and_adds_its_wall_time(tmp_path):
    import io

    from rich.console import Console

    first = asyncio.run(run_eval(cfg(tmp_path, limit=4), client=Oracle(), progress=False))
    out = io.StringIO()
    second = asyncio.run(
        run_eval(cfg(tmp_path, limit=10), client=Oracle(), console=Console(file=out), progress=False)
    )
    assert "resuming: 4 of 10 samples done, 6 to run" in out.getvalue()
    assert "resumed: 4 stored calls reused, 6 sent" in out.getvalue()
    assert second["wall_seconds_this_run"] > 0
    assert second["wall_seconds"] == pytest.approx(
        first["wall_seconds"] + second["wall_seconds_this_run"], abs=2e-3
    )
    saved = json.loads(open(f"{second['run_dir']}/summary.json").read())
    assert saved["wall_seconds"] == second["wall_seconds"]


class InProcess(Oracle):
    """An in-process engine stand-in: `check` is what loads the model."""

    model = "in-process"

    def __init__(self, **kw):
        super().__init__(**kw)
        self.loads = 0

    async def check(self):
        self.loads += 1

    async def chat(self, messages, params):
        assert self.loads == 1, "a call before the model was loaded"
        return await super().chat(messages, params)


def test_in_process_model_is_loaded_only_when_a_call_must_be_sent(tmp_path):
    engine = InProcess(broken={"3"})
    asyncio.run(run_eval(cfg(tmp_path), client=engine, progress=False))
    assert engine.loads == 1  # loaded once, by the first call
    again = InProcess()
    summary = asyncio.run(run_eval(cfg(tmp_path, limit=3), client=again, progress=False))
    assert again.loads == 0 and again.sent == 0 and summary["errors"] == 0  # all stored: never loaded
    retry = InProcess()
    asyncio.run(run_eval(cfg(tmp_path), client=retry, progress=False))
    assert retry.loads == 1 and retry.sent == 1  # the errored sample needed a call


def test_a_model_that_cannot_load_stops_the_run_and_leaves_no_folder(tmp_path):
    from mars_eval.models.base import ConfigError

    class Missing(InProcess):
        async def check(self):
            raise ConfigError("no such model folder: /nope")

    with pytest.raises(ConfigError, match="no such model folder"):
        asyncio.run(run_eval(cfg(tmp_path), client=Missing(), progress=False))
    assert not any(tmp_path.iterdir())


def test_an_unwritable_run_folder_stops_the_run_instead_of_erroring_samples(tmp_path, monkeypatch):
    from mars_eval.run.store import RunStore, StoreError

    def full(self, key, resp):
        raise StoreError("cannot write to the run folder: No space left on device")

    monkeypatch.setattr(RunStore, "put_call", full)
    with pytest.raises(StoreError):
        asyncio.run(run_eval(cfg(tmp_path), client=Oracle(), progress=False))
    monkeypatch.undo()
    (run_dir,) = tmp_path.iterdir()
    assert (run_dir / "samples.jsonl").read_text() == ""  # no sample was written as an error
    summary = asyncio.run(run_eval(cfg(tmp_path), client=Oracle(), progress=False))
    assert summary["errors"] == 0 and summary["accuracy"] == pytest.approx(0.5)


@pytest.mark.slow
def test_mas_exit_code_is_3_when_every_call_failed(tmp_path, scripted_server):
    from tests.support.cli import mas_args, run_cli
    from tests.support.datasets import write_aime_set
    from tests.support.scripted_policy import FaultPlan

    aime = write_aime_set(tmp_path / "aime.jsonl", n=4)
    srv = scripted_server(aime.policy, faults=FaultPlan(always={"": "500"}))
    args = mas_args(
        model="scripted-model", base_urls=[srv.base_url], output=tmp_path / "runs", data_files=aime.path
    )
    res = run_cli([*args, "--max-attempts", "1"])
    assert res.returncode == 3, res.describe()
    assert res.summary["errors"] == 4 and "Traceback" not in res.stderr
    srv.faults = FaultPlan()
    res = run_cli([*args, "--max-attempts", "1"])
    assert res.returncode == 0, res.describe()
    assert res.summary["errors"] == 0 and res.summary["calls_sent"] == 4


class AnswersOne:
    """Answers every problem with 1; counts what it is sent."""

    model = "ones"

    def __init__(self) -> None:
        self.sent = 0

    async def chat(self, messages, params):
        self.sent += 1
        return ChatResponse(content="So the answer is \\boxed{1}.", prompt_tokens=3, completion_tokens=2)

    async def check(self): ...
    async def aclose(self): ...


def test_a_task_alias_resumes_the_run_of_the_task_it_names(tmp_path):
    """`--task aime` and `--task aime24` are one task: one run folder, the second run sends nothing."""
    from tests.support.datasets import write_aime_set

    aime = write_aime_set(tmp_path / "aime.jsonl", n=3)
    first_client, second_client = AnswersOne(), AnswersOne()
    first = asyncio.run(
        run_eval(cfg(tmp_path, task="aime", data_files=str(aime.path)), client=first_client, progress=False)
    )
    second = asyncio.run(
        run_eval(
            cfg(tmp_path, task="aime24", data_files=str(aime.path)), client=second_client, progress=False
        )
    )
    assert first["run_dir"] == second["run_dir"] and first_client.sent == 3 and second_client.sent == 0
    assert json.loads(open(f"{first['run_dir']}/config.json").read())["task"] == "aime24"
