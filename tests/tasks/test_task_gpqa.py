"""GPQA-Diamond: option shuffling, prompt layout, letter scoring."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from mars_eval.mas.util import debate_question
from mars_eval.tasks import make_task
from mars_eval.tasks.gpqa import GPQATask, shuffled_options


def _rows(n: int) -> list[dict]:
    return [
        {
            "Record ID": f"rec{i:04d}",
            "Question": f"Which value is right for item {i}?",
            "Correct Answer": f"right {i}",
            "Incorrect Answer 1": f"wrong-a {i}",
            "Incorrect Answer 2": f"wrong-b {i}",
            "Incorrect Answer 3": f"wrong-c {i}",
            "Subdomain": "Physics",
        }
        for i in range(n)
    ]


@pytest.fixture(scope="module")
def gpqa_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("gpqa") / "gpqa_diamond.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in _rows(400)))
    return path


def test_correct_letter_spread_over_a_to_d(gpqa_file: Path) -> None:
    problems = make_task("gpqa").load(data_files=str(gpqa_file), seed=0)
    counts = Counter(p.gold for p in problems)
    assert set(counts) == set("ABCD")
    for letter, n in counts.items():
        assert 0.15 <= n / len(problems) <= 0.35, (letter, counts)
    for p in problems:  # the gold letter really labels the correct option
        i = "ABCD".index(p.gold)
        assert p.meta["options"][i].startswith("right ")


def test_shuffle_is_deterministic_and_seed_dependent(gpqa_file: Path) -> None:
    task = make_task("gpqa-diamond")
    first = task.load(data_files=str(gpqa_file), seed=0)
    again = task.load(data_files=str(gpqa_file), seed=0)
    other = task.load(data_files=str(gpqa_file), seed=1)
    assert [p.meta["options"] for p in first] == [p.meta["options"] for p in again]
    assert [p.prompt for p in first] == [p.prompt for p in again]
    changed = sum(a.meta["options"] != b.meta["options"] for a, b in zip(first, other, strict=True))
    assert changed > 0.5 * len(first)  # 23 of 24 orders differ by chance: expect ~96%
    assert len({tuple(p.meta["options"]) for p in first}) == len(first)


def test_shuffled_options_keys_on_seed_and_question() -> None:
    opts = shuffled_options("R", ["x", "y", "z"], 3, "q1")
    assert opts == shuffled_options("R", ["x", "y", "z"], 3, "q1")
    assert sorted(opts[0]) == ["R", "x", "y", "z"] and opts[0]["ABCD".index(opts[1])] == "R"
    orders = {tuple(shuffled_options("R", ["x", "y", "z"], 3, f"q{i}")[0]) for i in range(40)}
    assert len(orders) > 10


def test_prompt_layout_and_ids(gpqa_file: Path) -> None:
    p = make_task("gpqa").load(data_files=str(gpqa_file), seed=0)[7]
    assert p.id == "rec0007"
    lines = p.question.splitlines()
    assert lines[0] == "Which value is right for item 7?"
    assert [ln[:3] for ln in lines[2:6]] == ["A) ", "B) ", "C) ", "D) "]
    assert p.prompt == f"{p.question}\n\n{GPQATask().answer_format}"
    assert "Answer: X" in p.prompt and "Answer: X" not in p.question


def test_ids_without_record_id_are_hashes(tmp_path: Path) -> None:
    rows = [{k: v for k, v in r.items() if k != "Record ID"} for r in _rows(3)]
    path = tmp_path / "g.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    ids = [p.id for p in make_task("gpqa").load(data_files=str(path))]
    assert len(set(ids)) == 3 and all(i.startswith("gpqa-") for i in ids)
    assert ids == [p.id for p in make_task("gpqa").load(data_files=str(path))]


@pytest.mark.parametrize(
    ("text", "gold", "expected"),
    [
        ("Reasoning...\nAnswer: C", "C", True),
        ("**Answer:** (c)", "C", True),  # a lowercase letter counts in parentheses only
        ("The answer is a tricky one; I pick nothing.", "A", False),
        ("The correct answer is B)", "C", False),
        ("<think>Answer: C</think>\nAnswer: A", "C", False),
        ("A good approach is to think. I cannot tell.", "A", False),
        ('{"answer": "D"}', "D", True),
    ],
)
def test_extract_and_score(text: str, gold: str, expected: bool) -> None:
    task = make_task("gpqa")
    assert task.score(task.extract(text), gold) is expected


def test_canonical_letters_group_votes() -> None:
    task = make_task("gpqa")
    assert {task.canonical(a) for a in ["C", "(C)", "c", " C) ", "Answer: C", "**C**"]} == {"C"}
    assert task.canonical("B") != task.canonical("C")
    assert task.score("(c)", "C") and not task.score(None, "C") and not task.score("", "C")


def test_bare_sends_the_cells_as_the_data_holds_them(tmp_path: Path) -> None:
    """Issue 27.6: MASLab's builder puts the question and options into the query untrimmed;
    `bare` does the same, `ours` trims them. Ids do not move (they come from the trimmed text)."""
    row = {**_rows(1)[0], "Question": "  Which value is right?\n", "Correct Answer": " right \n"}
    path = tmp_path / "ws.jsonl"
    path.write_text(json.dumps(row) + "\n")
    bare_task = make_task("gpqa-diamond-maslab", task_prompt="bare")
    bare = bare_task.load(data_files=str(path))[0]
    ours = make_task("gpqa-diamond-maslab").load(data_files=str(path))[0]
    assert bare.prompt.startswith("  Which value is right?\n") and "(A)  right \n" in bare.prompt
    assert debate_question(bare, bare_task) == bare.prompt  # the debate systems get it untrimmed too
    assert "Which value is right?" in ours.prompt and "  Which" not in ours.prompt
    assert "A) right\n" in ours.prompt
    assert bare.id == ours.id and bare.gold == ours.gold == "A"
