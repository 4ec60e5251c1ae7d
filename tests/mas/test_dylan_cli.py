"""`mars-eval mas --system dylan` through the CLI against the scripted endpoint: which variant runs
for aime24, gpqa-diamond and math500 (MASLab's dispatch), what every agent is sent and the
answer, for reply sequences written here.

The main variant's orders (`GOLDEN_*`: per call, in MASLab's call order, the agent, its round and
whose replies it was shown, in order; and whose reply is the final text) are what MASLab's own
DyLAN_Main (MASWorks/MASLab 4ecccf5, run in isolation on these same replies with a fake model
endpoint) produced for the same seeds. The messages are then built from the pack `ours`.
"""

from __future__ import annotations

import json
from pathlib import Path

from mars_eval.mas.base import derive_seed
from mars_eval.mas.util import debate_question
from mars_eval.prompts import load_pack
from mars_eval.run.store import expand_record
from mars_eval.tasks import make_task
from tests.support.cli import mas_args, run_cli
from tests.support.scripted_policy import Reply

MODEL = "scripted-model"
AGENTS = [f"agent{i}" for i in range(4)] + ["ranker"]


def unique(agent: int, rnd: int, tail: str) -> str:
    """A reply no other reply agrees with (its words are its own)."""
    return " ".join(f"path{agent}x{rnd}y{i}" for i in range(7)) + f" {tail}"


# --- reply sequences, by problem: (agent index or "ranker", round) -> text -------------------------
def aime_reply(agent: int | str, rnd: int) -> str:
    """No agreement in rounds 1-2; the ranker names replies 2 and 3 last; round 3 disagrees."""
    if agent == "ranker":
        return "Reply 1 and reply 4 are close, yet [2,3] are the strongest."
    return unique(agent, rnd, f"hence \\boxed{{{100 + 10 * rnd + agent}}}")


def gpqa_agree_reply(agent: int | str, rnd: int) -> str:
    """Round 2 agrees word for word: three answers and the round stops."""
    if rnd == 2:
        return "Comparing the replies, the third option survives every check. Answer: C"
    return unique(agent, rnd, f"Answer: {'ABCD'[agent]}")


def gpqa_unranked_reply(agent: int | str, rnd: int) -> str:
    """The ranker names no pair: two replies are drawn at random, as MASLab."""
    if agent == "ranker":
        return "None of these stands out to me."
    return unique(agent, rnd, f"Answer: {'ABCD'[(agent + rnd) % 4]}")


def math_reply(agent: int | str, rnd: int) -> str:
    """The math variant: no agreement, the ranker's last pair is [2, 4]."""
    if agent == "ranker":
        return "[1, 2] is tempting, but the best are [2, 4]."
    return unique(agent, rnd, f"so \\boxed{{{10 * rnd + agent}}}")


# --- what MASLab's DyLAN_Main did with these replies ----------------------------------------------
# (agent, round, shown) in call order, then the final text's (agent, round). The ranker's round is
# 0 and it is shown round 2.
GOLDEN_AIME = {
    "calls": [
        ["agent2", 1, []],
        ["agent3", 1, []],
        ["agent1", 1, []],
        ["agent0", 1, []],
        ["agent3", 2, [3, 1, 2, 0]],
        ["agent1", 2, [2, 1, 0, 3]],
        ["agent2", 2, [2, 3, 0, 1]],
        ["agent0", 2, [2, 0, 1, 3]],
        ["ranker", 0, [3, 1, 2, 0]],
        ["agent3", 3, [3, 2, 0, 1]],
        ["agent2", 3, [1, 0, 3, 2]],
    ],
    "final": ["agent3", 3],
}  # --seed 0, --dylan-shuffle sample: MASLab seeded with derive_seed(0, "0#0", "dylan")
GOLDEN_GPQA_AGREE = {
    "calls": [
        ["agent2", 1, []],
        ["agent0", 1, []],
        ["agent1", 1, []],
        ["agent3", 1, []],
        ["agent2", 2, [2, 0, 3, 1]],
        ["agent0", 2, [1, 0, 3, 2]],
        ["agent1", 2, [1, 3, 2, 0]],
    ],
    "final": ["agent0", 2],
}  # --dylan-shuffle maslab, --seed 0: MASLab's random_seed 0
GOLDEN_GPQA_UNRANKED = {
    "calls": [
        ["agent2", 1, []],
        ["agent0", 1, []],
        ["agent1", 1, []],
        ["agent3", 1, []],
        ["agent2", 2, [2, 0, 3, 1]],
        ["agent0", 2, [1, 0, 3, 2]],
        ["agent1", 2, [1, 3, 2, 0]],
        ["agent3", 2, [1, 0, 2, 3]],
        ["ranker", 0, [2, 0, 1, 3]],
        ["agent3", 3, [3, 1, 2, 0]],
        ["agent2", 3, [2, 0, 1, 3]],
    ],
    "final": ["agent3", 3],
}


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def _server(scripted_server, replies: dict[str, object], ids: dict[str, str]):
    """An endpoint answering by problem tag and (agent, call number), logging what each was sent."""
    who = {
        derive_seed(0, f"{pid}#0", agent, n): (tag, agent, n)
        for tag, pid in ids.items()
        for agent in AGENTS
        for n in range(4)
    }
    sent: list[tuple[str, str, int, list[dict]]] = []

    def policy(req):
        tag, agent, n = who[req.seed]
        sent.append((tag, agent, n, req.messages))
        if agent == "ranker":
            return Reply(replies[tag]("ranker", 0))
        return Reply(replies[tag](int(agent[-1]), n + 1))

    return scripted_server(policy, model=MODEL), sent


def _run(tmp_path, srv, task: str, data: Path, extra: list[str]):
    args = mas_args(
        model=MODEL, base_urls=[srv.base_url], output=tmp_path / "runs", task=task, system="dylan"
    )
    res = run_cli([*args, "--data-files", str(data), "--seed", "0", *extra], timeout=240)
    assert res.returncode == 0, res.describe()
    s = res.summary
    records = [json.loads(x) for x in (Path(s["run_dir"]) / "samples.jsonl").read_text().splitlines()]
    for r in records:
        expand_record(r)  # final_text is stored as the index of the transcript entry holding it
    return s, records


def _main_expected(question: str, golden, reply) -> dict[tuple[str, int], list[dict]]:
    """Each call's messages under the pack ours, from MASLab's orders."""
    pack = load_pack()
    system = {"role": "system", "content": pack.render("mas.dylan.main_system")}

    def responses(shown: list[int], rnd: int) -> str:
        return "".join(
            pack.render("mas.dylan.main_response", index=k, text=reply(a, rnd))
            for k, a in enumerate(shown, 1)
        )

    out = {}
    for agent, rnd, shown in golden["calls"]:
        if agent == "ranker":
            text = pack.render("mas.dylan.main_rank", question=question, responses=responses(shown, 2))
            out[("ranker", 0)] = [{"role": "user", "content": text}]
        elif rnd == 1:
            out[(agent, 1)] = [system, {"role": "user", "content": question}]
        else:
            text = pack.render(
                "mas.dylan.main_update",
                question=question,
                responses=responses(shown, rnd - 1),
                count=len(shown),
            )
            out[(agent, rnd)] = [system, {"role": "user", "content": text}]
    return out


def _check_main(sent, tag: str, question: str, golden, reply, record, task) -> None:
    got = {(agent, 0 if agent == "ranker" else n + 1): msgs for t, agent, n, msgs in sent if t == tag}
    expected = _main_expected(question, golden, reply)
    assert sorted(got) == sorted(expected)  # the same calls (concurrent ones may arrive in any order)
    for key, messages in expected.items():
        assert got[key] == messages, key
    agent, rnd = golden["final"]
    final = reply(int(agent[-1]), rnd)
    assert record["final_text"] == final and record["answer"] == task.extract(final)
    assert record["calls"] == len(golden["calls"]) and record["details"]["variant"] == "main"


def test_aime_runs_the_main_variant_as_maslab(tmp_path, scripted_server):
    data = _write(
        tmp_path / "aime.jsonl", [{"id": 0, "problem": "[Q00] Count the lattice points.", "answer": "130"}]
    )
    srv, sent = _server(scripted_server, {"[Q00]": aime_reply}, {"[Q00]": "0"})
    s, (record,) = _run(tmp_path, srv, "aime24", data, [])
    task = make_task("aime24")
    question = debate_question(task.load(data_files=str(data))[0], task)
    _check_main(sent, "[Q00]", question, GOLDEN_AIME, aime_reply, record, task)
    assert record["details"]["unparsed"] == 0 and s["errors"] == 0


def test_gpqa_runs_the_main_variant_as_maslab_with_its_seed(tmp_path, scripted_server):
    rows = [
        {
            "Question": f"[Q0{i}] Which carrier mediates process {i}?",
            "Correct Answer": f"gluon {i}",
            "Incorrect Answer 1": f"photon {i}",
            "Incorrect Answer 2": f"muon {i}",
            "Incorrect Answer 3": f"pion {i}",
            "Record ID": f"rec{i}",
        }
        for i in range(2)
    ]
    data = _write(tmp_path / "gpqa.jsonl", rows)
    replies = {"[Q00]": gpqa_agree_reply, "[Q01]": gpqa_unranked_reply}
    srv, sent = _server(scripted_server, replies, {"[Q00]": "rec0", "[Q01]": "rec1"})
    _, records = _run(tmp_path, srv, "gpqa-diamond", data, ["--dylan-shuffle", "maslab"])
    task = make_task("gpqa-diamond")
    problems = {p.id: p for p in task.load(data_files=str(data))}
    by_id = {r["problem_id"]: r for r in records}
    for tag, pid, golden in (("[Q00]", "rec0", GOLDEN_GPQA_AGREE), ("[Q01]", "rec1", GOLDEN_GPQA_UNRANKED)):
        question = debate_question(problems[pid], task)
        _check_main(sent, tag, question, golden, replies[tag], by_id[pid], task)
    assert by_id["rec0"]["how"] == "agreement in round 2" and by_id["rec0"]["answer"] == "C"
    assert by_id["rec1"]["details"]["unparsed"] == 1


def test_math500_runs_the_math_variant(tmp_path, scripted_server):
    data = _write(
        tmp_path / "math500.jsonl",
        [{"problem": "[Q00] Evaluate the sum.", "answer": "23", "unique_id": "t/1.json"}],
    )
    srv, sent = _server(scripted_server, {"[Q00]": math_reply}, {"[Q00]": "t/1.json"})
    _, (record,) = _run(tmp_path, srv, "math500", data, [])
    task = make_task("math500")
    question = debate_question(task.load(data_files=str(data))[0], task)
    pack = load_pack()
    system = {"role": "system", "content": pack.render("mas.dylan.system")}
    got = {(agent, n + 1): msgs for _, agent, n, msgs in sent}
    assert sorted(got) == sorted(
        [(f"agent{a}", r) for a in range(4) for r in (1, 2)] + [("ranker", 1), ("agent1", 3), ("agent3", 3)]
    )
    for a in range(4):
        assert got[(f"agent{a}", 1)] == [
            system,
            {"role": "user", "content": pack.render("mas.dylan.opening", question=question)},
        ]
        everyone = "".join(pack.render("mas.dylan.solution", text=math_reply(b, 1)) for b in range(4))
        update = pack.render("mas.dylan.update", question=question, solutions=everyone)
        assert got[(f"agent{a}", 2)] == [system, {"role": "user", "content": update}]
    numbered = "".join(
        pack.render("mas.dylan.numbered", index=b + 1, text=math_reply(b, 2)) for b in range(4)
    )
    rank = pack.render("mas.dylan.rank", question=question, solutions=numbered)
    assert got[("ranker", 1)] == [{"role": "user", "content": rank}]
    picked = "".join(pack.render("mas.dylan.solution", text=math_reply(b, 2)) for b in (1, 3))
    update = pack.render("mas.dylan.update", question=question, solutions=picked)
    assert got[("agent1", 3)] == got[("agent3", 3)] == [system, {"role": "user", "content": update}]
    # a 1-1 tie in the last layer goes to the first picked agent, as MASLab's most-frequent
    assert record["answer"] == "31" and record["details"]["variant"] == "math"
    assert record["details"]["picked"] == ["agent1", "agent3"] and record["calls"] == 11
