"""`mas --scorer judge`, its resume, `mars-eval rescore`, bad scorers and a scorer of one's own,
through the CLI against the scripted server, which answers both the system's prompts and the
judge's (tests.support.scripted_policy.JudgePolicy) (issue 42, item 1)."""

from __future__ import annotations

import json
import textwrap
from pathlib import Path

import pytest

from tests.support.cli import mas_args, run_cli
from tests.support.datasets import write_aime_set
from tests.support.scripted_policy import JudgePolicy

MODEL = "scripted-model"
N = 5
WRONG = (1,)  # problem 1 is answered gold + 1


def judge_prompts(srv) -> int:
    return sum(1 for e in srv.entries() if JudgePolicy.is_judge_prompt(e.prompt))


def system_prompts(srv) -> int:
    return sum(1 for e in srv.entries() if not JudgePolicy.is_judge_prompt(e.prompt))


def records(run_dir: str | Path) -> list[dict]:
    lines = (Path(run_dir) / "samples.jsonl").read_text().splitlines()
    return [json.loads(ln) for ln in lines if ln.strip()]


@pytest.fixture
def judged(tmp_path, scripted_server):
    aime = write_aime_set(tmp_path / "aime.jsonl", n=N, wrong=WRONG)
    tags = [s.key for s in aime.scripts]
    # the judge calls problem 3's right answer Incorrect: its verdict, not math-verify's, decides
    policy = JudgePolicy(aime.policy, verdicts={f"\\boxed{{{aime.golds[tags[3]]}}}": False})
    srv = scripted_server(policy)
    base = mas_args(model=MODEL, base_urls=[srv.base_url], output=tmp_path / "runs", data_files=aime.path)
    return srv, base, tags


def test_a_judged_run_stores_verdicts_and_replies_and_names_the_judge(judged) -> None:
    srv, base, tags = judged
    plain = run_cli(base)
    assert plain.returncode == 0, plain.describe()
    assert plain.summary["accuracy"] == pytest.approx((N - 1) / N) and "scorer" not in plain.summary
    res = run_cli([*base, "--scorer", "judge", "--judge-max-tokens", "32"])
    assert res.returncode == 0, res.describe()
    s = res.summary
    assert s["run_dir"] != plain.summary["run_dir"]  # another scorer: another run
    assert s["accuracy"] == pytest.approx((N - 2) / N)  # the judge overruled math-verify once
    assert s["scorer"]["name"] == "judge" and s["scorer"]["judge"]["model"] == MODEL
    assert s["scorer"]["params"]["max_tokens"] == 32 and s["judge_calls_sent"] == N
    assert judge_prompts(srv) == N
    by_problem = {r["problem_id"]: r for r in records(s["run_dir"])}
    assert by_problem["3"]["score"] == {
        "scorer": "judge",
        "verdict": "incorrect",
        "reply": "Incorrect",
        "finish_reason": "stop",
        "calls": 1,
    }
    assert by_problem["3"]["correct"] is False and by_problem["0"]["score"]["verdict"] == "correct"
    assert by_problem["0"]["calls"] == 1  # the judge's call is not the system's
    config = json.loads((Path(s["run_dir"]) / "config.json").read_text())
    assert config["scorer"]["prompt"]["pack"] == "ours" and config["scorer"]["verdict"] == "ours"
    plain_config = json.loads((Path(plain.summary["run_dir"]) / "config.json").read_text())
    assert plain_config["scorer"] == "task"  # recorded, but out of the default run's identity
    assert "scorer" in res.stdout and "judge" in res.stdout  # the console table names it


def test_a_rerun_sends_no_judge_call_again_even_after_a_kill(judged) -> None:
    srv, base, _ = judged
    args = [*base, "--scorer", "judge"]
    first = run_cli(args)
    assert first.returncode == 0, first.describe()
    sent = len(srv.entries())
    again = run_cli(args)
    assert again.returncode == 0, again.describe()
    assert again.summary["judge_calls_sent"] == 0 and len(srv.entries()) == sent
    assert "judge calls: 0 reused, 0 sent" in again.stderr
    # a kill after every call was stored but before any sample line was written
    run_dir = Path(first.summary["run_dir"])
    (run_dir / "samples.jsonl").write_text("")
    after = run_cli(args)
    assert after.returncode == 0, after.describe()
    assert judge_prompts(srv) == N  # every judge call answered from calls.sqlite
    assert after.summary["judge_calls_sent"] == 0 and after.summary["judge_calls_reused"] == N
    assert after.summary["accuracy"] == first.summary["accuracy"]


def test_rescore_scores_a_finished_run_again_without_its_system_calls(judged, tmp_path) -> None:
    srv, base, _ = judged
    plain = run_cli(base)
    assert plain.returncode == 0, plain.describe()
    source = Path(plain.summary["run_dir"])
    before = (source / "samples.jsonl").read_bytes()
    system_sent = system_prompts(srv)
    args = ["rescore", str(source), "--scorer", "judge", "--judge-base-url", srv.base_url, "--json"]
    res = run_cli(args)
    assert res.returncode == 0, res.describe()
    s = res.summary
    assert system_prompts(srv) == system_sent  # no system call resent
    assert judge_prompts(srv) == N and s["judge_calls_sent"] == N
    folder = Path(s["run_dir"])
    assert folder.parent == source.parent and folder != source
    assert s["rescored_from"] == str(source) and s["accuracy"] == pytest.approx((N - 2) / N)
    assert s["llm_calls"] == plain.summary["llm_calls"]  # what the system did is the source's
    assert (source / "samples.jsonl").read_bytes() == before  # the source is never written
    rescored = {r["problem_id"]: r for r in records(folder)}
    assert rescored["3"]["score"]["verdict"] == "incorrect" and rescored["3"]["rescored_from"] == source.name
    assert rescored["3"]["transcript"] == {r["problem_id"]: r for r in records(source)}["3"]["transcript"]
    config = json.loads((folder / "config.json").read_text())
    assert config["rescored_from"] == source.name and config["scorer"]["name"] == "judge"
    again = run_cli(args)  # the same rescore resumes: nothing sent
    assert again.returncode == 0, again.describe()
    assert again.summary["run_dir"] == s["run_dir"] and judge_prompts(srv) == N
    exact = run_cli(["rescore", str(source), "--scorer", "exact", "--json"])
    assert exact.returncode == 0, exact.describe()
    assert (
        exact.summary["accuracy"] == pytest.approx((N - 1) / N) and exact.summary["run_dir"] != s["run_dir"]
    )


@pytest.mark.parametrize(
    ("extra", "said"),
    [
        (["--scorer", "jugde"], "unknown --scorer 'jugde'; did you mean 'judge'?"),
        (["--judge-model", "m"], "--judge-model is used by --scorer judge only"),
        (["--scorer", "judge", "-C", "judge_max_tokens=0"], "--judge-max-tokens must be at least 1"),
        (["--scorer", "judge", "-C", "oops"], "-C 'oops': give KEY=VALUE"),
        (["--scorer", "nofile.py:Cls"], "--scorer 'nofile.py': no such file"),
    ],
)
def test_a_bad_scorer_is_one_line_and_exit_2(judged, extra: list[str], said: str) -> None:
    srv, base, _ = judged
    res = run_cli([*base, *extra])
    assert res.returncode == 2, res.describe()
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 1 and said in lines[0], res.stderr
    assert len(srv.entries()) == 0  # refused before any call


def test_rescore_refuses_bad_input_in_one_line(tmp_path) -> None:
    for args, said in [
        (["rescore", str(tmp_path), "--scorer", "judge", "--judge-model", "m"], "not a mas run folder"),
        (["rescore", str(tmp_path / "none"), "--scorer", "exact"], "RUN"),
        (["rescore", str(tmp_path), "--scorer", "judgee"], "did you mean 'judge'?"),
    ]:
        res = run_cli(args)
        assert res.returncode == 2, res.describe()
        assert len(res.stderr.strip().splitlines()) == 1 and said in res.stderr, res.stderr


def test_a_scorer_of_ones_own_from_a_file(judged, tmp_path) -> None:
    srv, base, _ = judged
    path = tmp_path / "parity.py"
    path.write_text(
        textwrap.dedent(
            """
            from mars_eval.models.settings import Setting
            from mars_eval.tasks.scorers import Scorer, Verdict

            class Parity(Scorer):
                name = "parity"
                summary = "the answer's parity equals the gold's"
                settings = (Setting("parity_offset", int, 0, "added to the answer first"),)

                async def score(self, task, item, client):
                    if item.answer is None:
                        return Verdict(False)
                    same = (int(item.answer) + self.options["parity_offset"]) % 2 == int(item.gold) % 2
                    return Verdict(same, {"scorer": self.name, "parity": same})
            """
        )
    )
    res = run_cli([*base, "--scorer", f"{path}:Parity", "-C", "parity_offset=1"])
    assert res.returncode == 0, res.describe()
    # offset 1 flips every parity: only problem 1 (answered gold + 1) counts as right
    assert res.summary["accuracy"] == pytest.approx(1 / N)
    assert res.summary["scorer"] == {"name": "parity", "protocol": 1, "parity_offset": 1}
    assert records(res.summary["run_dir"])[0]["score"]["scorer"] == "parity"
    assert judge_prompts(srv) == 0
    listed = run_cli(["list", "--json"])
    names = [c["scorer"] for c in json.loads(listed.stdout)["scorers"]]
    assert names[:3] == ["task", "exact", "judge"]
