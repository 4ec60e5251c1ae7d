"""The references' verdict reading (`mad_verdict=reference`): what their eval() reads, read with
ast.literal_eval, never executed; and where the two differ (verdict.py's docstring)."""

from __future__ import annotations

import ast

import pytest

from mars_eval.mas.verdict import read_reference_verdict, strip_json_fences

BODY = (
    '{"Whether there is a preference": "Yes", "Supported Side": "Negative", "Reason": "r", '
    '"debate_answer": "73"}'
)


def test_a_python_literal_dict_with_the_key_is_read():
    v = read_reference_verdict(BODY)
    assert v is not None and v.raw_answer == "73" and v.answer == "73"
    assert (v.preferred, v.side, v.reason) == (True, "negative", "r")
    assert read_reference_verdict("  {'debate_answer': 73, }\n").raw_answer == 73  # Python syntax
    assert read_reference_verdict("{'debate_answer': ''}").raw_answer == ""


@pytest.mark.parametrize(
    "text",
    [
        "Verdict: " + BODY,  # prose around it
        BODY + "\nThat is all.",
        '{"debate_answer": "73", "ok": true}',  # JSON literals are Python names
        '{"debate_answer": null}',
        '{"answer": "73"}',  # only the exact key
        '{"Debate_answer": "73"}',
        "```json\n" + BODY + "\n```",  # a fence (the judge's reply is read as it is)
        '["73"]',
        '"73"',
        "{[1]: 2}",  # unhashable key
        "",
    ],
)
def test_what_the_references_cannot_index_is_unreadable(text):
    assert read_reference_verdict(text) is None


@pytest.mark.parametrize(
    "text",
    [
        '{"debate_answer": 70 + 3}',
        '{"debate_answer": str(73)}',
        '{"debate_answer": "7" "3" + ""}',
        "dict(debate_answer=1)",
    ],
)
def test_what_only_eval_reads_is_unreadable_and_never_run(text):
    """Operators and calls: eval() would read these; literal_eval refuses (documented)."""
    assert read_reference_verdict(text) is None
    with pytest.raises(ValueError):
        ast.literal_eval(text)


def test_strings_read_as_python_reads_them():
    v = read_reference_verdict('{"debate_answer": "\\boxed{73}"}')
    assert v.raw_answer == "\boxed{73}"  # one backslash: Python's backspace escape, as eval reads it
    assert read_reference_verdict('{"debate_answer": r"\\boxed{73}"}').raw_answer == "\\boxed{73}"


def test_the_moderator_reply_is_de_fenced_as_maslab():
    assert strip_json_fences("```json\n" + BODY + "\n```\n") == BODY
    assert strip_json_fences("Here ```" + BODY + "``` done") == "Here " + BODY + " done"
    assert read_reference_verdict(strip_json_fences("```json\n" + BODY + "\n```")) is not None
