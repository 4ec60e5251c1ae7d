"""MASLab's judge prompt imported from a checkout into the pack `maslab` (importers.maslab_judge).

The checkout here is a stand-in written in our own words, shaped as MASLab's
evaluations/evaluate_xverify.py is: `format_prompt(query, response, ground_truth)` returning
one f-string. No reference prose is in the repository.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from mars_eval.prompts.importers import ImportFailure, import_maslab
from mars_eval.prompts.importers.maslab_judge import JUDGE_FILE
from mars_eval.tasks.judge import JudgeScorer
from mars_eval.tasks.scorers import ScoreInput
from tests.test_prompt_packs import _fake_maslab

_JUDGE = '''
def format_prompt(query, response, ground_truth):
    prompt = f"""Grade it. Say Correct or Incorrect.
Q: {str(query)}
A: {str(response)}
Gold: {str(ground_truth)} (braces {{kept}})
Judgement:
"""
    return prompt

def eval_func_xverify(item, llm):
    return None
'''


def _with_judge(root: Path, text: str = _JUDGE) -> Path:
    _fake_maslab(root)
    (root / JUDGE_FILE).parent.mkdir(parents=True, exist_ok=True)
    (root / JUDGE_FILE).write_text(textwrap.dedent(text))
    return root


def test_the_judge_prompt_is_imported_as_a_template(tmp_path: Path) -> None:
    pack = import_maslab(_with_judge(tmp_path / "MASLab"))
    assert "scoring.judge" in pack.source["imported"]
    assert pack.templates["scoring.judge"] == (
        "Grade it. Say Correct or Incorrect.\nQ: {question}\nA: {response}\n"
        "Gold: {gold} (braces {{kept}})\nJudgement:\n"
    )
    scorer = JudgeScorer({}, pack)
    [message] = scorer.messages(ScoreInput("What is 2+2?", "4", "4", "It is 4."))
    assert message["content"].startswith("Grade it.") and "A: It is 4." in message["content"]
    assert "Gold: 4 (braces {kept})" in message["content"]
    assert scorer.identity()["prompt"]["pack"] == "maslab"


def test_a_checkout_without_the_judge_file_keeps_ours(tmp_path: Path) -> None:
    pack = import_maslab(_fake_maslab(tmp_path / "MASLab"))
    assert "scoring.judge" not in pack.source["imported"]
    from mars_eval.prompts import load_pack

    assert pack.templates["scoring.judge"] == load_pack("ours").templates["scoring.judge"]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        (_JUDGE.replace("str(response)", "response.upper()"), "unexpected f-string field"),
        (_JUDGE.replace("{str(ground_truth)}", "none"), "does not hold the response and the correct answer"),
        ("def other():\n    return 1\n", "no function format_prompt"),
    ],
)
def test_a_changed_judge_file_stops_the_import_in_one_line(tmp_path: Path, text: str, said: str) -> None:
    with pytest.raises(ImportFailure, match=said) as info:
        import_maslab(_with_judge(tmp_path / "MASLab", text))
    assert "\n" not in str(info.value)
