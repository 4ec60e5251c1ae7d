"""The verdict parser: tolerant of real model output, never executing it, never inventing an answer."""

from __future__ import annotations

import builtins
import json
import os
import random

import pytest
from mas_fakes import FakeChoiceTask, FakeMathTask

from mars_eval.mas.verdict import (
    extract_verdict_answer,
    find_json_objects,
    normalize_answer_text,
    parse_json_object,
    parse_verdict,
    to_strict_json,
)

LIANG = (
    '{"Whether there is a preference": "Yes", "Supported Side": "Negative", '
    '"Reason": "the negative side\'s algebra is right", "debate_answer": "72"}'
)


@pytest.mark.parametrize(
    "text",
    [
        LIANG,
        f"```json\n{LIANG}\n```",
        f"```\n{LIANG}\n```\nThat is my verdict.",
        f"After weighing both sides, here is my verdict: {LIANG} Let me know if anything is unclear.",
        f"<think>Maybe {{'answer': '73'}}? No.</think>\n{LIANG}",
        f'thinking with only a closing tag {{"answer": "1"}}</think>{LIANG}',
        f'{{"answer": "73"}} was my first thought, but on reflection:\n{LIANG}',
    ],
)
def test_liang_style_verdicts_in_wrappers(text):
    v = parse_verdict(text)
    assert v is not None
    assert (v.preferred, v.side, v.answer) == (True, "negative", "72")
    assert "algebra" in v.reason


def test_python_style_dicts_and_sloppy_json():
    text = "{'preference': True, 'supported_side': 'affirmative', 'reason': None, 'answer': '73',}"
    v = parse_verdict(text)
    assert (v.preferred, v.side, v.reason, v.answer) == (True, "affirmative", "", "73")
    assert parse_json_object('{answer: "5", preference: no, list: [1, 2,],}') == {
        "answer": "5",
        "preference": "no",
        "list": [1, 2],
    }
    assert parse_verdict('{"preference": false, "answer": null}').answer is None
    assert parse_verdict('{"answer": 73}').answer == "73"
    assert parse_json_object('{"x": 1e5, "y": -2.5E-3}') == {"x": 1e5, "y": -2.5e-3}
    # Raw newlines inside strings and doubled quotes in single-quoted strings.
    assert parse_json_object('{"reason": "line one\nline two", \'a\': \'say "hi"\'}') == {
        "reason": "line one\nline two",
        "a": 'say "hi"',
    }


def test_latex_backslashes_survive():
    # Unescaped LaTeX inside a JSON string: \b, \f, \t, \r, \n would be read as control characters.
    raw = r'{"answer": "\boxed{\frac{1}{2}}", "reason": "\text{since } x \neq 3 \times \sqrt{2} \right)"}'
    obj = parse_json_object(raw)
    assert obj["answer"] == r"\boxed{\frac{1}{2}}"
    assert obj["reason"] == r"\text{since } x \neq 3 \times \sqrt{2} \right)"
    # Properly escaped JSON is read as JSON. (Documented ambiguity: an escaped tab or form feed
    # followed directly by a letter, "\\tc", reads as LaTeX; "\\n" + letters only for \\neq-like.)
    assert parse_json_object(json.dumps({"answer": "\\boxed{7}", "r": "a\nb\t c\nneat"})) == {
        "answer": "\\boxed{7}",
        "r": "a\nb\t c\nneat",
    }
    assert parse_json_object(r'{"a": "caf\u00e9 \"q\""}') == {"a": 'café "q"'}


def test_outer_object_wins_over_nested_and_latex_braces_are_skipped():
    assert parse_json_object('{"answer": "5", "extra": {"answer": "6"}}') == {
        "answer": "5",
        "extra": {"answer": "6"},
    }
    prose = "We have $\\frac{1}{2} + \\frac{3}{4}$ and {x | x > 0}. " * 400
    assert parse_verdict(prose + '{"answer": "73"}').answer == "73"
    assert find_json_objects(prose) == []


def test_verdict_keys_beat_a_later_unrelated_object():
    text = '{"answer": "73", "preference": true}\nFor reference, the config was {"temperature": 0.6}.'
    assert parse_verdict(text).answer == "73"


@pytest.mark.parametrize("text", ["", "no json here", "{", "}", "{]", "{'a': }", "```json\n```", None, 42])
def test_nothing_to_parse(text):
    assert parse_verdict(text) is None  # type: ignore[arg-type]


def test_strict_json_rewrite_leaves_valid_json_alone():
    original = {"a": [1, 2.5, None, True], "b": {"c": 'it\'s "quoted"'}, "d": ""}
    assert json.loads(to_strict_json(json.dumps(original))) == original


@pytest.mark.parametrize(
    ("raw", "core"),
    [
        ("73", "73"),
        ("\\boxed{73}", "73"),
        ("$\\boxed{73}$.", "73"),
        ("The final answer is 73", "73"),
        ("(C)", "C"),
        ("C)", "C"),
        ("Option c", "C"),
        ("c", "c"),
        ("`42`", "42"),
        ("\\(x+1\\)", "x+1"),
        # a side named after the answer is not part of it (a moderator's habit)
        ("204 (Affirmative)", "204"),
        ("210 (the negative side's answer)", "210"),
        ("$\\boxed{204}$ (affirmative side)", "204"),
        ("C (Negative)", "C"),
        ("(x+1) (y)", "(x+1) (y)"),
    ],
)
def test_normalize_answer_text(raw, core):
    assert normalize_answer_text(raw) == core


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("73", "73"),
        ("\\boxed{73}", "73"),
        ("$73$", "73"),
        ("The answer is 73", "73"),
        ("none", None),
        ("", None),
    ],
)
def test_extract_verdict_answer_math(raw, expected):
    assert extract_verdict_answer(raw, FakeMathTask()) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [("C", "C"), ("(C)", "C"), ("\\boxed{C}", "C"), ("c", "C"), ("E", None), ("42", None)],
)
def test_extract_verdict_answer_choice(raw, expected):
    assert extract_verdict_answer(raw, FakeChoiceTask()) == expected


def test_extract_verdict_answer_with_the_real_tasks():
    tasks = pytest.importorskip("mars_eval.tasks")
    math_task, gpqa = tasks.make_task("arith"), tasks.make_task("gpqa")
    for raw in ("73", "\\boxed{73}", "$73$", " 73. ", "The answer is 73", "Final answer: $\\boxed{73}$"):
        assert math_task.canonical(extract_verdict_answer(raw, math_task)) == math_task.canonical("73"), raw
    assert math_task.score(extract_verdict_answer("073", math_task), "73")
    assert extract_verdict_answer("no idea", math_task) is None
    for raw in ("C", "(C)", "\\boxed{C}", "Option C", "c", "C) 3.5 eV", "The answer is C"):
        assert extract_verdict_answer(raw, gpqa) == "C", raw
    assert extract_verdict_answer("E", gpqa) is None


# --- fuzz: never crash, never execute, never invent -----------------------------------------


@pytest.fixture
def no_execution(monkeypatch):
    """Any attempt to evaluate or run model text fails the test."""

    def forbidden(*args, **kwargs):
        raise AssertionError("model text was executed")

    monkeypatch.setattr(builtins, "eval", forbidden)
    monkeypatch.setattr(builtins, "exec", forbidden)
    monkeypatch.setattr(os, "system", forbidden)
    monkeypatch.setattr(os, "popen", forbidden)


ADVERSARIAL = [
    "__import__('os').system('x')",
    "{\"answer\": __import__('os').system('x')}",
    "{'answer': eval('1+1'), 'reason': exec('import os')}",
    '{"answer": "\\"}; __import__(\'os\').system(\'x\'); {\\""}',
    "{" * 100_000,
    "}" * 100_000,
    '{"a": ' + "[" * 50_000 + "]" * 50_000 + "}",
    '{"a": ' * 5_000 + "1" + "}" * 5_000,
    "{'" * 200_000,
    '{"' + "\\" * 100_000 + '"}',
    "<think>" * 10_000 + "{}" + "</think>" * 10_000,
    "```json\n" * 5_000,
    '{"answer": "' + "x" * 1_000_000 + '"}',
    "{" + ('"k": "v", ' * 100_000) + "}",
    '\x00\xff\ud7ff{"answer": "\u2028"}',
]


@pytest.mark.parametrize("text", ADVERSARIAL, ids=range(len(ADVERSARIAL)))
def test_adversarial_inputs(text, no_execution):
    # How fast such input is parsed is measured in benchmarks/, not bounded here.
    v = parse_verdict(text)
    if v is not None and v.answer is not None:
        assert isinstance(v.answer, str)


def test_one_megabyte_of_json_ish_noise_holds_no_verdict(no_execution):
    rng = random.Random(7)
    alphabet = "{}[]\"':,\\ truefalsenull0123456789abc\n"
    text = "".join(rng.choice(alphabet) for _ in range(1_000_000))
    v = parse_verdict(text)  # at most an empty object: no side, no preference, no answer
    assert v is None or (v.answer, v.side, v.preferred) == (None, None, None)


def test_random_bytes_and_truncations(no_execution):
    rng = random.Random(0)
    for _ in range(300):  # noise holds no verdict: nothing is read from it
        blob = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 400)))
        assert parse_verdict(blob.decode("utf-8", errors="replace")) is None
        assert parse_verdict(blob.decode("latin-1")) is None
    good = f"Verdict:\n```json\n{LIANG}\n```"
    for cut in range(len(good) + 1):
        v = parse_verdict(good[:cut])
        if v is not None and cut < len(good) - 4:
            # A truncated object never yields the full verdict, only complete inner pieces.
            assert v.answer in (None, "72")
    # Random single-character mutations of a valid verdict: the answer read is always text that
    # is in the reply (never invented), and most mutations (those inside the reason's text, a
    # key's quoting the parser tolerates) still give the verdict's answer.
    kept = 0
    for _ in range(500):
        chars = list(LIANG)
        chars[rng.randrange(len(chars))] = rng.choice("{}[]\"',:\\ xT")
        text = "".join(chars)
        v = parse_verdict(text)
        assert v is None or v.answer is None or v.answer in text, text
        kept += v is not None and v.answer == "72"
    assert kept > 250
