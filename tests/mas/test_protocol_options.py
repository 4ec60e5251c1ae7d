"""The reference protocols and their options through the CLI, against the scripted endpoint:
MAD's stop rule (--mad-stop), the debate style (--debate-style), the sampling presets
(--sampling), the task prompt (--task-prompt), and vote's matching by configuration.

Each test decides what the model says, so calls per sample, answers and counts are known."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from mars_eval.prompts import load_pack
from mars_eval.tasks import make_task
from tests.support.cli import mas_args, run_cli
from tests.support.datasets import write_gpqa_set
from tests.support.scripted_policy import Reply, ScriptedRequest

MODEL = "scripted-model"
OURS = load_pack()
ROUND = re.compile(r"The (first|second|third) round")
ORDINALS = ("first", "second", "third")


def _verdict(answer: str) -> str:
    body = {"Whether there is a preference": "Yes", "Supported Side": "Affirmative", "Reason": "r"}
    return json.dumps({**body, "debate_answer": answer})


class Protocol:
    """Problem i of arith: its moderator says `moderator[i][round - 1]`, its judge `judge[i]`;
    debaters and voters answer `\\boxed{gold}` (or gold + 1 for problems in `wrong`); the
    aggregator answers gold. Every request body is kept."""

    def __init__(self, n: int, moderator=None, judge=None, wrong=()):
        problems = make_task("arith").load()[:n]
        self.golds = {p.question: p.gold for p in problems}
        self.order = list(self.golds)
        self.moderator = moderator or {}
        self.judge = judge or {}
        self.wrong = set(wrong)
        self.bodies: list[dict] = []

    def __call__(self, req: ScriptedRequest) -> Reply:
        self.bodies.append(req.body)
        i, question = next((i, q) for i, q in enumerate(self.order) if q in req.prompt)
        gold, last = self.golds[question], str(req.messages[-1]["content"])
        if ROUND.search(last) and "Negative side" in last:  # the moderator's turn
            rnd = ORDINALS.index(ROUND.search(last).group(1))
            return Reply(self.moderator[i][rnd])
        if "answer candidates" in last:
            return Reply("The candidates are listed.")
        if last.startswith("So, once more"):
            return Reply(self.judge[i])
        if "Weigh every answer above" in last:  # MASLab-style aggregator
            return Reply(f"Aggregated: \\boxed{{{gold}}}")
        said = str(int(gold) + 1) if i in self.wrong else gold
        return Reply(f"Working it out. \\boxed{{{said}}}", reasoning_content="thinking")


def _mas(srv, tmp_path: Path, *extra: str, system: str = "mad", limit: int = 5, out: str = "runs"):
    args = mas_args(model=MODEL, base_urls=[srv.base_url], output=tmp_path / out, task="arith", system=system)
    return run_cli(args + ["--limit", str(limit), *extra], timeout=240)


def _records(summary: dict) -> list[dict]:
    lines = (Path(summary["run_dir"]) / "samples.jsonl").read_text().splitlines()
    latest = {r["key"]: r for r in map(json.loads, lines)}
    return sorted(latest.values(), key=lambda r: r["key"])


def _by_problem(summary: dict, problems: list[str], field: str) -> list:
    records = {r["problem_id"]: r for r in _records(summary)}
    return [records[p][field] for p in problems]


EMPTY, PROSE = _verdict(""), "I lean towards the affirmative side, but let us go on."


def test_mad_stop_rules(tmp_path, scripted_server):
    """p0: answer in round 2; p1: names a side; p2: "Continue", then empty; p3: never JSON;
    p4: never an answer, the judge neither."""
    problems = make_task("arith").load()[:5]
    golds = [p.gold for p in problems]
    moderator = {
        0: [EMPTY, _verdict(f"\\boxed{{{golds[0]}}}"), EMPTY],
        1: [_verdict("Affirmative"), EMPTY, EMPTY],
        2: [_verdict("Continue"), EMPTY, EMPTY],
        3: [PROSE, PROSE, PROSE],
        4: [EMPTY, EMPTY, EMPTY],
    }
    judge = {2: _verdict(""), 3: f"I pick \\boxed{{{golds[3]}}}.", 4: _verdict("")}
    policy = Protocol(5, moderator, judge)
    srv = scripted_server(policy, model=MODEL)
    ids = [p.id for p in problems]

    ref = _mas(srv, tmp_path)  # the default: the references' rule
    assert ref.returncode == 0, ref.describe()
    s = ref.summary
    assert _by_problem(s, ids, "calls") == [6, 3, 3, 3, 11]
    assert _by_problem(s, ids, "answer") == [golds[0], None, None, None, None]
    assert s["accuracy"] == pytest.approx(1 / 5) and s["no_answer"] == 4
    assert (s["verdict_not_an_answer"], s["verdict_unparseable"], s["judge_no_answer"]) == (2, 1, 1)
    assert s["llm_calls_per_sample"] == pytest.approx(26 / 5)
    config = json.loads((Path(s["run_dir"]) / "config.json").read_text())
    assert config["mad_stop"] == "reference" and config["protocol"] == 4
    assert "mad: debate answer not an answer" in ref.stdout  # the console table shows the counts
    report = run_cli(["report", str(Path(s["run_dir"]).parent), "--format", "md"])
    assert report.returncode == 0, report.describe()
    quality = (Path(s["run_dir"]).parent / "report.md").read_text()
    counts = "verdict not an answer 2 / verdict unparseable 1 / judge no answer 1"  # mad's own (declared)
    assert f"| 4 | 0 | {counts} |  |  | {OURS.name} {OURS.hash} |" in quality  # no answer, unparsed, mad

    lenient = _mas(srv, tmp_path, "--mad-stop", "lenient")
    assert lenient.returncode == 0, lenient.describe()
    s = lenient.summary
    assert s["run_dir"] != ref.summary["run_dir"]
    assert _by_problem(s, ids, "calls") == [6, 3, 11, 11, 11]
    assert _by_problem(s, ids, "answer") == golds  # side name, judge text, debaters' fallback
    assert s["accuracy"] == 1.0
    assert (s["verdict_not_an_answer"], s["verdict_unparseable"], s["judge_no_answer"]) == (0, 0, 0)
    sources = _by_problem(s, ids, "details")
    assert [d["source"] for d in sources] == [
        "moderator",
        "moderator",
        "affirmative",
        "judge_text",
        "affirmative",
    ]


def test_debate_styles(tmp_path, scripted_server):
    """Debaters all answer wrong; MASLab's aggregator answers right: du 6 calls and wrong,
    maslab 7 calls and right, the aggregator shown every agent's last reply."""
    policy = Protocol(3, wrong={0, 1, 2})
    srv = scripted_server(policy, model=MODEL)
    du = _mas(srv, tmp_path, system="debate", limit=3)
    assert du.returncode == 0, du.describe()
    assert du.summary["llm_calls_per_sample"] == 6 and du.summary["accuracy"] == 0.0
    policy.bodies.clear()
    maslab = _mas(srv, tmp_path, "--debate-style", "maslab", system="debate", limit=3)
    assert maslab.returncode == 0, maslab.describe()
    assert maslab.summary["llm_calls_per_sample"] == 7 and maslab.summary["accuracy"] == 1.0
    aggregate = [b for b in policy.bodies if "Weigh every answer above" in b["messages"][-1]["content"]]
    assert len(aggregate) == 3 and all(len(b["messages"]) == 1 for b in aggregate)
    assert all(b["messages"][0]["content"].count("Working it out.") == 3 for b in aggregate)
    config = json.loads((Path(maslab.summary["run_dir"]) / "config.json").read_text())
    assert config["debate_style"] == "maslab"


def test_sampling_presets(tmp_path, scripted_server):
    policy = Protocol(2)
    srv = scripted_server(policy, model=MODEL)
    qwen = _mas(srv, tmp_path, system="single", limit=2)
    assert qwen.returncode == 0, qwen.describe()
    body = policy.bodies[-1]
    assert (body["temperature"], body["top_p"], body["top_k"], body["max_tokens"]) == (0.6, 0.95, 20, 32768)
    assert "seed" in body and body["chat_template_kwargs"] == {"enable_thinking": True}

    policy.bodies.clear()
    maslab = _mas(srv, tmp_path, "--sampling", "maslab", system="single", limit=2)
    assert maslab.returncode == 0, maslab.describe()
    for body in policy.bodies:  # MASLab sends temperature and max_tokens, nothing else
        assert set(body) == {"model", "messages", "temperature", "max_tokens"}
        assert (body["temperature"], body["max_tokens"]) == (0.5, 2048)
    assert maslab.summary["sampling_preset"] == "maslab"
    assert maslab.summary["run_dir"] != qwen.summary["run_dir"]

    policy.bodies.clear()
    given = _mas(
        srv, tmp_path, "--sampling", "maslab", "--top-p", "0.9", "--no-thinking", system="single", limit=2
    )
    assert given.returncode == 0, given.describe()
    body = policy.bodies[-1]
    assert body["top_p"] == 0.9 and body["temperature"] == 0.5 and "top_k" not in body
    assert body["chat_template_kwargs"] == {"enable_thinking": False}


def test_bare_task_prompts(tmp_path, scripted_server):
    policy = Protocol(2)
    srv = scripted_server(policy, model=MODEL)
    bare = _mas(srv, tmp_path, "--task-prompt", "bare", system="single", limit=2)
    assert bare.returncode == 0, bare.describe()
    questions = {b["messages"][0]["content"] for b in policy.bodies}
    assert questions == set(policy.order)  # the question alone, no answer format
    assert bare.summary["accuracy"] == 1.0 and bare.summary["task_prompt"] == "bare"

    data = write_gpqa_set(tmp_path / "gpqa.jsonl", n=4)
    seen: list[str] = []

    def choose(req: ScriptedRequest) -> Reply:  # answers in words, as to a bare question
        seen.append(req.prompt)
        options = dict(re.findall(r"^\(([A-D])\) (.*)$", req.prompt, re.MULTILINE))
        letter = next(x for x, text in options.items() if text.startswith("boson"))
        return Reply(f"Weighing the options, the correct answer is ({letter}) {options[letter]}.")

    gpqa_srv = scripted_server(choose, model=MODEL)
    args = mas_args(
        model=MODEL, base_urls=[gpqa_srv.base_url], output=tmp_path / "g", task="gpqa", data_files=data.path
    )
    res = run_cli(args + ["--task-prompt", "bare"], timeout=240)
    assert res.returncode == 0, res.describe()
    assert res.summary["accuracy"] == 1.0
    assert all(re.search(r"^\(A\) .*\n\(B\) .*\n\(C\) .*\n\(D\) .*$", p, re.MULTILINE) for p in seen)
    assert not any(OURS.render("tasks.gpqa.format") in p for p in seen)


def test_bare_gpqa_sends_the_cells_untrimmed_as_maslab(tmp_path, scripted_server):
    """Issue 27.6 through the CLI: under `bare` the question and options reach the model as the
    data holds them (MASLab's builder does not trim); the answer is read and scored as usual."""
    row = {"Record ID": "r0", "Question": "  Which boson carries charge?\n",
           "Correct Answer": " photon \n", "Incorrect Answer 1": "gluon",
           "Incorrect Answer 2": "W", "Incorrect Answer 3": "Z"}  # fmt: skip
    data = tmp_path / "gpqa.jsonl"
    data.write_text(json.dumps(row) + "\n")
    seen: list[str] = []

    def answer(req: ScriptedRequest) -> Reply:
        seen.append(req.prompt)
        return Reply("The answer is (A).")

    srv = scripted_server(answer, model=MODEL)
    args = mas_args(
        model=MODEL, base_urls=[srv.base_url], output=tmp_path / "r", task="gpqa", data_files=data
    )
    res = run_cli(args + ["--task-prompt", "bare", "--gpqa-order", "maslab"])
    assert res.returncode == 0, res.describe()
    assert res.summary["accuracy"] == 1.0
    assert seen and seen[0].startswith("  Which boson carries charge?\n") and "(A)  photon \n" in seen[0]


def test_vote_is_matched_by_configuration(tmp_path, scripted_server):
    moderator = {i: [EMPTY, _verdict("\\boxed{0}"), EMPTY] for i in range(4)}
    srv = scripted_server(Protocol(4, moderator), model=MODEL)
    mad = _mas(srv, tmp_path, limit=4)
    assert mad.returncode == 0 and mad.summary["llm_calls_per_sample"] == 6
    mad_run = Path(mad.summary["run_dir"]).name

    other_seed = _mas(srv, tmp_path, "--seed", "1", system="vote", limit=4)
    assert other_seed.returncode == 2
    assert other_seed.stderr.strip().count("\n") == 0  # one line
    assert mad_run in other_seed.stderr and "differs in: seed" in other_seed.stderr
    fewer = _mas(srv, tmp_path, system="vote", limit=3)
    assert fewer.returncode == 2 and "problems (4 vs 3: 1 not among this run's" in fewer.stderr

    vote = _mas(srv, tmp_path, system="vote", limit=4)
    assert vote.returncode == 0, vote.describe()
    assert vote.summary["matched_run"] == mad_run and vote.summary["llm_calls_per_sample"] == 6
    config = json.loads((Path(vote.summary["run_dir"]) / "config.json").read_text())
    assert config["matched_to"] == mad_run and config["votes"] == 6 and config["matched_system"] == "mad"

    debate = _mas(srv, tmp_path, system="debate", limit=4)
    assert debate.returncode == 0
    by_system = _mas(srv, tmp_path, "--match-system", "debate", system="vote", limit=4)
    assert by_system.returncode == 0, by_system.describe()
    assert by_system.summary["matched_run"] == Path(debate.summary["run_dir"]).name
    explicit = _mas(
        srv, tmp_path, "--seed", "1", "--match-run", mad.summary["run_dir"], system="vote", limit=4
    )
    assert explicit.returncode == 0 and explicit.summary["matched_run"] == mad_run
